"""The plan and apply results as plain text for a terminal or a CI log."""

from __future__ import annotations

from collections.abc import Iterator

from reconciler.model.invite import Contact, FieldValue, IdentifierSet, SourceLocation
from reconciler.output.apply_text import ApplyLines
from reconciler.output.common import (
    CONFLICT_NOTE,
    KEPT_NOTE,
    NOT_UPDATABLE_HEADING,
    OUTSIDE_CHANGE_HEADING,
    OUTSIDE_CHANGE_NOTE,
    invite_urls_note,
    kept_warning,
    max_changes_warning,
    not_updatable_note,
    shown_value,
    summary_line,
)
from reconciler.plan.model import (
    FailedInvite,
    FieldChange,
    InviteChange,
    NotUpdatable,
    OutsideChange,
    Plan,
)
from reconciler.safetext import escape, json_text, redact_and_escape


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
        riding: dict[str, list[str]] = {}
        for name, sub in change.kept_riding_along:
            riding.setdefault(name, []).append(sub)
        for name, subs in riding.items():
            lines.append("    " + self._style(f"warning: {kept_warning(name, subs)}", fg="yellow"))
        if change.resend:
            label = f"{redact_and_escape(change.resend_label)} (resendOnChange)"
            lines.append("    " + self._style(label, fg="cyan", bold=True))
        return "\n".join(lines)

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
