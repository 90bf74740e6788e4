"""`reconcile resend`: re-send invitations by hand, e.g. after a failed re-send.

Each re-send e-mails a business and cannot be undone, so: every invite is read
first (a missing or accepted one refuses the whole run, nothing sent), the
recipients are listed before the question, each e-mail sent is reported as soon
as it is known, and whatever stops the run (an interrupt, lost stdout, an audit
log that cannot be written) leaves a report of what was sent and what was not.
"""

from __future__ import annotations

import click

from reconciler.api.client import ApiClient
from reconciler.api.exceptions import ApiError, NotSent
from reconciler.apply.applier import GracefulInterrupt
from reconciler.apply.audit import (
    AttemptRecorder,
    AuditLog,
    AuditLogError,
    NoAuditLog,
    open_audit_log,
    outcome_of,
)
from reconciler.commands.options import (
    ask_first,
    audit_log_option,
    auto_approve_option,
    config_option,
    confirm,
    sandbox_option,
    settings_help,
    verbose_option,
)
from reconciler.desired.state import refuse_bad_ids
from reconciler.errors import ReconcilerError
from reconciler.model.invite import CurrentInvite
from reconciler.output import Stdout
from reconciler.output.console import RESEND_UNKNOWN_ADVICE, echo_errors
from reconciler.output.text import fatal_short
from reconciler.plan.model import FailedInvite
from reconciler.safetext import plural, quote_value, redact, redact_and_escape
from reconciler.service.apply import close_audit
from reconciler.service.offline import check_writable
from reconciler.service.online import open_service
from reconciler.settings.config import load_settings


@click.command(epilog=settings_help(api=True, extra=("audit_log",)))
@click.argument("invite_ids", nargs=-1, required=True, metavar="ID...")
@auto_approve_option
@audit_log_option
@config_option
@sandbox_option
@verbose_option
def resend(
    invite_ids: tuple[str, ...],
    auto_approve: bool,
    audit_log: str | None,
    config_file: str | None,
    sandbox: bool,
) -> int:
    """Re-send the invitation of each given invite, once. Never retried automatically."""
    # Before anything is read; on_stderr: the list shown on the terminal too.
    on_stderr = False if auto_approve else ask_first(action="re-send")
    refuse_bad_ids(invite_ids, "resend")
    settings = load_settings(config_file).with_overrides(audit_log=audit_log)
    ids = list(dict.fromkeys(invite_ids))
    check_writable(settings.audit_log, "open the audit log")
    with open_service(settings, sandbox, paced=False) as service:
        client = service.client
        recipients = _read_recipients(client, ids)
        click.echo(_recipient_list(recipients))
        if on_stderr:  # who is e-mailed, where the person asked can read it
            click.echo(_recipient_list(recipients), err=True)
        service.refuse_narrow_grant()  # a re-send writes: before it, and before asking
        if not auto_approve:
            confirm(f"E-mail {plural(len(ids), 'invitation')} again?", action="re-send")
        run = _Resends(client, open_audit_log(settings.audit_log, settings.client_id))
        with GracefulInterrupt("re-sends", client.stop):
            for invite_id in ids:  # one at a time: each is a message to a person
                if client.stop.is_set():
                    break
                run.send(invite_id)
    return run.finish(ids)


def _read_recipients(client: ApiClient, ids: list[str]) -> list[CurrentInvite]:
    """Every invite, read before the first e-mail: any that cannot be sent refuses the run."""
    invites, problems = [], []
    for invite_id in ids:
        try:
            invite = client.get_invite(invite_id)
        except ApiError as error:
            if error.run_fatal:
                raise  # the same for every invite: said once
            problems.append(f"{redact_and_escape(invite_id)}: {error}")
            continue
        if not invite.is_pending:
            status = redact_and_escape(invite.status or "in an unknown state")
            problems.append(f"{redact_and_escape(invite_id)}: is {status}, not pending")
        invites.append(invite)
    if problems:
        lines = "\n".join(f"  {line}" for line in problems)
        raise ReconcilerError(f"refusing to re-send, nothing was sent:\n{lines}")
    return invites


def _recipient_list(invites: list[CurrentInvite]) -> str:
    count = len(invites)
    businesses = "1 business" if count == 1 else f"{count} businesses"
    lines = [f"The invitation is e-mailed again to {businesses} (id, name, e-mail):"]
    for invite in invites:
        name, email = invite.fields.get("name"), invite.fields.get("email")
        # Quoted: a name the server holds as "(no name)" must not read as none.
        name = quote_value(redact(name), limit=None) if isinstance(name, str) else "(no name)"
        email = f"<{redact_and_escape(email)}>" if isinstance(email, str) else "(no e-mail address)"
        lines.append(f"  {redact_and_escape(invite.id)}  {name}  {email}")
    return "\n".join(lines)


class _Resends:
    """The re-sends of one run, each reported as soon as its outcome is known."""

    def __init__(self, client: ApiClient, audit: AuditLog | NoAuditLog) -> None:
        self._client = client
        self._audit = audit
        self._stdout = Stdout(client.stop.set)
        self.sent: list[str] = []
        self.failed: list[FailedInvite] = []
        self.audit_error: AuditLogError | None = None

    def send(self, invite_id: str) -> None:
        # Every attempt recorded before it leaves: a re-send refused (429, 503) is sent again.
        recorder = AttemptRecorder(self._audit, invite_id, "resend")
        try:
            receipt = self._client.resend_invite(invite_id, watch=recorder)
        except AuditLogError as error:  # nothing leaves without its attempt line
            self._stop_for_audit(error)
            if recorder.sent:  # refused before, then not sent again: certainly not made
                self._failed(invite_id, NotSent(f"not sent again: {error}"))
            return
        except ApiError as error:
            recorder.settle(outcome_of(error), error.status, error.request_id, error.message)
            self._settled(recorder)
            self._failed(invite_id, error)
            return
        self.sent.append(invite_id)
        self._say(f"re-sent  {redact_and_escape(invite_id)}")
        recorder.settle("ok", receipt.status, receipt.request_id)
        self._settled(recorder)

    def _settled(self, recorder: AttemptRecorder) -> None:
        if recorder.audit_error is not None:
            self._stop_for_audit(recorder.audit_error)

    def _failed(self, invite_id: str, error: ApiError) -> None:
        shown = redact_and_escape(invite_id)
        if error.outcome_unknown:
            self._say(
                f"re-send unknown  {shown}: {error}; the invitation may have gone out: check "
                "with the platform or the invitee before sending again"
            )
            advice = RESEND_UNKNOWN_ADVICE
        elif error.run_fatal:  # every other re-send would fail alike: said once, at the end
            said = f"{fatal_short(error)} (the error at the end)"
            self._say(f"failed  {shown}: {said}")
            self._client.stop.set(said)
            advice = None
        else:
            self._say(f"failed  {shown}: {error}")
            advice = None
        failed = FailedInvite(invite_id, None, str(error), error.status, error.request_id, advice)
        self.failed.append(failed)

    def _stop_for_audit(self, error: AuditLogError) -> None:
        self.audit_error = self.audit_error or error
        self._client.stop.set("the audit log could not be written")

    def _say(self, line: str) -> None:
        """On stdout; once stdout is gone, on stderr, and no further e-mail is sent."""
        if not self._stdout.echo(line):
            click.echo(line, err=True)

    def finish(self, ids: list[str]) -> int:
        done = set(self.sent) | {f.id for f in self.failed}
        not_sent = [i for i in ids if i not in done]
        click.echo(self._summary(not_sent), err=self._stdout.lost)
        self.audit_error = self.audit_error or close_audit(self._audit)
        echo_errors(self.failed)
        if self.audit_error is not None:
            raise self.audit_error
        return 1 if self.failed or not_sent or self._stdout.lost else 0

    def _summary(self, not_sent: list[str]) -> str:
        unknown = sum(1 for f in self.failed if f.advice == RESEND_UNKNOWN_ADVICE)
        parts = [f"{len(self.sent)} re-sent", f"{len(self.failed) - unknown} failed"]
        if unknown:
            parts.append(f"{unknown} unknown")
        if not not_sent:
            return f"Resend: {', '.join(parts)}."
        parts.append(f"{len(not_sent)} not sent")
        shown = " ".join(redact_and_escape(i) for i in not_sent)
        return "\n".join(
            [
                f"Stopped: {self._client.stop.reason or 'stopped'}; no further e-mail was sent.",
                f"Resend: {', '.join(parts)}.",
                f"Not sent: {shown}. Send them with: reconcile resend {shown}",
            ]
        )
