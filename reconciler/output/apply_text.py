"""What an apply did, as plain text: each invite's line as its write ends, and the summary.

``TextRenderer`` (the plan) is one of these, so one renderer says both."""

from __future__ import annotations

import click

from reconciler.api.exceptions import ApiError
from reconciler.apply.applier import ApplyReport, ChangeResult, ResendOutcome, WriteOutcome
from reconciler.model.invite import FieldValue, kind_of
from reconciler.output.failures import resend_advice
from reconciler.plan.model import (
    InviteChange,
)
from reconciler.plan.write_check import StoredOtherwise
from reconciler.safetext import escape, json_text, plural, redact, redact_and_escape


def _to(change: InviteChange) -> str:
    return (
        f"invitation e-mailed to {redact_and_escape(change.recipient)}"
        if change.recipient
        else "invitation"
    )


def diverged_text(change: InviteChange, part: StoredOtherwise) -> str:
    """A field the platform stored otherwise, and where and how to make the files agree."""
    return f"{stored_otherwise_text(part)}; {diverged_advice(change)}"


def stored_otherwise_text(part: StoredOtherwise) -> str:
    return (
        f"the platform stored {json_text(_shown_server(part.field, part.stored))} for "
        f"`{escape(part.field)}`, not {json_text(part.sent)} as written"
    )


def diverged_advice(change: InviteChange) -> str:
    invite_id = redact_and_escape(change.id)
    return (
        f"write the platform's form in {redact_and_escape(str(change.source))} "
        f"(or `reconcile adopt --target {invite_id}`)"
    )


def _shown_server(name: str, value: FieldValue | None) -> FieldValue | None:
    """A server's value as shown: redacted."""
    if value is None:
        return None
    if isinstance(value, str):
        return redact(value)
    return kind_of(name.partition(".")[0]).redacted(value)


def fatal_short(error: ApiError) -> str:
    """A run-fatal error named briefly, where its whole message is said once elsewhere."""
    return f"HTTP {error.status}" if error.status else "the error"


def resend_if_updated(change: InviteChange) -> str:
    """For a re-send due after an update whose outcome is unknown: it was not made."""
    invite_id = redact_and_escape(change.id)
    return (
        f"its invitation was not re-sent. If `reconcile plan --target {invite_id}` shows no "
        f"change, the update was made: then send it with: reconcile resend {invite_id}"
    )


class ApplyLines:
    """The lines of an apply's results, coloured when ``color``."""

    def __init__(self, color: bool = False) -> None:
        self.color = color

    def _style(self, text: str, **style: object) -> str:
        return click.style(text, **style) if self.color else text  # type: ignore[arg-type]

    def apply_result(self, result: ChangeResult) -> str:
        change = result.change
        invite_id = redact_and_escape(change.id)
        where = f"{invite_id}  ({redact_and_escape(str(change.source))})"
        error = redact_and_escape(str(result.error))
        outcome = result.outcome
        if outcome is WriteOutcome.NOT_STARTED:
            return f"{self._style('not started', fg='yellow')}  {where}"
        if outcome is WriteOutcome.ALREADY_APPLIED:
            return "\n".join([self.already_applied(change), *self._resend_lines(result)])
        if outcome is WriteOutcome.CONFLICT:
            return self._write_conflict(result, where)
        if outcome is WriteOutcome.FAILED:
            if result.error is not None and result.error.run_fatal:  # said once, at the end
                error = f"{fatal_short(result.error)} (the error at the end)"
            return f"{self._style('failed', fg='red')}       {where}: {error}"
        if outcome is WriteOutcome.UPDATE_UNKNOWN:
            line = (
                f"{self._style('update unknown', fg='red')}  {where}: {error}; "
                "the server may have applied it. Check before applying again "
                f"(reconcile plan --target {invite_id})"
            )
            if change.resend:  # due after the update, which may have been made
                not_resent = self._style("not re-sent", fg="red")
                line += f"\n{not_resent}  {invite_id}: {resend_if_updated(change)}"
            return line
        if outcome is WriteOutcome.DIVERGED:
            lines = [f"{self._style('diverged', fg='red')}     {where}: {', '.join(change.patch)}"]
            lines += [f"    {diverged_text(change, part)}" for part in result.diverged]
        else:
            lines = [
                f"{self._style('updated', fg='green')}      {where}: {', '.join(change.patch)}"
            ]
        lines += [
            f"    note: the platform stored {json_text(part.stored)} for `{escape(part.field)}` "
            f"(kept from the platform, not in the files), not {json_text(part.sent)} as sent"
            for part in result.noted
        ]
        lines += self._resend_lines(result)
        return "\n".join(lines)

    def _write_conflict(self, result: ChangeResult, where: str) -> str:
        head = (
            f"{self._style('conflict', fg='red')}     {where}: changed on the platform since "
            "the plan was shown; nothing written to it"
        )
        if result.error is not None:  # a 412 to If-Match
            head += f" ({redact_and_escape(str(result.error))})"
            if result.etag_moved_alone:
                head += (
                    "; yet read again, it holds what it held before: the server's ETag may "
                    "change at every read, which refuses every write sent with If-Match "
                    "(tell the platform's operators)"
                )
            return head
        lines = [head]
        for moved in result.moved:
            planned = json_text(_shown_server(moved.field, moved.planned))
            now = json_text(_shown_server(moved.field, moved.now))
            lines.append(
                f"    {escape(moved.field)}: planned from {planned}, now {now}, "
                f"wanted {json_text(moved.wanted)}"
            )
        return "\n".join(lines)

    def _resend_lines(self, result: ChangeResult) -> list[str]:
        change, resend = result.change, result.resend
        invite_id = redact_and_escape(change.id)
        error = redact_and_escape(str(result.resend_error))
        if resend is ResendOutcome.RESENT:
            to = (
                f"invitation e-mailed to {redact_and_escape(result.recipient)}"
                if result.recipient
                else _to(change)
            )
            return [f"{self._style('re-sent', fg='cyan')}      {invite_id}: {to}"]
        if resend is ResendOutcome.RESEND_UNKNOWN:
            return [
                f"{self._style('re-send unknown', fg='red')}  {invite_id}: {error}; the "
                "invitation may have gone out: check with the platform or the invitee "
                "before sending again"
            ]
        if resend is ResendOutcome.NOT_RESENT:
            refusal = result.resend_error
            if refusal is not None and refusal.run_fatal:  # said once, at the end
                error = f"{fatal_short(refusal)} (the error at the end)"
            return [
                f"{self._style('not re-sent', fg='red')}  {invite_id}: {error}; "
                f"the update was applied: {resend_advice(change.id)}"
            ]
        if resend is ResendOutcome.OWED:
            return [
                f"{self._style('re-send owed', fg='red')}  {invite_id}: "
                f"{redact_and_escape(result.owed or 'not sent')}; {resend_advice(change.id)}"
            ]
        return []

    def already_applied(self, change: InviteChange) -> str:
        """A change of a saved plan that an earlier run made: nothing is sent for it."""
        where = f"{redact_and_escape(change.id)}  ({redact_and_escape(str(change.source))})"
        note = "nothing sent" + (", its invitation not e-mailed again" if change.resend else "")
        return f"{self._style('already applied', fg='green')}  {where}: {note}"

    def apply_summary(self, report: ApplyReport) -> str:
        failed = report.count(WriteOutcome.FAILED)
        parts = [f"{report.updated} updated"]
        diverged = report.count(WriteOutcome.DIVERGED)
        if diverged:
            parts.append(f"{diverged} diverged")
        if report.conflicts:
            parts.append(f"{plural(report.conflicts, 'conflict')} (not written)")
        parts.append(f"{failed} failed")
        already = report.already_applied + report.count(WriteOutcome.ALREADY_APPLIED)
        if already:
            parts.append(f"{already} already applied")
        updates_unknown = report.count(WriteOutcome.UPDATE_UNKNOWN)
        if updates_unknown:
            parts.append(f"{plural(updates_unknown, 'update')} with unknown outcome")
        not_started = report.count(WriteOutcome.NOT_STARTED)
        if not_started:
            parts.append(f"{not_started} not started")
        not_resent = report.count(ResendOutcome.NOT_RESENT)
        if not_resent:
            parts.append(f"{plural(not_resent, 'invitation')} not re-sent")
        owed = report.count(ResendOutcome.OWED)
        if owed:
            parts.append(f"{plural(owed, 're-send')} owed")
        resends_unknown = report.count(ResendOutcome.RESEND_UNKNOWN)
        if resends_unknown:
            parts.append(f"{plural(resends_unknown, 'invitation')} with unknown re-send outcome")
        lines = []
        if report.stopped_by:
            lines.append(self._style(f"Stopped: {report.stopped_by}.", fg="red", bold=True))
        lines.append(f"Apply: {', '.join(parts)}.")
        # Every e-mail that was due and not sent, by id, with the way to send it: the next
        # plan shows no change for an invite already updated, so nothing else would.
        not_made = [redact_and_escape(r.change.id) for r in report.resends_not_made]
        if not_made:
            lines.append(
                f"Not re-sent although updated: {', '.join(not_made)}. "
                f"Send {'it' if len(not_made) == 1 else 'them'} with: "
                f"reconcile resend {' '.join(not_made)}"
            )
        doubtful = [redact_and_escape(r.change.id) for r in report.resends_in_doubt]
        if doubtful:
            lines.append(
                f"Not re-sent, update unknown: {', '.join(doubtful)}. Where "
                "`reconcile plan --target ID` shows no change, the update was made: send the "
                "invitation with `reconcile resend ID`; otherwise the next apply sends both."
            )
        return "\n".join(lines)
