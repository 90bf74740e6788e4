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
    NOT_UPDATABLE_HEADING,
    OUTSIDE_CHANGE_HEADING,
    OUTSIDE_CHANGE_NOTE,
    SILENT_ADDRESS_NOTE,
    invite_urls_note,
    kept_warning,
    max_changes_warning,
    not_updatable_note,
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
)
from reconciler.plan.write_check import StoredOtherwise
from reconciler.safetext import escape, json_text, plural, redact, redact_and_escape

# What an apply did, as plain text: each invite's line as its write ends, and the summary.
#
# ``TextRenderer`` (the plan) is one of these, so one renderer says both.


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
            return self._update_unknown(change, where, error)
        return self._written(result, where)

    def _update_unknown(self, change: InviteChange, where: str, error: str) -> str:
        invite_id = redact_and_escape(change.id)
        line = (
            f"{self._style('update unknown', fg='red')}  {where}: {error}; "
            "the server may have applied it. Check before applying again "
            f"(reconcile plan --target {invite_id})"
        )
        if change.resend:  # due after the update, which may have been made
            not_resent = self._style("not re-sent", fg="red")
            line += f"\n{not_resent}  {invite_id}: {resend_if_updated(change)}"
        return line

    def _written(self, result: ChangeResult, where: str) -> str:
        """Updated, or diverged: each part stored otherwise, each kept part reformatted."""
        change = result.change
        if result.outcome is WriteOutcome.DIVERGED:
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


class TextRenderer(ApplyLines):
    """A plan as plain text; an apply's results by ``ApplyLines``."""

    # -- plan -----------------------------------------------------------------

    def render(self, plan: Plan) -> str:
        return "".join(self.chunks(plan))

    def chunks(self, plan: Plan) -> Iterator[str]:
        """The plan an invite at a time: each block and the blank line after it, then totals."""
        # Each record as it is shown: what the server said redacted, the files' values not.
        for change in plan.changes:
            yield self._change(change.redacted(), plan.changed_since) + "\n\n"
        for failed in plan.failed:
            yield self._failed(failed.redacted()) + "\n\n"
        for block in self._not_updatable(plan.not_updatable):
            yield block + "\n\n"
        for block in self._outside_change([o.redacted() for o in plan.outside_change]):
            yield block + "\n\n"
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
        yield "\n".join(footer) + "\n"

    def _heading(
        self, mark: str, invite_id: str, name: str | None, source: SourceLocation | None, fg: str
    ) -> str:
        label = f"{mark} {escape(invite_id)}"
        parts = [self._style(label, fg=fg, bold=True)]
        if name:
            parts.append(escape(name))  # from the files, as it will be sent
        if source is not None:  # a failed invite may not come from an entry
            parts.append(f"({escape(str(source))})")
        return "  ".join(parts)

    def _change(self, change: InviteChange, ref: str | None = None) -> str:
        if change.conflicts:
            lines = [self._heading("!", change.id, change.name, change.source, "red")]
            note = CONFLICT_NOTE.format(ref=redact_and_escape(ref or "REF"))
            lines.append("    " + self._style(f"conflict: {note}", fg="red"))
        else:
            lines = [self._heading("~", change.id, change.name, change.source, "yellow")]
        lines += self._field_lines(change, ref)
        riding: dict[str, list[str]] = {}
        for name, sub in change.kept_riding_along:
            riding.setdefault(name, []).append(sub)
        for name, subs in riding.items():
            lines.append("    " + self._style(f"warning: {kept_warning(name, subs)}", fg="yellow"))
        if change.resend:
            label = f"{redact_and_escape(change.resend_label)} (resendOnChange)"
            lines.append("    " + self._style(label, fg="cyan", bold=True))
        elif change.address_changes_silently:
            lines.append(f"    {SILENT_ADDRESS_NOTE}")
        return "\n".join(lines)

    def _field_lines(self, change: InviteChange, ref: str | None) -> list[str]:
        lines = []
        for field_change in change.field_changes:
            if field_change.field in change.conflicts:
                lines.append(f"    {self._conflict(change, field_change.field, ref)}")
                continue
            lines.extend(f"    {line}" for line in self._field(field_change))
            # Every sub-field the PATCH carries is shown, those the files leave alone too.
            lines.extend(
                f"    {redact_and_escape(field_change.field)}.{escape(sub)}: "
                f"{shown_value(value)} ({KEPT_NOTE})"
                for sub, value in change.kept_values(field_change.field)
            )
        return lines

    def _not_updatable(self, invites: list[NotUpdatable]) -> Iterator[str]:
        # Grouped in one pass: statuses come from the server, so there may be as many
        # as invites, and a scan of all invites per status would be quadratic.
        by_status: dict[str, list[NotUpdatable]] = {}
        for invite in map(NotUpdatable.redacted, invites):
            by_status.setdefault(invite.status, []).append(invite)
        for status, group in by_status.items():
            heading = f"{NOT_UPDATABLE_HEADING.capitalize()}: {redact_and_escape(status)}"
            yield self._style(heading, fg="magenta", bold=True)
            for invite in group:
                lines = [self._heading("!", invite.id, invite.name, invite.source, "magenta")]
                lines.append(f"    {not_updatable_note(invite.status)}")
                for field_change in invite.field_changes:
                    lines.extend(f"      {line}" for line in self._field(field_change))
                lines.append(f"    fix: {redact_and_escape(invite.fix)}")
                yield "\n".join(lines)

    def _conflict(self, change: InviteChange, name: str, ref: str | None) -> str:
        return (
            f"{redact_and_escape(name)}: conflict: at {redact_and_escape(ref or 'REF')} "
            f"{shown_value(change.conflicts[name])}, "
            f"on the platform {self._old(change.before.get(name))}, "
            f"wanted {self._new(change.patch[name])}"
        )

    def _outside_change(self, invites: list[OutsideChange]) -> Iterator[str]:
        if not invites:
            return
        yield self._style(f"{OUTSIDE_CHANGE_HEADING.capitalize()}:", fg="magenta", bold=True)
        for invite in invites:
            lines = [self._heading("?", invite.id, invite.name, invite.source, "magenta")]
            lines.append(f"    {OUTSIDE_CHANGE_NOTE}:")
            for field_change in invite.field_changes:
                lines.extend(f"      {line}" for line in self._field(field_change))
            yield "\n".join(lines)

    def _field(self, change: FieldChange) -> list[str]:
        name = redact_and_escape(change.field)
        if change.is_set and isinstance(change.before, IdentifierSet):
            items = [self._style(f"+ {json_text(i)}", fg="green") for i in change.added]
            items += [self._style(f"- {json_text(i)}", fg="red") for i in change.removed]
            return [f"{name}: {', '.join(items)}"]
        if change.is_object and isinstance(change.before, Contact):
            return [
                f"{name}.{escape(str(key))}: {self._old(before)} -> {self._new(after)}"
                for key, before, after in change.sub_changes()
            ]
        return [f"{name}: {self._old(change.before)} -> {self._new(change.after)}"]

    def _old(self, value: FieldValue | None) -> str:
        return self._style(shown_value(value), fg="red")

    def _new(self, value: FieldValue | None) -> str:
        return self._style(shown_value(value), fg="green")

    def _failed(self, failed: FailedInvite) -> str:
        heading = self._heading("!", failed.id, None, failed.source, "red")
        return f"{heading}\n    {redact_and_escape(failed.message)}"
