"""Wording shared by every output format."""

from __future__ import annotations

import json
from typing import Any

from reconciler.plan import Plan


def show(value: Any) -> str:
    """A value as the user wrote it in YAML terms: strings quoted, lists inline."""
    return json.dumps(value, ensure_ascii=False)


def plural(count: int, word: str) -> str:
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


def summary_line(plan: Plan) -> str:
    s = plan.summary
    return f"Plan: {s.update} to update, {s.unchanged} unchanged, {plural(s.error, 'error')}."


def too_many_changes(plan: Plan) -> str:
    return (
        f"the plan updates {len(plan.changes)} invites, more than max_changes "
        f"({plan.max_changes}). Split the change or raise the limit."
    )


def max_changes_warning(plan: Plan) -> str | None:
    if not plan.over_max_changes:
        return None
    return f"apply will refuse this plan: {too_many_changes(plan)}"
