"""Ways to show a plan: text for a terminal or CI log, JSON, Markdown for a PR comment.

Each renderer is imported from its own module, on first use: the package is reached through
``output.common`` by offline commands that must not load the plan model.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from reconciler.plan.model import Plan


class PlanRenderer(Protocol):
    def render(self, plan: Plan) -> str: ...

    def chunks(self, plan: Plan) -> Iterator[str]: ...


def renderer_for(name: str, color: bool) -> PlanRenderer:
    if name == "json":
        return JsonRenderer()
    if name == "markdown":
        from reconciler.output.markdown import MarkdownRenderer

        return MarkdownRenderer()
    from reconciler.output.text import TextRenderer

    return TextRenderer(color=color)


class JsonRenderer:
    """The plan as a JSON document: the saved plan file's own text (``reconciler.plan.saved``)."""

    def render(self, plan: Plan) -> str:
        return "".join(self.chunks(plan))

    def chunks(self, plan: Plan) -> Iterator[str]:
        from reconciler.plan.saved import plan_chunks

        return plan_chunks(plan)
