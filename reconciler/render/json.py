"""The plan as the JSON document of cli.md (also the saved plan file)."""

from __future__ import annotations

import json

from reconciler.plan import Plan


class JsonRenderer:
    def render(self, plan: Plan) -> str:
        return json.dumps(plan.to_document(), indent=2, ensure_ascii=False) + "\n"
