"""The plan and apply results as plain text for a terminal or a CI log."""

from __future__ import annotations

from collections.abc import Iterator

import click

from reconciler.api.exceptions import ApiError
from reconciler.apply.applier import ApplyReport, ChangeResult, ResendOutcome, WriteOutcome
from reconciler.model.invite import Contact, FieldValue, IdentifierSet, SourceLocation, kind_of
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
    by_status,
    invite_urls_note,
    kept_warning,
    max_changes_warning,
    resend_note,
    shown_value,
    summary_line,
)
from reconciler.output.console import resend_advice
from reconciler.plan.model import (
    FailedInvite,
    FieldChange,
    InviteChange,
    NotUpdatable,
    OutsideChange,
    Plan,
    SetApart,
)
from reconciler.plan.write_check import StoredOtherwise
from reconciler.safetext import escape, json_text, plural, redact, redact_and_escape

# What an apply did, as plain text: each invite's line as its write ends, and the summary.
#
# ``TextRenderer`` (the plan) is one of these, so one renderer says both.


def _id(invite: InviteChange | NotUpdatable) -> str:
    return redact_and_escape(invite.id)


def _where_from(invite: InviteChange | NotUpdatable) -> str:
    return redact_and_escape(str(invite.source))


def _where(change: InviteChange) -> str:
    return f"{_id(change)}  ({_where_from(change)})"


def stored_otherwise_text(part: StoredOtherwise) -> str:
    return (
        f"the platform stored {json_text(_shown_server(part.field, part.stored))} for "
        f"`{escape(part.field)}`, not {json_text(part.sent)} as written"
    )


def diverged_advice(change: InviteChange) -> str:
    target = f"`reconcile adopt --target {_id(change)}`"
    return f"write the platform's form in {_where_from(change)} (or {target})"


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

    def _label(self, word: str, fg: str) -> str:
        """An outcome's word, coloured, and the room that lines up what follows it (the
        width of "not started" and two spaces; a longer word is followed by two)."""
        return self._style(word, fg=fg) + " " * max(2, 13 - len(word))

    def apply_result(self, result: ChangeResult) -> str:
        change, outcome = result.change, result.outcome
        where = _where(change)
        error = redact_and_escape(str(result.error))
        if outcome is WriteOutcome.NOT_STARTED:
            return self._label("not started", "yellow") + where
        if outcome is WriteOutcome.ALREADY_APPLIED:
            return "\n".join([self.already_applied(change), *self._resend_lines(result)])
        if outcome is WriteOutcome.CONFLICT:
            return self._write_conflict(result, where)
        if outcome is WriteOutcome.FAILED:
            if result.error is not None and result.error.run_fatal:  # said once, at the end
                error = f"{fatal_short(result.error)} (the error at the end)"
            return f"{self._label('failed', 'red')}{where}: {error}"
        if outcome is WriteOutcome.UPDATE_UNKNOWN:
            line = (
                f"{self._label('update unknown', 'red')}{where}: {error}; the server may have "
                "applied it. Check before applying again "
                f"(reconcile plan --target {_id(change)})"
            )
            if change.resend:  # due after the update, which may have been made
                line += f"\n{self._label('not re-sent', 'red')}{_id(change)}: "
                line += resend_if_updated(change)
            return line
        return self._written(result, where)

    def _written(self, result: ChangeResult, where: str) -> str:
        """Updated, or diverged: each part stored otherwise, each kept part reformatted."""
        change = result.change
        diverged = result.outcome is WriteOutcome.DIVERGED
        word, fg = ("diverged", "red") if diverged else ("updated", "green")
        lines = [f"{self._label(word, fg)}{where}: {', '.join(change.patch)}"]
        advice = diverged_advice(change)
        lines += [f"    {stored_otherwise_text(part)}; {advice}" for part in result.diverged]
        lines += [
            f"    note: the platform stored {json_text(part.stored)} for `{escape(part.field)}` "
            f"(kept from the platform, not in the files), not {json_text(part.sent)} as sent"
            for part in result.noted
        ]
        return "\n".join(lines + self._resend_lines(result))

    def _write_conflict(self, result: ChangeResult, where: str) -> str:
        head = (
            f"{self._label('conflict', 'red')}{where}: changed on the platform since "
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
        error = redact_and_escape(str(result.resend_error))
        if resend is ResendOutcome.RESENT:
            to = result.recipient or change.recipient
            said = f"invitation e-mailed to {redact_and_escape(to)}" if to else "invitation"
            return [f"{self._label('re-sent', 'cyan')}{_id(change)}: {said}"]
        if resend is ResendOutcome.RESEND_UNKNOWN:
            return [
                f"{self._label('re-send unknown', 'red')}{_id(change)}: {error}; the "
                "invitation may have gone out: check with the platform or the invitee "
                "before sending again"
            ]
        if resend is ResendOutcome.NOT_RESENT:
            refusal = result.resend_error
            if refusal is not None and refusal.run_fatal:  # said once, at the end
                error = f"{fatal_short(refusal)} (the error at the end)"
            return [
                f"{self._label('not re-sent', 'red')}{_id(change)}: {error}; "
                f"the update was applied: {resend_advice(change.id)}"
            ]
        if resend is ResendOutcome.OWED:
            return [
                f"{self._label('re-send owed', 'red')}{_id(change)}: "
                f"{redact_and_escape(result.owed or 'not sent')}; {resend_advice(change.id)}"
            ]
        return []

    def already_applied(self, change: InviteChange) -> str:
        """A change of a saved plan that an earlier run made: nothing is sent for it."""
        note = "nothing sent" + (", its invitation not e-mailed again" if change.resend else "")
        return f"{self._label('already applied', 'green')}{_where(change)}: {note}"

    def apply_summary(self, report: ApplyReport) -> str:
        count = report.count
        already = report.already_applied + count(WriteOutcome.ALREADY_APPLIED)
        updates_unknown = count(WriteOutcome.UPDATE_UNKNOWN)
        not_resent, owed = count(ResendOutcome.NOT_RESENT), count(ResendOutcome.OWED)
        resends_unknown = count(ResendOutcome.RESEND_UNKNOWN)
        parts = [
            f"{report.updated} updated",
            *_said_if_any(
                (count(WriteOutcome.DIVERGED), f"{count(WriteOutcome.DIVERGED)} diverged"),
                (report.conflicts, f"{plural(report.conflicts, 'conflict')} (not written)"),
            ),
            f"{count(WriteOutcome.FAILED)} failed",
            *_said_if_any(
                (already, f"{already} already applied"),
                (updates_unknown, f"{plural(updates_unknown, 'update')} with unknown outcome"),
                (count(WriteOutcome.NOT_STARTED), f"{count(WriteOutcome.NOT_STARTED)} not started"),
                (not_resent, f"{plural(not_resent, 'invitation')} not re-sent"),
                (owed, f"{plural(owed, 're-send')} owed"),
                (
                    resends_unknown,
                    f"{plural(resends_unknown, 'invitation')} with unknown re-send outcome",
                ),
            ),
        ]
        lines = []
        if report.stopped_by:
            lines.append(self._style(f"Stopped: {report.stopped_by}.", fg="red", bold=True))
        lines.append(f"Apply: {', '.join(parts)}.")
        return "\n".join(lines + _resends_to_make(report))


def _said_if_any(*counted: tuple[int, str]) -> list[str]:
    return [text for number, text in counted if number]


def _resends_to_make(report: ApplyReport) -> list[str]:
    """Every e-mail that was due and not sent, by id, with the way to send it: the next
    plan shows no change for an invite already updated, so nothing else would."""
    lines = []
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
    return lines


class TextRenderer(ApplyLines, PlanRenderer):
    """A plan as plain text; an apply's results by ``ApplyLines``."""

    def chunks(self, plan: Plan) -> Iterator[str]:
        """The plan an invite at a time: each block and the blank line after it, then totals."""
        # Each record as it is shown: what the server said redacted, the files' values not.
        for change in plan.changes:
            yield self._change(change.redacted(), plan.changed_since) + "\n\n"
        for failed in map(FailedInvite.redacted, plan.failed):
            heading = self._heading("!", failed.id, None, failed.source, "red")
            yield f"{heading}\n    {redact_and_escape(failed.message)}\n\n"
        for status, group in by_status(plan.not_updatable).items():
            yield self._section(f"{NOT_UPDATABLE_HEADING}: {redact_and_escape(status)}")
            note = NOT_PENDING_NOTE.format(status=redact_and_escape(status))
            for invite in group:
                fix = NOT_UPDATABLE_FIX.format(source=_where_from(invite), invite_id=_id(invite))
                note_fields = f"{note}; these fields differ from the files:"
                yield self._set_apart("!", invite, note_fields, f"\n    fix: {fix}")
        if plan.outside_change:
            yield self._section(f"{OUTSIDE_CHANGE_HEADING}:")
            for outside in map(OutsideChange.redacted, plan.outside_change):
                yield self._set_apart("?", outside, f"{OUTSIDE_CHANGE_NOTE}:")
        yield self._footer(plan)

    def _section(self, heading: str) -> str:
        return self._style(heading, fg="magenta", bold=True) + "\n\n"

    def _footer(self, plan: Plan) -> str:
        footer = []
        warning = max_changes_warning(plan)
        if warning:
            footer.append(self._style(f"Warning: {warning}", fg="red", bold=True))
        if not plan.changes:
            footer.append("No changes." if not plan.failed else "No changes to apply.")
        urls = invite_urls_note(plan)
        if urls:
            footer.append(f"{urls}.")
        footer.append(summary_line(plan))
        return "\n".join(footer) + "\n"

    def _heading(
        self, mark: str, invite_id: str, name: str | None, source: SourceLocation | None, fg: str
    ) -> str:
        parts = [self._style(f"{mark} {escape(invite_id)}", fg=fg, bold=True)]
        if name:
            parts.append(escape(name))  # from the files, as it will be sent
        if source is not None:  # a failed invite may not come from an entry
            parts.append(f"({escape(str(source))})")
        return "  ".join(parts)

    def _change(self, change: InviteChange, ref: str | None) -> str:
        at = redact_and_escape(ref or "REF")
        if change.conflicts:
            lines = [self._heading("!", change.id, change.name, change.source, "red")]
            note = CONFLICT_NOTE.format(ref=at)
            lines.append("    " + self._style(f"conflict: {note}", fg="red"))
        else:
            lines = [self._heading("~", change.id, change.name, change.source, "yellow")]
        for field in change.field_changes:
            name = redact_and_escape(field.field)
            if field.field in change.conflicts:
                lines.append(
                    f"    {name}: conflict: at {at} {shown_value(change.conflicts[field.field])}, "
                    f"on the platform {self._old(field.before)}, wanted {self._new(field.after)}"
                )
                continue
            lines.extend(f"    {line}" for line in self._field(field))
            # Every sub-field the PATCH carries is shown, those the files leave alone too.
            lines.extend(
                f"    {name}.{escape(sub)}: {shown_value(value)} ({KEPT_NOTE})"
                for sub, value in change.kept_values(field.field)
            )
        for name, subs in change.kept_riding_along.items():
            lines.append("    " + self._style(f"warning: {kept_warning(name, subs)}", fg="yellow"))
        if change.resend:
            label = f"{resend_note(change, redact_and_escape)} (resendOnChange)"
            lines.append("    " + self._style(label, fg="cyan", bold=True))
        elif change.address_changes_silently:
            lines.append(f"    {SILENT_ADDRESS_NOTE}")
        return "\n".join(lines)

    def _set_apart(self, mark: str, invite: SetApart, note: str, tail: str = "") -> str:
        """An invite that differs and that apply leaves alone: why, and each field."""
        lines = [self._heading(mark, invite.id, invite.name, invite.source, "magenta")]
        lines.append(f"    {note}")
        lines += [f"      {line}" for field in invite.field_changes for line in self._field(field)]
        return "\n".join(lines) + tail + "\n\n"

    def _field(self, change: FieldChange) -> list[str]:
        name = redact_and_escape(change.field)
        before, after, delta = change.before, change.after, change.delta
        if isinstance(before, IdentifierSet) and isinstance(after, IdentifierSet):
            items = [self._style(f"+ {json_text(i)}", fg="green") for i in delta.added]
            items += [self._style(f"- {json_text(i)}", fg="red") for i in delta.removed]
            return [f"{name}: {', '.join(items)}"]
        if isinstance(before, Contact) and isinstance(after, Contact):
            return [
                f"{name}.{escape(str(key))}: {self._old(old)} -> {self._new(new)}"
                for key, old, new in delta.sub_changes
            ]
        return [f"{name}: {self._old(before)} -> {self._new(after)}"]

    def _old(self, value: FieldValue | None) -> str:
        return self._style(shown_value(value), fg="red")

    def _new(self, value: FieldValue | None) -> str:
        return self._style(shown_value(value), fg="green")
