"""The plan and apply results as plain text for a terminal or a CI log."""

from __future__ import annotations

from collections.abc import Iterator

import click

from reconciler.apply.applier import ApplyReport, ChangeResult, WriteState
from reconciler.output.common import (
    NOT_UPDATABLE_HEADING,
    max_changes_warning,
    not_updatable_note,
    plural,
    show,
    summary_line,
)
from reconciler.plan.model import FieldChange, InviteChange, InviteProblem, NotUpdatable, Plan
from reconciler.safetext import clean


class TextRenderer:
    def __init__(self, color: bool = False) -> None:
        self.color = color

    def _style(self, text: str, **style: object) -> str:
        return click.style(text, **style) if self.color else text  # type: ignore[arg-type]

    # -- plan -----------------------------------------------------------------

    def render(self, plan: Plan) -> str:
        return "".join(self.chunks(plan))

    def chunks(self, plan: Plan) -> Iterator[str]:
        """The plan an invite at a time: each block and the blank line after it, then totals."""
        for change in plan.changes:
            yield self._change(change) + "\n\n"
        for problem in plan.errors:
            yield self._problem(problem) + "\n\n"
        for block in self._not_updatable(plan.not_updatable):
            yield block + "\n\n"
        footer = []
        warning = max_changes_warning(plan)
        if warning:
            footer.append(self._style(f"Warning: {warning}", fg="red", bold=True))
        if not plan.changes:
            footer.append("No changes." if not plan.errors else "No changes to apply.")
        footer.append(summary_line(plan))
        yield "\n".join(footer) + "\n"

    def _heading(self, mark: str, invite_id: str, name: str | None, source: str, fg: str) -> str:
        label = f"{mark} {clean(invite_id)}"
        parts = [self._style(label, fg=fg, bold=True)]
        if name:
            parts.append(clean(name))
        parts.append(f"({clean(source)})")
        return "  ".join(parts)

    def _change(self, change: InviteChange) -> str:
        lines = [self._heading("~", change.id, change.name, change.source, "yellow")]
        for field_change in change.field_changes:
            lines.extend(f"    {line}" for line in self._field(field_change))
        if change.resend:
            lines.append(
                "    " + self._style("will re-send the invitation (resendOnChange)", fg="cyan")
            )
        return "\n".join(lines)

    def _not_updatable(self, invites: list[NotUpdatable]) -> Iterator[str]:
        # Grouped in one pass: statuses come from the server, so there may be as many
        # as invites, and a scan of all invites per status would be quadratic.
        by_status: dict[str, list[NotUpdatable]] = {}
        for invite in invites:
            by_status.setdefault(invite.status, []).append(invite)
        for status, group in by_status.items():
            heading = f"{NOT_UPDATABLE_HEADING.capitalize()}: {clean(status)}"
            yield self._style(heading, fg="magenta", bold=True)
            for invite in group:
                lines = [self._heading("!", invite.id, invite.name, invite.source, "magenta")]
                lines.append(f"    {not_updatable_note(invite.status)}")
                for field_change in invite.field_changes:
                    lines.extend(f"      {line}" for line in self._field(field_change))
                lines.append(f"    fix: {clean(invite.fix)}")
                yield "\n".join(lines)

    def _field(self, change: FieldChange) -> list[str]:
        name = clean(change.field)
        if change.is_set and isinstance(change.before, list):
            items = [self._style(f"+ {show(i)}", fg="green") for i in change.added]
            items += [self._style(f"- {show(i)}", fg="red") for i in change.removed]
            return [f"{name}: {', '.join(items)}"]
        if change.is_object and isinstance(change.before, dict):
            return [
                f"{name}.{clean(str(key))}: {self._old(before)} -> {self._new(after)}"
                for key, before, after in change.sub_changes()
            ]
        return [f"{name}: {self._old(change.before)} -> {self._new(change.after)}"]

    def _old(self, value: object) -> str:
        return self._style(show(value), fg="red")

    def _new(self, value: object) -> str:
        return self._style(show(value), fg="green")

    def _problem(self, problem: InviteProblem) -> str:
        heading = self._heading("!", problem.id, None, problem.source, "red")
        return f"{heading}\n    {clean(problem.message)}"

    # -- apply ----------------------------------------------------------------

    def apply_result(self, result: ChangeResult) -> str:
        change = result.change
        invite_id = clean(change.id)
        where = f"{invite_id}  ({clean(change.source)})"
        resend_error = clean(str(result.resend_error))
        if result.state is WriteState.UPDATED:
            line = f"{self._style('updated', fg='green')}      {where}: {', '.join(change.patch)}"
            if result.resent:
                line += "\n" + f"{self._style('re-sent', fg='cyan')}      {invite_id}: invitation"
            if result.resend_unknown:
                line += "\n" + (
                    f"{self._style('re-send unknown', fg='red')}  {invite_id}: "
                    f"{resend_error}; the invitation may have been sent. Check with the "
                    f"invitee before sending it again (reconcile resend {invite_id})"
                )
            elif result.resend_error:
                line += "\n" + (
                    f"{self._style('not re-sent', fg='red')}  {invite_id}: {resend_error}; "
                    f"the update was applied, re-send it with: reconcile resend {invite_id}"
                )
            return line
        if result.update_unknown:
            # The audit log says `unknown` too: "failed" would invite a blind retry.
            return (
                f"{self._style('update unknown', fg='red')}  {where}: {clean(str(result.error))}; "
                "the server may have applied it. Check before applying again "
                f"(reconcile plan --target {invite_id})"
            )
        if result.state is WriteState.FAILED:
            return f"{self._style('failed', fg='red')}       {where}: {clean(str(result.error))}"
        return f"{self._style('not started', fg='yellow')}  {where}"

    def apply_summary(self, report: ApplyReport) -> str:
        updated = report.count(WriteState.UPDATED)
        failed = report.count(WriteState.FAILED)
        parts = [f"{updated} updated", f"{failed} failed"]
        if report.updates_unknown:
            parts.append(f"{plural(report.updates_unknown, 'update')} with unknown outcome")
        not_started = report.count(WriteState.NOT_STARTED)
        if not_started:
            parts.append(f"{not_started} not started")
        if report.resend_failures:
            parts.append(f"{plural(report.resend_failures, 'invitation')} not re-sent")
        if report.resends_unknown:
            parts.append(
                f"{plural(report.resends_unknown, 'invitation')} with unknown re-send outcome"
            )
        lines = []
        if report.stopped_by:
            lines.append(self._style(f"Stopped: {report.stopped_by}.", fg="red", bold=True))
        lines.append(f"Apply: {', '.join(parts)}.")
        return "\n".join(lines)
