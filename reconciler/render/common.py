"""Wording shared by every output format."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from reconciler.safetext import clean
from reconciler.wording import plural  # re-exported: the commands import it from here

if TYPE_CHECKING:
    from reconciler.plan import Plan


def show(value: Any) -> str:
    """A value as the user wrote it in YAML terms: strings quoted, lists inline, made safe."""
    return clean(json.dumps(value, ensure_ascii=False))


def summary_line(plan: Plan) -> str:
    s = plan.summary
    line = f"Plan: {s.update} to update, {s.unchanged} unchanged, {plural(s.error, 'error')}"
    if plan.not_updatable:
        line += f", {len(plan.not_updatable)} no longer updatable"
    return line + "."


def max_changes_warning(plan: Plan) -> str | None:
    problem = plan.too_much_change()
    return None if problem is None else f"apply will refuse this plan: {problem.reason}"


NOT_UPDATABLE_HEADING = "no longer updatable"


def not_updatable_note(status: str) -> str:
    return (
        f"{clean(status)}, not pending: it can no longer be updated and apply leaves it "
        "alone; these fields differ from the files:"
    )
