"""The plan as a JSON document: the saved plan file's own text (``reconciler.plan.saved``)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from reconciler.plan.saved import plan_chunks

if TYPE_CHECKING:
    from reconciler.plan.model import Plan


class JsonRenderer:
    def render(self, plan: Plan) -> str:
        return "".join(self.chunks(plan))

    def chunks(self, plan: Plan) -> Iterator[str]:
        return plan_chunks(plan)
