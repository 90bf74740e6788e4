#!/usr/bin/python
# Copyright: invite-reconciler maintainers
# MIT License (see the repository's pyproject.toml)
"""kyb.invites.invites: plan in check mode, apply otherwise, through the library."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: invites
short_description: Converge a KYB platform's invites to their YAML entries
version_added: 0.1.0
description:
  - Reads the invites named by the entries, compares them with the entries and updates
    only the fields that differ, exactly as C(reconcile plan) then C(reconcile apply)
    do, through the invite-reconciler library in-process.
  - State is always present. The module never creates, deletes or revokes an invite; an
    id the platform does not know fails the task.
  - In check mode it is C(reconcile plan), and sends no write. With C(--diff), each
    invite to update shows the plan's before and after of the fields it changes, headed
    with C(e-mails the invitation again to ...) when the update re-sends its invitation.
  - The server's values in the diff are redacted by the library (the client secret and
    every token of the task); the files' values are shown as they will be sent. To keep
    personal data (names, e-mails, phones) out of AWX or AAP job logs, set the task's
    C(diff) keyword to C(false) (the diff is then neither computed nor shown), and its
    C(no_log) keyword to C(true) to hide the result too; the result's lists of ids
    hold no personal data.
extends_documentation_fragment:
  - kyb.invites.connection
  - ansible.builtin.action_common_attributes
options:
  invites:
    description:
      - The invite entries, each exactly as under C(invites:) in an invite file (C(id),
        C(name), C(email), C(phone), C(primaryContact), C(groups), C(addOns),
        C(attachments), C(resendOnChange)). A field left out is not managed.
      - They get every check C(reconcile validate) makes; a problem is reported as
        C(invites[N]) and the task fails before any request.
      - Mutually exclusive with O(src).
    type: list
    elements: dict
  src:
    description:
      - Invite files or directories (read recursively, C(*.yaml) and C(*.yml)), read on
        the controller like the C(src) of M(ansible.builtin.copy), relative paths from the
        role's or playbook's C(files) directory, then the playbook's. A problem is reported
        as C(path:line:column), as C(reconcile validate) reports it.
      - Mutually exclusive with O(invites).
      - Each item is a path; the module itself receives each file read (the action
        plugin's doing), hence elements C(raw).
    type: list
    elements: raw
  target:
    description: Only these invite ids (C(--target)).
    type: list
    elements: str
    default: []
  exclude:
    description: Leave these invite ids out (C(--exclude)).
    type: list
    elements: str
    default: []
  max_changes:
    description:
      - Fail, writing nothing, when more invites would be updated; enforced in check mode
        too. Falls back to E(RECONCILER_MAX_CHANGES), then C(max_changes) in O(config).
    type: int
  max_resends:
    description:
      - Fail, writing nothing, when more invitations would be e-mailed again; enforced in
        check mode too. Falls back to E(RECONCILER_MAX_RESENDS), then O(config).
    type: int
  parallelism:
    description:
      - Requests in flight at once (1-256); by default the library adapts it to what
        the server allows. Falls back to E(RECONCILER_PARALLELISM), then O(config).
    type: int
  max_rate:
    description:
      - Requests per second at most, all together; a gateway's known limit, where crossing
        it blocks the client for seconds (mod_evasive, a WAF's rate rule). By default the
        rate the server's answers allow. Falls back to E(RECONCILER_MAX_RATE), then
        O(config).
    type: float
  audit_log:
    description:
      - Append a record of every write to this JSON Lines file on the host the task runs
        on, as C(reconcile apply --audit-log) does. Falls back to E(RECONCILER_AUDIT_LOG).
    type: path
attributes:
  check_mode:
    support: full
    details: Check mode is C(reconcile plan). It reads only, and fails as apply would
      refuse (O(max_changes), O(max_resends)).
  diff_mode:
    support: full
    details: One diff per invite to update, the plan's before and after.
  platform:
    platforms: posix
notes:
  - C(changed) is true only when an update was applied (in check mode, when one would
    be). Rate-limit refusals (HTTP 429, 503) are waited out by the library and do not
    fail the task.
  - A re-send that was due but not made, or whose outcome is unknown, fails the task
    with C(changed=true) and the ids in RV(resend_not_made) and RV(resend_unknown).
    Never re-run the task to retry a re-send whose outcome is unknown, as the e-mail
    may have gone out.
seealso:
  - module: kyb.invites.invite_info
author:
  - invite-reconciler maintainers (@invite-reconciler)
"""

EXAMPLES = r"""
- name: Invites as the files in git say
  kyb.invites.invites:
    src: invites/
    base_url: https://api.example.com
    client_id: reconciler-ci
    client_secret: "{{ vault_reconciler_secret }}"
    max_resends: 5

- name: One invite, written in the task
  kyb.invites.invites:
    invites:
      - id: inv_8f2k1
        email: compliance@acme.example
        groups: [emea, enterprise]
        resendOnChange: [email]
"""

RETURN = r"""
summary:
  description: The plan's counts, named as in C(reconcile plan --format json).
  returned: after the plan was made
  type: dict
  sample: {"update": 3, "resend": 1, "unchanged": 297, "error": 0}
planned:
  description: Ids of the invites the plan updates.
  returned: after the plan was made
  type: list
  elements: str
resend_planned:
  description: Of RV(planned), the ids whose invitation the update e-mails again.
  returned: after the plan was made
  type: list
  elements: str
updated:
  description: Ids of the invites updated (never in check mode).
  returned: always
  type: list
  elements: str
resent:
  description: Ids of the invites whose invitation was e-mailed again (never in check mode).
  returned: always
  type: list
  elements: str
resend_not_made:
  description: Ids updated whose due re-send certainly was not made; C(reconcile resend ID).
  returned: on failure
  type: list
  elements: str
resend_unknown:
  description: Ids whose re-send may or may not have gone out; check before sending again.
  returned: on failure
  type: list
  elements: str
update_unknown:
  description: Ids whose update may or may not have been applied (no answer came back).
  returned: on failure
  type: list
  elements: str
diverged:
  description: Ids updated whose platform stored a managed field otherwise than sent
    (normalised, ignored); fix the files or C(reconcile adopt --target ID).
  returned: on failure
  type: list
  elements: str
conflict:
  description: Ids not written because the platform changed them since the plan.
  returned: on failure
  type: list
  elements: str
errors:
  description: Invites that could not be read, planned or updated, each with C(id),
    C(source) and the library's redacted C(message).
  returned: on failure
  type: list
  elements: dict
not_updatable:
  description: Invites that differ from their entries but are no longer pending (never
    updated), each with C(id), C(status) and C(source).
  returned: after the plan was made
  type: list
  elements: dict
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.kyb.invites.plugins.module_utils.invite_reconciler import (
    HAS_LIBRARY,
    connection_spec,
    module_settings,
    require_library,
    shown,
)

if HAS_LIBRARY:
    from reconciler.apply.applier import ResendOutcome, WriteOutcome
    from reconciler.desired.state import Selection, load_texts, refuse_bad_ids, select_invites
    from reconciler.errors import InputError, ReconcilerError
    from reconciler.model.invite import to_json
    from reconciler.safetext import escape, json_text, plural
    from reconciler.service.apply import apply_plan
    from reconciler.service.offline import check_writable
    from reconciler.service.online import open_service

INLINE = "invites"  # the path problems in the task's own entries are found at


def main():
    spec = connection_spec()
    spec.update(
        invites=dict(type="list", elements="dict"),
        # Paths in the task; the action plugin hands the module each file read, as
        # {path, text}, so that the files are the controller's.
        src=dict(type="list", elements="raw"),
        target=dict(type="list", elements="str", default=[]),
        exclude=dict(type="list", elements="str", default=[]),
        max_changes=dict(type="int"),
        max_resends=dict(type="int"),
        parallelism=dict(type="int"),
        max_rate=dict(type="float"),
        audit_log=dict(type="path"),
    )
    module = AnsibleModule(
        argument_spec=spec,
        supports_check_mode=True,
        mutually_exclusive=[("invites", "src")],
        required_one_of=[("invites", "src")],
    )
    if not all(isinstance(item, dict) for item in module.params["src"] or []):
        module.fail_json(
            msg="src is read on the controller by the collection's action plugin: call "
            "the module by its full name, kyb.invites.invites"
        )
    require_library(module)
    run = Run(module)
    try:
        run.run()
    except ReconcilerError as error:
        # With what is known so far: the plan's ids once it was made.
        module.fail_json(msg=shown(error), **run.result)


class Run:
    def __init__(self, module):
        self.module = module
        self.result = dict(changed=False, updated=[], resent=[])

    def run(self):
        module = self.module
        settings = module_settings(module)
        check_writable(settings.audit_log, "open the audit log")
        state = self.desired_state(settings.rules)
        # The service the `reconcile` command calls: the same plan, the same writes.
        with open_service(settings) as service:
            plan = service.plan(state)
            self.report_plan(plan)
            refusal = plan.too_much_change(settings.max_changes, settings.max_resends)
            if refusal is not None:
                self.fail(shown(refusal))
            if module.check_mode or not plan.has_changes:
                self.finish_plan(plan)
            service.refuse_narrow_grant()  # a read-only grant: refused before any write
            applied = apply_plan(service, plan)  # the audit log's own error in the report
        self.finish_apply(plan, applied.report)

    # -- what to converge --------------------------------------------------------

    def desired_state(self, rules):
        params = self.module.params
        if params["src"] is not None:
            state = load_texts([(read["path"], read["text"]) for read in params["src"]], rules)
        else:
            state = _inline_state(params["invites"], rules)
        for warning in state.warnings:  # a policy or a built-in check: fails nothing
            self.module.warn(shown(warning))
        targets, excludes = tuple(params["target"]), tuple(params["exclude"])
        refuse_bad_ids(targets, "target")
        refuse_bad_ids(excludes, "exclude")
        selection = Selection(targets, excludes)
        if not selection.is_everything:
            where = ", ".join(state.files)
            state.invites = select_invites(state.invites, selection, where)
        return state

    # -- the plan ----------------------------------------------------------------

    def report_plan(self, plan):
        summary = plan.summary
        self.result.update(
            summary=dict(
                update=summary.update,
                resend=summary.resend,
                unchanged=summary.unchanged,
                error=summary.failed,
            ),
            planned=[change.id for change in plan.changes],
            resend_planned=[change.id for change in plan.changes if change.resend],
            not_updatable=[],
        )
        for invite in plan.not_updatable:
            invite = invite.redacted()
            self.result["not_updatable"].append(
                dict(id=invite.id, status=invite.status, source=str(invite.source))
            )
            self.module.warn(
                f"{escape(invite.id)} ({invite.source}) differs from its entry but is "
                f"{escape(invite.status)}, no longer updatable: {invite.fix}"
            )
        if self.module._diff:
            self.result["diff"] = [_diff(change.redacted()) for change in plan.changes]
        errors = [_error(failed.redacted()) for failed in plan.failed]
        if errors:
            self.result["errors"] = errors

    def finish_plan(self, plan):
        module, result = self.module, self.result
        result["changed"] = plan.has_changes  # check mode: would change
        resends = result["resend_planned"]
        if module.check_mode and resends:
            invitations = plural(len(resends), "invitation")
            module.warn(f"check mode: a real run e-mails {invitations} again: {_ids(resends)}")
        if plan.failed:
            self.fail(_failed_reading(plan))
        module.exit_json(**result)

    # -- apply -------------------------------------------------------------------

    def finish_apply(self, plan, report):
        result = self.result
        results = report.results

        def ids(*outcomes):
            return [r.change.id for r in results if r.outcome in outcomes or r.resend in outcomes]

        updated = [r.change.id for r in results if r.outcome.updated]
        result["updated"] = updated
        result["resent"] = ids(ResendOutcome.RESENT)
        unknown = ids(WriteOutcome.UPDATE_UNKNOWN)
        # An update that may have landed counts as a change: a handler must not miss it.
        result["changed"] = bool(updated or unknown)
        problems = []
        not_made = [r.change.id for r in report.resends_not_made]
        if not_made:
            result["resend_not_made"] = not_made
            problems.append(
                f"updated, but the invitation was not e-mailed again: {_ids(not_made)} (send "
                "it with `reconcile resend ID`)"
            )
        in_doubt = ids(ResendOutcome.RESEND_UNKNOWN) + [
            r.change.id for r in report.resends_in_doubt
        ]
        if in_doubt:
            result["resend_unknown"] = in_doubt
            problems.append(
                f"the invitation may or may not have been e-mailed again: {_ids(in_doubt)} "
                "(check with the business before sending it again; never re-run to retry)"
            )
        if unknown:
            result["update_unknown"] = unknown
            problems.append(
                f"no answer came back, the update may or may not have been applied: {_ids(unknown)}"
            )
        diverged = ids(WriteOutcome.DIVERGED)
        if diverged:
            result["diverged"] = diverged
            problems.append(
                f"written, but the platform stored a field otherwise: {_ids(diverged)} (fix the "
                "files, or take the platform's value with `reconcile adopt --target ID`)"
            )
        conflict = ids(WriteOutcome.CONFLICT)
        if conflict or report.left_in_conflict:
            result["conflict"] = conflict
            problems.append(
                "changed on the platform since the plan, not written: "
                f"{_ids(conflict) if conflict else report.left_in_conflict}"
            )
        errors = result.get("errors", [])
        for item in results:
            if item.error is not None:
                source = str(item.change.source)
                errors.append(dict(id=item.change.id, source=source, message=shown(item.error)))
            if item.resend_error is not None:
                message = shown(item.resend_error)
                errors.append(dict(id=item.change.id, source=None, message=message))
        if errors:
            result["errors"] = errors
        failed_updates = ids(WriteOutcome.FAILED)
        if failed_updates:
            problems.append(f"not updated: {_ids(failed_updates)}")
        not_started = ids(WriteOutcome.NOT_STARTED)
        if not_started:
            why = report.stopped_by or "the run stopped"
            problems.append(f"not started ({shown(why)}): {_ids(not_started)}")
        if plan.failed:
            problems.append(_failed_reading(plan))
        if report.audit_error is not None:
            problems.append(shown(report.audit_error))
        if problems:
            self.fail("; ".join(problems))
        self.module.exit_json(**result)

    def fail(self, message):
        self.module.fail_json(msg=message, **self.result)


def _ids(ids):
    return ", ".join(ids)


def _failed_reading(plan):
    failed = [f"{escape(f.id)} ({escape(f.redacted().message)})" for f in plan.failed]
    return f"could not be planned, left alone: {_ids(failed)}"


def _error(failed):
    source = None if failed.source is None else str(failed.source)
    return dict(id=failed.id, source=source, message=escape(failed.message))


def _diff(change):
    """The plan's before and after of one change (already redacted), one field a line,
    a contact one sub-field a line, so that the diff points at what changes in it."""
    header = f"{escape(change.id)} ({change.source})"
    after_header = header + (": " + change.resend_label if change.resend else "")
    before = "".join(_field_lines(name, change.before.get(name)) for name in change.patch)
    after = "".join(_field_lines(name, value) for name, value in change.patch.items())
    return dict(before_header=header, after_header=after_header, before=before, after=after)


def _field_lines(name, value):
    plain = to_json(value)
    if isinstance(plain, dict):
        parts = "".join(f"  {escape(key)}: {json_text(part)}\n" for key, part in plain.items())
        return f"{name}:\n{parts}"
    return f"{name}: {json_text(plain)}\n"


def _inline_state(entries, rules):
    """The task's entries as an invite file would hold them, with every check of one;
    a problem is reported as invites[N], the entry it is in."""
    import yaml  # the library's own dependency: imported once the library is there

    parts, starts, line = ["invites:\n"], [], 2
    for entry in entries:
        text = yaml.safe_dump(
            [entry], sort_keys=False, allow_unicode=True, default_flow_style=False, width=1000
        )
        block = "".join(f"  {text_line}\n" for text_line in text.splitlines())
        starts.append(line)
        parts.append(block)
        line += block.count("\n")
    if not entries:
        parts = ["invites: []\n"]
    try:
        return load_texts([(INLINE, "".join(parts))], rules)
    except InputError as error:
        raise ReconcilerError("\n".join(_placed(p, starts) for p in error.problems)) from None


def _placed(problem, starts):
    index = sum(1 for start in starts if start <= problem.line) - 1
    where = INLINE if index < 0 or problem.line == 0 else f"{INLINE}[{index}]"
    return f"{where}: {escape(problem.message)}"


if __name__ == "__main__":
    main()
