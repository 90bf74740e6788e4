"""The plan and apply results as plain text for a terminal or a CI log."""

from __future__ import annotations

from collections.abc import Iterator

import click

from reconciler.api.exceptions import ApiError
from reconciler.apply.applier import ApplyReport, ChangeResult, ResendOutcome, WriteOutcome
from reconciler.model.invite import FieldValue, kind_of
from reconciler.output import (
    CONFLICT_NOTE,
    KEPT_NOTE,
    NOT_PENDING_NOTE,
    NOT_UPDATABLE_FIX,
    NOT_UPDATABLE_HEADING,
    OUTSIDE_CHANGE_HEADING,
    OUTSIDE_CHANGE_NOTE,
    SILENT_ADDRESS_NOTE,
    PlanRenderer,
    Row,
    by_status,
    change_rows,
    field_rows,
    invite_urls_note,
    kept_warning,
    max_changes_warning,
    resend_note,
    shown_value,
    summary_line,
)
from reconciler.output.console import resend_advice
from reconciler.plan.model import FailedInvite, InviteChange, OutsideChange, Plan, SetApart
from reconciler.plan.write_check import StoredOtherwise
from reconciler.safetext import escape, json_text, plural, redact, redact_and_escape

# How a plan marks each kind of record: its sign and the colour of its heading.
_MARKS = {
    "change": ("~", "yellow"),
    "conflict": ("!", "red"),
    "failed": ("!", "red"),
    "not updatable": ("!", "magenta"),
    "outside": ("?", "magenta"),
}
# The colour of an apply outcome's word (the outcome's value); any other is red.
_COLOURS = {
    WriteOutcome.NOT_STARTED: "yellow",
    WriteOutcome.ALREADY_APPLIED: "green",
    WriteOutcome.UPDATED: "green",
    ResendOutcome.RESENT: "cyan",
}


def _id(invite: InviteChange | SetApart) -> str:
    return redact_and_escape(invite.id)


def _where(change: InviteChange) -> str:
    return f"{_id(change)}  ({redact_and_escape(str(change.source))})"


def stored_otherwise_text(part: StoredOtherwise) -> str:
    return (
        f"the platform stored {json_text(_shown_server(part.field, part.stored))} for "
        f"`{escape(part.field)}`, not {json_text(part.sent)} as written"
    )


def diverged_advice(change: InviteChange) -> str:
    target = f"`reconcile adopt --target {_id(change)}`"
    return f"write the platform's form in {redact_and_escape(str(change.source))} (or {target})"


def _shown_server(name: str, value: FieldValue | None) -> FieldValue | None:
    """A server's value as shown: redacted."""
    if isinstance(value, str):
        return redact(value)
    return None if value is None else kind_of(name.partition(".")[0]).redacted(value)


def fatal_short(error: ApiError) -> str:
    """A run-fatal error named briefly, where its whole message is said once elsewhere."""
    return f"HTTP {error.status}" if error.status else "the error"


def _said(error: ApiError | None, *, short: bool = False) -> str:
    """An error's message; with ``short``, a run-fatal one only named (said at the end)."""
    if short and error is not None and error.run_fatal:
        return f"{fatal_short(error)} (the error at the end)"
    return redact_and_escape(str(error))


def resend_if_updated(change: InviteChange) -> str:
    """For a re-send due after an update whose outcome is unknown: it was not made."""
    invite_id = _id(change)
    return (
        f"its invitation was not re-sent. If `reconcile plan --target {invite_id}` shows no "
        f"change, the update was made: then send it with: reconcile resend {invite_id}"
    )


class TextRenderer(PlanRenderer):
    """A plan, and an apply's results, as plain text; coloured when ``color``."""

    def __init__(self, color: bool = False) -> None:
        self.color = color

    def _style(self, text: str, **style: object) -> str:
        return click.style(text, **style) if self.color else text  # type: ignore[arg-type]

    # -- an apply's results: each invite's lines as its write ends, and the summary -------

    def _label(self, outcome: WriteOutcome | ResendOutcome) -> str:
        """An outcome's word, coloured, and the room that lines up what follows it (the
        width of "not started" and two spaces; a longer word is followed by two)."""
        word = outcome.value
        return self._style(word, fg=_COLOURS.get(outcome, "red")) + " " * max(2, 13 - len(word))

    def apply_result(self, result: ChangeResult) -> str:
        change, outcome = result.change, result.outcome
        head = self._label(outcome) + _where(change)
        if outcome is WriteOutcome.NOT_STARTED:
            return head
        if outcome is WriteOutcome.ALREADY_APPLIED:
            return "\n".join([self.already_applied(change), *self._resend_lines(result)])
        if outcome is WriteOutcome.CONFLICT:
            return self._write_conflict(result, head)
        if outcome is WriteOutcome.FAILED:
            return f"{head}: {_said(result.error, short=True)}"
        if outcome is WriteOutcome.UPDATE_UNKNOWN:
            line = (
                f"{head}: {_said(result.error)}; the server may have applied it. Check before "
                f"applying again (reconcile plan --target {_id(change)})"
            )
            if change.resend:  # due after the update, which may have been made
                line += f"\n{self._label(ResendOutcome.NOT_RESENT)}{_id(change)}: "
                line += resend_if_updated(change)
            return line
        # Updated, or diverged: each part stored otherwise, each kept part reformatted.
        lines = [f"{head}: {', '.join(change.patch)}"]
        advice = diverged_advice(change)
        lines += [f"    {stored_otherwise_text(part)}; {advice}" for part in result.diverged]
        lines += [
            f"    note: the platform stored {json_text(part.stored)} for `{escape(part.field)}` "
            f"(kept from the platform, not in the files), not {json_text(part.sent)} as sent"
            for part in result.noted
        ]
        return "\n".join(lines + self._resend_lines(result))

    def _write_conflict(self, result: ChangeResult, head: str) -> str:
        head += ": changed on the platform since the plan was shown; nothing written to it"
        if result.error is not None:  # a 412 to If-Match
            head += f" ({_said(result.error)})"
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
        if resend is None:
            return []
        if resend is ResendOutcome.RESENT:
            to = result.recipient or change.recipient
            said = f"invitation e-mailed to {redact_and_escape(to)}" if to else "invitation"
        elif resend is ResendOutcome.RESEND_UNKNOWN:
            said = (
                f"{_said(result.resend_error)}; the invitation may have gone out: check with "
                "the platform or the invitee before sending again"
            )
        elif resend is ResendOutcome.NOT_RESENT:
            said = f"{_said(result.resend_error, short=True)}; the update was applied: "
            said += resend_advice(change.id)
        else:
            said = f"{redact_and_escape(result.owed or 'not sent')}; {resend_advice(change.id)}"
        return [f"{self._label(resend)}{_id(change)}: {said}"]

    def already_applied(self, change: InviteChange) -> str:
        """A change of a saved plan that an earlier run made: nothing is sent for it."""
        note = "nothing sent" + (", its invitation not e-mailed again" if change.resend else "")
        return f"{self._label(WriteOutcome.ALREADY_APPLIED)}{_where(change)}: {note}"

    def apply_summary(self, report: ApplyReport) -> str:
        n = report.count
        already = report.already_applied + n(WriteOutcome.ALREADY_APPLIED)
        unknown, not_started = n(WriteOutcome.UPDATE_UNKNOWN), n(WriteOutcome.NOT_STARTED)
        diverged, conflicts = n(WriteOutcome.DIVERGED), report.conflicts
        not_resent, owed = n(ResendOutcome.NOT_RESENT), n(ResendOutcome.OWED)
        resends_unknown = n(ResendOutcome.RESEND_UNKNOWN)
        counted = [  # (said when not 0, or always when None; the words)
            (None, f"{report.updated} updated"),
            (diverged, f"{diverged} diverged"),
            (conflicts, f"{plural(conflicts, 'conflict')} (not written)"),
            (None, f"{n(WriteOutcome.FAILED)} failed"),
            (already, f"{already} already applied"),
            (unknown, f"{plural(unknown, 'update')} with unknown outcome"),
            (not_started, f"{not_started} not started"),
            (not_resent, f"{plural(not_resent, 'invitation')} not re-sent"),
            (owed, f"{plural(owed, 're-send')} owed"),
            (
                resends_unknown,
                f"{plural(resends_unknown, 'invitation')} with unknown re-send outcome",
            ),
        ]
        lines = []
        if report.stopped_by:
            lines.append(self._style(f"Stopped: {report.stopped_by}.", fg="red", bold=True))
        lines.append(f"Apply: {', '.join(text for count, text in counted if count != 0)}.")
        # Every e-mail that was due and not sent, by id, with the way to send it: the next
        # plan shows no change for an invite already updated, so nothing else would.
        not_made = [_id(r.change) for r in report.resends_not_made]
        if not_made:
            lines.append(
                f"Not re-sent although updated: {', '.join(not_made)}. "
                f"Send {'it' if len(not_made) == 1 else 'them'} with: "
                f"reconcile resend {' '.join(not_made)}"
            )
        doubtful = [_id(r.change) for r in report.resends_in_doubt]
        if doubtful:
            lines.append(
                f"Not re-sent, update unknown: {', '.join(doubtful)}. Where "
                "`reconcile plan --target ID` shows no change, the update was made: send the "
                "invitation with `reconcile resend ID`; otherwise the next apply sends both."
            )
        return "\n".join(lines)

    # -- the plan -------------------------------------------------------------------------

    def chunks(self, plan: Plan) -> Iterator[str]:
        """The plan an invite at a time: each block and the blank line after it, then totals."""
        # Each record as it is shown: what the server said redacted, the files' values not.
        for change in plan.changes:
            yield self._change(change.redacted(), plan.changed_since) + "\n\n"
        for failed in map(FailedInvite.redacted, plan.failed):
            yield f"{self._heading('failed', failed)}\n    {redact_and_escape(failed.message)}\n\n"
        for status, group in by_status(plan.not_updatable).items():
            status = redact_and_escape(status)
            yield self._section(f"{NOT_UPDATABLE_HEADING}: {status}")
            note = f"{NOT_PENDING_NOTE.format(status=status)}; these fields differ from the files:"
            for invite in group:
                source = redact_and_escape(str(invite.source))
                fix = NOT_UPDATABLE_FIX.format(source=source, invite_id=_id(invite))
                yield self._set_apart("not updatable", invite, note, f"\n    fix: {fix}")
        if plan.outside_change:
            yield self._section(f"{OUTSIDE_CHANGE_HEADING}:")
            for outside in map(OutsideChange.redacted, plan.outside_change):
                yield self._set_apart("outside", outside, f"{OUTSIDE_CHANGE_NOTE}:")
        footer = []
        warning = max_changes_warning(plan)
        if warning:
            footer.append(self._style(f"Warning: {warning}", fg="red", bold=True))
        if not plan.changes:
            footer.append("No changes." if not plan.failed else "No changes to apply.")
        urls = invite_urls_note(plan)
        if urls:
            footer.append(f"{urls}.")
        yield "\n".join([*footer, summary_line(plan)]) + "\n"

    def _section(self, heading: str) -> str:
        return self._style(heading, fg="magenta", bold=True) + "\n\n"

    def _heading(self, kind: str, record: InviteChange | SetApart | FailedInvite) -> str:
        mark, fg = _MARKS[kind]
        parts = [self._style(f"{mark} {escape(record.id)}", fg=fg, bold=True)]
        name = getattr(record, "name", None)
        if name:
            parts.append(escape(name))  # from the files, as it will be sent
        if record.source is not None:  # a failed invite may not come from an entry
            parts.append(f"({escape(str(record.source))})")
        return "  ".join(parts)

    def _change(self, change: InviteChange, ref: str | None) -> str:
        at = redact_and_escape(ref or "REF")
        lines = [self._heading("conflict" if change.conflicts else "change", change)]
        if change.conflicts:
            conflict = f"conflict: {CONFLICT_NOTE.format(ref=at)}"
            lines.append("    " + self._style(conflict, fg="red"))
        for row in change_rows(change):
            if row.conflict:
                lines.append(
                    f"    {redact_and_escape(row.label)}: conflict: at {at} {shown_value(row.was)}"
                    f", on the platform {self._old(row.before)}, wanted {self._new(row.after)}"
                )
            else:
                lines.append(f"    {self._line(row)}")
        for name, subs in change.kept_riding_along.items():
            lines.append("    " + self._style(f"warning: {kept_warning(name, subs)}", fg="yellow"))
        if change.resend:
            label = f"{resend_note(change, redact_and_escape)} (resendOnChange)"
            lines.append("    " + self._style(label, fg="cyan", bold=True))
        elif change.address_changes_silently:
            lines.append(f"    {SILENT_ADDRESS_NOTE}")
        return "\n".join(lines)

    def _set_apart(self, kind: str, invite: SetApart, note: str, tail: str = "") -> str:
        """An invite that differs and that apply leaves alone: why, and each field."""
        lines = [self._heading(kind, invite), f"    {note}"]
        lines += [f"      {self._line(row)}" for f in invite.field_changes for row in field_rows(f)]
        return "\n".join(lines) + tail + "\n\n"

    def _line(self, row: Row) -> str:
        label = redact_and_escape(row.label)
        if row.items is not None:
            items = (self._style(i, fg="green" if i[0] == "+" else "red") for i in row.items)
            return f"{label}: {', '.join(items)}"
        if row.kept:
            return f"{label}: {shown_value(row.after)} ({KEPT_NOTE})"
        return f"{label}: {self._old(row.before)} -> {self._new(row.after)}"

    def _old(self, value: object) -> str:
        return self._style(shown_value(value), fg="red")

    def _new(self, value: object) -> str:
        return self._style(shown_value(value), fg="green")
