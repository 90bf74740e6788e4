"""The plan as a pull-request comment: a summary, a table per invite, errors.

GitHub refuses comments over 65,536 characters, so the comment stops adding
invites before it would pass the limit and says how many were left out.
"""

from __future__ import annotations

import html
import re
from collections import Counter
from collections.abc import Iterable, Iterator

from reconciler.errors import FileProblem
from reconciler.output import (
    CONFLICT_NOTE,
    KEPT_NOTE,
    NOT_PENDING_NOTE,
    NOT_SET,
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
    summary_line,
)
from reconciler.plan.model import FailedInvite, InviteChange, Plan, SetApart
from reconciler.safetext import escape, json_text, plural, redact

COMMENT_LIMIT = 65_000
_FOLD_AFTER = 10  # changes shown open; more are folded in <details>
_TAIL_RESERVE = 600  # room kept for the closing note


# Inside <code>, GitHub neither mentions @users nor links #issues; these characters are
# written as references so that Markdown cannot read them as a code span, a table cell,
# emphasis or a link either.
_MARKDOWN_SIGNS = str.maketrans({c: f"&#{ord(c)};" for c in "|`*_[]\\~"})


# In a heading, @ and # as well: a name like "Northwind @octocat #1 <b>" must neither
# mention a user nor link an issue, even where <code> were not honoured.
_HEADING_SIGNS = str.maketrans({c: f"&#{ord(c)};" for c in "|`*_[]\\~@#"})


def _code(text: str, signs: dict[int, str] = _MARKDOWN_SIGNS) -> str:
    """``text`` from a file or a server, shown literally wherever it stands.

    Escaped, not redacted: the plan's records come here already ``redacted()`` (what the
    server said redacted), and what the files say is shown as it will be sent.
    """
    escaped = html.escape(escape(text), quote=False).translate(signs)
    return f"<code>{escaped}</code>"


def problems_markdown(problems: Iterable[FileProblem]) -> str:
    """Problems in the input files (errors and warnings) as a table, for the job summary."""
    listed = list(problems)
    errors = sum(p.is_error for p in listed)
    counts = [plural(n, word) for n, word in ((errors, "error"), (len(listed) - errors, "warning"))]
    rows = [
        f"| {'error' if p.is_error else 'warning'} | "
        f"{_code(f'{p.path}:{p.line}:{p.column}' if p.line else p.path)} | {_code(p.message)} |"
        for p in listed[:_PROBLEMS_SHOWN]
    ]
    more = len(listed) - len(rows)
    tail = [f"\nand {plural(more, 'more problem')}, listed in the job's log"] if more > 0 else []
    said = " and ".join(c for c in counts if not c.startswith("0 "))
    head = f"**invite-reconciler**: {said} in the invite files\n\n| | where | what |\n|---|---|---|"
    return "\n".join([head, *rows, *tail])


_PROBLEMS_SHOWN = 200
_PLAIN = re.compile(r"[A-Za-z0-9]+(?:\.[A-Za-z0-9]+)?")
_ID = re.compile(r"[A-Za-z0-9_.-]{1,128}")


def _label(text: str) -> str:
    """A field name: as it is when it is a plain word, else shown literally."""
    return text if _PLAIN.fullmatch(text) else _code(text)


def _id(invite_id: str) -> str:
    return f"`{invite_id}`" if _ID.fullmatch(invite_id) else _code(invite_id)


class MarkdownRenderer(PlanRenderer):
    def __init__(self, limit: int = COMMENT_LIMIT) -> None:
        self.limit = limit

    def chunks(self, plan: Plan) -> Iterator[str]:
        """The comment in pieces, an invite each; sections that do not fit are never made."""
        page = _Page(self.limit - _TAIL_RESERVE)
        yield page.add(self._head(plan))
        # What a reviewer must not miss first: invites apply will leave alone, then errors.
        yield from page.fill("stale", self._not_updatable(plan), len(plan.not_updatable))
        if plan.failed:
            yield page.add("#### Errors\n\n")
            errors = (
                f"- {_id(f.id)}{f' ({_code(str(f.source))})' if f.source is not None else ''}: "
                f"{_code(f.message)}\n"
                for f in map(FailedInvite.redacted, plan.failed)
            )
            yield from page.fill("errors", errors, len(plan.failed))
            yield page.add("\n")
        folded = len(plan.changes) > _FOLD_AFTER
        if folded:
            yield page.add(
                f"<details><summary>{plural(len(plan.changes), 'invite')} to update</summary>\n\n"
            )
        sections = (self._change(c.redacted(), plan.changed_since) for c in plan.changes)
        yield from page.fill("changes", sections, len(plan.changes))
        if folded:
            yield page.add("</details>\n\n")
        if plan.outside_change:
            yield page.add(f"#### {OUTSIDE_CHANGE_HEADING}\n\n{OUTSIDE_CHANGE_NOTE}.\n\n")
            outside = (self._set_apart(o.redacted()) for o in plan.outside_change)
            yield from page.fill("changes", outside, len(plan.outside_change))
        if page.left_out:
            yield self._omitted_note(page.left_out)

    def _head(self, plan: Plan) -> str:
        head = [f"### Invite plan: {summary_line(plan).removeprefix('Plan: ')}"]
        warning = max_changes_warning(plan)
        if warning:
            head.append(f"> [!WARNING]\n> {warning}")
        urls = invite_urls_note(plan, lambda url: _code(redact(url)))
        if urls:
            head.append(f"> [!NOTE]\n> {urls}.")
        if not plan.changes and not plan.failed and not plan.not_updatable:
            read = " read" if plan.changed_since is not None else ""
            head.append(f"No changes: every invite{read} matches the desired state.")
        return "\n\n".join(head) + "\n\n"

    def _omitted_note(self, left_out: Counter[str]) -> str:
        kinds = [plural(left_out["changes"], "change"), plural(left_out["errors"], "error")]
        if left_out["stale"]:
            kinds.append(f"{plural(left_out['stale'], 'invite')} no longer updatable")
        counts = f"{', '.join(kinds[:-1])} and {kinds[-1]}"
        return (
            f"_Not shown, to keep this comment under {self.limit:,} characters: {counts}. "
            "The job log and the saved plan file have the whole plan._\n"
        )

    def _not_updatable(self, plan: Plan) -> Iterator[str]:
        """The section, a piece per invite: a status heading goes with its first invite, so
        the count left out counts invites and no heading is left without one."""
        for status, group in by_status(plan.not_updatable).items():
            heading = f"#### {NOT_UPDATABLE_HEADING}: {_code(status)}\n\n"
            note = f" · {NOT_PENDING_NOTE.format(status=_code(status))}."
            for invite in group:
                where = _code(str(invite.source))
                fix = NOT_UPDATABLE_FIX.format(source=where, invite_id=invite.id)
                yield heading + self._set_apart(invite, note, f"Fix: {fix}.\n\n")
                heading = ""

    def _set_apart(self, invite: SetApart, note: str = "", tail: str = "") -> str:
        """An invite that differs and that apply leaves alone: a table of its fields."""
        rows = ["| field | on the platform | in the files |", "|---|---|---|"]
        rows += [_row(row) for field in invite.field_changes for row in field_rows(field)]
        title = _title(invite.id, invite.name)
        where = _code(str(invite.source))
        return f"##### {title}\n{where}{note}\n\n" + "\n".join(rows) + "\n\n" + tail

    def _change(self, change: InviteChange, ref: str | None) -> str:
        notes = [_code(str(change.source))]
        if change.resend:
            notes.append(f"**{resend_note(change, _code)}**")
        elif change.address_changes_silently:
            notes.append(SILENT_ADDRESS_NOTE)
        rows = [_row(row) for row in change_rows(change) if not row.conflict]
        table = "\n".join(["| field | before | after |", "|---|---|---|", *rows]) + "\n\n"
        table = table if rows else ""
        for name, subs in change.kept_riding_along.items():
            table += f"> [!WARNING]\n> {kept_warning(name, subs, _code, _code)}\n\n"
        if change.conflicts:
            at = _code(ref or "REF")
            conflicts = [
                f"> [!CAUTION]\n> **Conflict**: {CONFLICT_NOTE.format(ref=at)}.\n",
                f"| field | at {at} | on the platform | wanted |",
                "|---|---|---|---|",
                *(
                    f"| {_label(name)} | {_cell(was)} | {_cell(change.before.get(name))} | "
                    f"{_cell(change.patch[name])} |"
                    for name, was in change.conflicts.items()
                ),
            ]
            table = "\n".join(conflicts) + "\n\n" + table
        return f"#### {_title(change.id, change.name)}\n{' · '.join(notes)}\n\n" + table


class _Page:
    """How much of the comment's budget the pieces given so far have used, and how many
    pieces of each kind were left out."""

    def __init__(self, budget: int) -> None:
        self.budget = budget
        self.size = 0
        self.left_out: Counter[str] = Counter()

    def add(self, piece: str) -> str:
        self.size += len(piece)
        return piece

    def fill(self, kind: str, pieces: Iterable[str], total: int) -> Iterator[str]:
        """As many of the ``total`` ``pieces`` as fit; the rest are counted, never made."""
        for shown, piece in enumerate(pieces):
            if self.size + len(piece) > self.budget:
                self.left_out[kind] += total - shown
                return
            yield self.add(piece)


def _row(row: Row) -> str:
    after = "<br>".join(map(_code, row.items)) if row.items is not None else _cell(row.after)
    kept = f" _({KEPT_NOTE})_" if row.kept else ""
    return f"| {_label(row.label)} | {_cell(row.before)} | {after}{kept} |"


def _cell(value: object) -> str:
    """A value in a table cell: as code, or `(not set)` in italics for none."""
    return f"_{NOT_SET}_" if value is None else _code(json_text(value))


def _title(invite_id: str, name: str | None) -> str:
    return _id(invite_id) + (f" {_code(name, _HEADING_SIGNS)}" if name else "")
