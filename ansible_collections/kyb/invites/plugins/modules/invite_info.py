#!/usr/bin/python
# Copyright: invite-reconciler maintainers
# MIT License (see the repository's pyproject.toml)
"""kyb.invites.invite_info: what `reconcile export` would write, read only."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: invite_info
short_description: Read invites as C(reconcile export) would write them
version_added: 0.1.0
description:
  - Reads the given invites from the platform and returns the entries
    C(reconcile export) would write for them (RV(invites)) and the file's text
    (RV(text)), through the invite-reconciler library in-process. Never writes.
  - Redacted as an export is. A server value holding the client secret or a token of
    this task is left out, never written redacted, with a note in RV(notes) saying
    why; so is a value an invite file could not hold. Every entry validates and plans
    clean against the invite it came from.
extends_documentation_fragment:
  - kyb.invites.connection
  - ansible.builtin.action_common_attributes
options:
  ids:
    description: The invite ids to read.
    type: list
    elements: str
    required: true
  schema_ref:
    description:
      - The C($schema) reference of RV(text)'s first line. Falls back to C(schema_ref)
        in O(config), then C(../schemas/invites.schema.json).
    type: str
attributes:
  check_mode:
    support: full
    details: The module never writes; it runs the same in check mode.
  diff_mode:
    support: none
  platform:
    platforms: posix
author:
  - invite-reconciler maintainers (@invite-reconciler)
"""

EXAMPLES = r"""
- name: Bring two invites under git
  kyb.invites.invite_info:
    ids: [inv_8f2k1, inv_3m9q0]
  register: found

- name: Write them as an invite file
  ansible.builtin.copy:
    content: "{{ found.text }}"
    dest: invites/acme.yaml
    mode: "0644"
  delegate_to: localhost
"""

RETURN = r"""
invites:
  description: The entries, each as under C(invites:) in an invite file, the id first.
  returned: success
  type: list
  elements: dict
  sample: [{"id": "inv_8f2k1", "name": "Acme Holdings Ltd", "groups": ["emea"]}]
notes:
  description: Per invite id, what was left out of its entry and why.
  returned: success
  type: dict
  sample: {"inv_8f2k1": ["`phone` left out: '12345' is not E.164 text"]}
not_pending:
  description: Ids of invites no longer pending, which can no longer be updated.
  returned: success
  type: list
  elements: str
text:
  description: The invite file C(reconcile export) would write.
  returned: success
  type: str
"""

import json

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.kyb.invites.plugins.module_utils.invite_reconciler import (
    HAS_LIBRARY,
    connection_spec,
    module_settings,
    require_library,
    shown,
)

if HAS_LIBRARY:
    from reconciler.desired.state import refuse_bad_ids
    from reconciler.errors import ReconcilerError
    from reconciler.service.export import export_entry, render_export
    from reconciler.service.online import open_service


def main():
    spec = connection_spec()
    spec.update(
        ids=dict(type="list", elements="str", required=True),
        schema_ref=dict(type="str"),
    )
    module = AnsibleModule(argument_spec=spec, supports_check_mode=True)
    require_library(module)
    try:
        module.exit_json(changed=False, **read(module))
    except ReconcilerError as error:
        module.fail_json(msg=shown(error))


def read(module):
    ids = list(dict.fromkeys(module.params["ids"]))
    refuse_bad_ids(ids, "ids")
    settings = module_settings(module)
    # The service `reconcile export` calls: the same reads, entries and text.
    with open_service(settings) as service:
        found, failed = service.read_invites(ids)
        base_url = service.base_url
    if failed:
        raise ReconcilerError("nothing read:\n" + "\n".join(f"  {i}: {e}" for i, e in failed))
    entries, notes = [], {}
    for invite in found:
        entry = export_entry(invite)
        # Plain JSON values: the entry's str and list subclasses only steer YAML's style.
        entries.append(json.loads(json.dumps(entry.fields, ensure_ascii=False)))
        if entry.left_out:
            notes[invite.id] = list(entry.left_out)
    schema_ref = module.params["schema_ref"] or settings.schema_ref
    return dict(
        invites=entries,
        notes=notes,
        not_pending=[invite.id for invite in found if not invite.is_pending],
        text=render_export(found, base_url, schema_ref),
    )


if __name__ == "__main__":
    main()
