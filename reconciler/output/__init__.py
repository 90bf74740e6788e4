"""Ways to show a plan: text for a terminal or CI log, JSON, Markdown for a PR comment.

The renderers are imported on first use: the package is reached through
``render.common`` by offline commands that must not load the plan model.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from reconciler.output.json import JsonRenderer
    from reconciler.output.markdown import MarkdownRenderer
    from reconciler.output.text import TextRenderer
    from reconciler.plan.model import Plan

_MODULES = {"JsonRenderer": "json", "MarkdownRenderer": "markdown", "TextRenderer": "text"}


class PlanRenderer(Protocol):
    def render(self, plan: Plan) -> str: ...

    def chunks(self, plan: Plan) -> Iterator[str]: ...


def renderer_for(name: str, color: bool) -> PlanRenderer:
    if name == "json":
        from reconciler.output.json import JsonRenderer

        return JsonRenderer()
    if name == "markdown":
        from reconciler.output.markdown import MarkdownRenderer

        return MarkdownRenderer()
    from reconciler.output.text import TextRenderer

    return TextRenderer(color=color)


def __getattr__(name: str) -> Any:
    if name in _MODULES:  # the renderers, still importable from here
        module = importlib.import_module(f"reconciler.output.{_MODULES[name]}")
        return getattr(module, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["JsonRenderer", "MarkdownRenderer", "PlanRenderer", "TextRenderer", "renderer_for"]
