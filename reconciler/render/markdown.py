"""The plan as a pull-request comment: a summary, a table per invite, errors.

GitHub refuses comments over 65,536 characters, so the comment stops adding
invites before it would pass the limit and says how many were left out.
"""

from __future__ import annotations

import html

from reconciler.plan import FieldChange, InviteChange, Plan
from reconciler.render.common import max_changes_warning, plural, show, summary_line

COMMENT_LIMIT = 65_000
_FOLD_AFTER = 10  # changes shown open; more are folded in <details>
_TAIL_RESERVE = 600  # room kept for the closing note


def _code(text: str) -> str:
    return "<code>" + html.escape(text, quote=False).replace("|", "&#124;") + "</code>"


class MarkdownRenderer:
    def __init__(self, limit: int = COMMENT_LIMIT) -> None:
        self.limit = limit

    def render(self, plan: Plan) -> str:
        head = [f"### Invite plan: {summary_line(plan)[len('Plan: ') :]}"]
        warning = max_changes_warning(plan)
        if warning:
            head.append(f"> [!WARNING]\n> {warning}")
        if not plan.changes and not plan.errors:
            head.append("No changes: every invite matches the desired state.")
        body = "\n\n".join(head) + "\n\n"
        budget = self.limit - _TAIL_RESERVE
        # Errors first: with a long plan they are what a reviewer must not miss.
        omitted_errors = 0
        if plan.errors:
            lines = [f"- `{e.id}` ({e.source}): {html.escape(e.message)}\n" for e in plan.errors]
            body, omitted_errors = self._fill(body + "#### Errors\n\n", budget, lines)
            body += "\n"
        sections = [self._change(c) for c in plan.changes]
        folded = len(sections) > _FOLD_AFTER
        if folded:
            body += f"<details><summary>{plural(len(sections), 'invite')} to update</summary>\n\n"
        body, omitted_changes = self._fill(body, budget, sections)
        if folded:
            body += "</details>\n\n"
        if omitted_changes or omitted_errors:
            body += (
                f"_Not shown, to keep this comment under {self.limit:,} characters: "
                f"{plural(omitted_changes, 'change')} and {plural(omitted_errors, 'error')}. "
                "The job log and the saved plan file have the whole plan._\n"
            )
        return body

    @staticmethod
    def _fill(body: str, budget: int, pieces: list[str]) -> tuple[str, int]:
        """``body`` with as many of ``pieces`` as fit, and how many did not."""
        for shown, piece in enumerate(pieces):
            if len(body) + len(piece) > budget:
                return body, len(pieces) - shown
            body += piece
        return body, 0

    def _change(self, change: InviteChange) -> str:
        title = f"`{change.id}`" + (f" {html.escape(change.name)}" if change.name else "")
        notes = [f"`{change.source}`"]
        if change.resend:
            notes.append("invitation will be re-sent")
        rows = ["| field | before | after |", "|---|---|---|"]
        for field_change in change.field_changes:
            rows.extend(self._rows(field_change))
        return f"#### {title}\n{' · '.join(notes)}\n\n" + "\n".join(rows) + "\n\n"

    def _rows(self, change: FieldChange) -> list[str]:
        if change.is_set and isinstance(change.before, list):
            delta = [f"+ {show(i)}" for i in change.added] + [
                f"- {show(i)}" for i in change.removed
            ]
            after = "<br>".join(_code(d) for d in delta)
            return [f"| {change.field} | {_code(show(change.before))} | {after} |"]
        if change.is_object and isinstance(change.before, dict):
            return [
                f"| {change.field}.{key} | {_code(show(before))} | {_code(show(after))} |"
                for key, before, after in change.sub_changes()
            ]
        return [f"| {change.field} | {_code(show(change.before))} | {_code(show(change.after))} |"]
