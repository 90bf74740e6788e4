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
        head = [f"### Invite plan: {summary_line(plan)[len('Plan: ') :]}", ""]
        warning = max_changes_warning(plan)
        if warning:
            head += [f"> [!WARNING]\n> {warning}", ""]
        if not plan.changes and not plan.errors:
            head += ["No changes: every invite matches the desired state.", ""]
        body = "\n".join(head)
        budget = self.limit - _TAIL_RESERVE
        sections = [self._change(c) for c in plan.changes]
        folded = len(sections) > _FOLD_AFTER
        if folded:
            body += f"<details><summary>{plural(len(sections), 'invite')} to update</summary>\n\n"
        shown = 0
        for section in sections:
            if len(body) + len(section) > budget:
                break
            body += section
            shown += 1
        if folded:
            body += "</details>\n\n"
        omitted_changes = len(sections) - shown
        omitted_errors = 0
        if plan.errors:
            body += "#### Errors\n\n"
            for error in plan.errors:
                line = f"- `{error.id}` ({error.source}): {html.escape(error.message)}\n"
                if len(body) + len(line) > budget:
                    omitted_errors = len(plan.errors) - plan.errors.index(error)
                    break
                body += line
            body += "\n"
        if omitted_changes or omitted_errors:
            body += (
                f"_Not shown, to keep this comment under {self.limit:,} characters: "
                f"{plural(omitted_changes, 'change')} and {plural(omitted_errors, 'error')}. "
                "The job log and the saved plan file have the whole plan._\n"
            )
        return body

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
