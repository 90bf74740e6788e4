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
  - State is always present (O(state)). The module never creates, deletes or revokes an
    invite; an id the platform does not know fails the task.
  - >-
    Run it once per platform, not once per host. The task talks to the platform's API
    from the host it runs on, so a play of several hosts would send the same writes once
    per host, and could e-mail an invitation once per host. Write it in a play of
    C(hosts: localhost), or give the task C(run_once: true); the action plugin fails a
    task that would run for several hosts of a play without C(run_once) (or under the
    C(free) or C(host_pinned) strategy, which run even a C(run_once) task for every
    host), before any request. On one controller, runs of the module that apply (not in
    check mode) also take turns (a lock in the controller's C(ANSIBLE_HOME)): a run
    started while another applies waits for it, then plans again and finds nothing left
    to do.
  - In check mode it is C(reconcile plan), and sends no write. With C(--diff), each
    invite to update shows the plan's before and after of the fields it changes, headed
    with C(e-mails the invitation again to ...) when the update re-sends its invitation.
  - What a job log shows. By default, at C(-v) and above, the result and the task's
    arguments as the module echoes them (C(invocation)), in which each entry of
    O(invites) shows its C(id) and the names of its fields, every value replaced by
    C([not logged]), and each O(src) its path, never the files' text; the host's syslog
    gets the same. The result's lists hold ids only; RV(errors) and RV(not_updatable)
    name ids and places (C(invites[N]), C(path:line)), and a message about a bad
    entry may quote the bad value. The client secret and every token are never shown.
  - >-
    With C(--diff) (or C(diff: true)), each invite to update shows the plan's before
    and after of the fields it changes: the server's values redacted by the library,
    the files' values as they will be sent, so names, e-mails and phones. The task's
    C(diff) keyword set to C(false) leaves the diff out (neither computed nor shown),
    and nothing else. The task's C(no_log) keyword set to C(true) hides the whole result
    and the echo, at every verbosity (the task shows as censored; a failure's message
    too, so its reason is then only in the registered result).
extends_documentation_fragment:
  - kyb.invites.connection
  - ansible.builtin.action_common_attributes
options:
  state:
    description:
      - The invites' fields as the entries say; V(present) is the only state, since the
        module never creates, deletes or revokes an invite. Any other value fails the task
        before any request.
    type: str
    default: present
  invites:
    description:
      - The invite entries, each exactly as under C(invites:) in an invite file (C(id),
        C(name), C(email), C(phone), C(primaryContact), C(groups), C(addOns),
        C(attachments), C(resendOnChange)). A field left out is not managed.
      - They get every check C(reconcile validate) makes; a problem is reported as
        C(invites[N]) (N from 0, the entry's place in the list), and the task fails before
        any request. Diffs and messages name an entry C(invites[N]) too.
      - Echoed back (C(-v)) as each entry's C(id) and field names only.
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
        too.
      - Falls back to E(RECONCILER_MAX_CHANGES), then C(max_changes) in O(config).
    type: int
  max_resends:
    description:
      - Fail, writing nothing, when more invitations would be e-mailed again; enforced in
        check mode too.
      - Falls back to E(RECONCILER_MAX_RESENDS), then C(max_resends) in O(config).
    type: int
  parallelism:
    description:
      - Requests in flight at once (1-256); by default the library adapts it to what
        the server allows.
      - Falls back to E(RECONCILER_PARALLELISM), then C(parallelism) in O(config).
    type: int
  max_rate:
    description:
      - Requests per second at most, all together; a gateway's known limit, where crossing
        it blocks the client for seconds (mod_evasive, a WAF's rate rule). By default the
        rate the server's answers allow.
      - Falls back to E(RECONCILER_MAX_RATE), then C(max_rate) in O(config).
    type: float
  audit_log:
    description:
      - Append a record of every write to this JSON Lines file on the host the task runs
        on, as C(reconcile apply --audit-log) does.
      - Falls back to E(RECONCILER_AUDIT_LOG), then C(audit_log) in O(config).
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
- name: Invites as the files in git say (once, whatever the play's hosts)
  run_once: true
  kyb.invites.invites:
    src: invites/
    base_url: https://api.example.com
    client_id: reconciler-ci
    client_secret: "{{ vault_reconciler_secret }}"
    max_resends: 5

- name: A platform whose certificate a private CA issued
  run_once: true
  kyb.invites.invites:
    src: invites/
    base_url: https://kyb.internal.example
    ca_path: /etc/pki/kyb-ca.pem
    timeout: 60

- name: One invite, written in the task
  run_once: true
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

import re

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
    from reconciler.errors import FileProblem, InputError, ReconcilerError
    from reconciler.model.invite import DesiredInvite, SourceLocation, to_json
    from reconciler.output import NOT_UPDATABLE_FIX, resend_note
    from reconciler.safetext import escape, json_text, plural
    from reconciler.service.apply import apply_plan
    from reconciler.service.offline import check_writable
    from reconciler.service.online import open_service

INLINE = "invites"  # the path problems in the task's own entries are found at
NOT_LOGGED = "[not logged]"  # an entry's value in the module's echo of its arguments
# invites:LINE or invites:LINE:COLUMN of the document the task's entries are loaded as
_INLINE_PLACE = re.compile(r"(?<![\w/.-])invites:(\d+)(?::\d+)?")


class _Module(AnsibleModule):
    """AnsibleModule whose echo of the task's arguments (the result's invocation at -v,
    the host's syslog) holds no value of an entry: personal data (names, e-mails,
    phones) stays out of job logs; ids and paths stand for the entries and the files."""

    def _echoed(self):
        params = dict(getattr(self, "params", None) or {})
        if isinstance(params.get("invites"), list):
            params["invites"] = [_echo_entry(entry) for entry in params["invites"]]
        if isinstance(params.get("src"), list):
            params["src"] = [r.get("path") if isinstance(r, dict) else r for r in params["src"]]
        return params

    def _log_invocation(self):
        params = self.params
        self.params = self._echoed()
        try:
            super()._log_invocation()
        finally:
            self.params = params

    def _return_formatted(self, kwargs):
        kwargs.setdefault("invocation", {"module_args": self._echoed()})
        super()._return_formatted(kwargs)


def _echo_entry(entry):
    if not isinstance(entry, dict):
        return NOT_LOGGED
    return {key: value if key == "id" else NOT_LOGGED for key, value in entry.items()}


def main():
    spec = connection_spec()
    spec.update(
        state=dict(type="str", default="present"),
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
    module = _Module(
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
    if module.params["state"] != "present":
        module.fail_json(
            msg=f"state={module.params['state']} is not supported: present is the only "
            "state, as the module never creates, deletes or revokes an invite (the platform "
            "decides that); leave state out, or set it to present"
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
                f"{escape(invite.status)}, no longer updatable: "
                + NOT_UPDATABLE_FIX.format(source=invite.source, invite_id=invite.id)
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
        # An update that may have landed counts as a change: a handler must not miss it.
        result["changed"] = bool(updated or ids(WriteOutcome.UPDATE_UNKNOWN))
        self.keep_errors(results)
        problems = [
            *self.failed_writes(results),
            *self.resend_problems(report, ids),
            *self.write_problems(report, ids),
        ]
        if plan.failed:
            problems.append(_failed_reading(plan))
        if report.audit_error is not None:
            problems.append(shown(report.audit_error))
        if problems:
            self.fail("; ".join(problems))
        self.module.exit_json(**result)

    def keep_errors(self, results):
        errors = self.result.get("errors", [])
        for item in results:
            if item.error is not None:
                source = str(item.change.source)
                errors.append(dict(id=item.change.id, source=source, message=shown(item.error)))
            if item.resend_error is not None:
                message = shown(item.resend_error)
                errors.append(dict(id=item.change.id, source=None, message=message))
        if errors:
            self.result["errors"] = errors

    def failed_writes(self, results):
        """Updates refused, the first one's reason as the CLI prints it (status, the
        server's message, requestId) in the message; every one's is in errors."""
        failed = [r for r in results if r.outcome is WriteOutcome.FAILED]
        if not failed:
            return []
        first = failed[0]
        reason = "" if first.error is None else f" ({first.change.id}: {shown(first.error)})"
        return [f"not updated: {_ids([r.change.id for r in failed])}{reason}"]

    def resend_problems(self, report, ids):
        problems = []
        not_made = [r.change.id for r in report.resends_not_made]
        if not_made:
            self.result["resend_not_made"] = not_made
            first = report.resends_not_made[0]
            # The platform's refusal, or why this run did not send it (owed): e.g. another
            # run's write already held the values, and whether its e-mail went is unknown.
            why = first.resend_error if first.resend_error is not None else first.owed
            reason = f" ({first.change.id}: {shown(why)})" if why else ""
            problems.append(
                f"the invitation was not e-mailed again by this run: {_ids(not_made)}{reason} "
                "(once checked, send it with `reconcile resend ID`)"
            )
        in_doubt = ids(ResendOutcome.RESEND_UNKNOWN) + [
            r.change.id for r in report.resends_in_doubt
        ]
        if in_doubt:
            self.result["resend_unknown"] = in_doubt
            problems.append(
                f"the invitation may or may not have been e-mailed again: {_ids(in_doubt)} "
                "(check with the business before sending it again; never re-run to retry)"
            )
        return problems

    def write_problems(self, report, ids):
        result, problems = self.result, []
        unknown = ids(WriteOutcome.UPDATE_UNKNOWN)
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
        not_started = ids(WriteOutcome.NOT_STARTED)
        if not_started:
            why = report.stopped_by or "the run stopped"
            problems.append(f"not started ({shown(why)}): {_ids(not_started)}")
        return problems

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
    after_header = header + (": " + resend_note(change, str) if change.resend else "")
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
    a problem, a diff and a message name an entry invites[N], its place in the list."""
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
        state = load_texts([(INLINE, "".join(parts))], rules)
    except InputError as error:
        placed = [str(_placed(p, starts)) for p in error.problems]
        raise ReconcilerError("\n".join(placed)) from None
    state.invites = [
        DesiredInvite(
            invite.id,
            invite.fields,
            SourceLocation(_entry_name(invite.source.line, starts), 0),
            invite.resend_on_change,
        )
        for invite in state.invites
    ]
    state.warnings = [_placed(p, starts) for p in state.warnings]
    return state


def _entry_name(line, starts):
    index = sum(1 for start in starts if start <= line) - 1
    return INLINE if index < 0 or line < 1 else f"{INLINE}[{index}]"


def _placed(problem, starts):
    """The problem at the entry it is in, and any place its message names as well."""
    message = _INLINE_PLACE.sub(lambda m: _entry_name(int(m.group(1)), starts), problem.message)
    return FileProblem(_entry_name(problem.line, starts), 0, 0, message, problem.severity)


if __name__ == "__main__":
    main()
