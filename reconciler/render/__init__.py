"""Ways to show a plan: text for a terminal or CI log, JSON, Markdown for a PR comment."""

from __future__ import annotations

from typing import Protocol

from reconciler.plan import Plan
from reconciler.render.json import JsonRenderer
from reconciler.render.markdown import MarkdownRenderer
from reconciler.render.text import TextRenderer


class PlanRenderer(Protocol):
    def render(self, plan: Plan) -> str: ...


def renderer_for(name: str, color: bool) -> PlanRenderer:
    if name == "json":
        return JsonRenderer()
    if name == "markdown":
        return MarkdownRenderer()
    return TextRenderer(color=color)


__all__ = ["JsonRenderer", "MarkdownRenderer", "PlanRenderer", "TextRenderer", "renderer_for"]
