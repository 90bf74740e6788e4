"""The plan as the JSON document of cli.md (also the saved plan file)."""

from __future__ import annotations

import json
import re
from typing import Any

from reconciler.errors import ReconcilerError
from reconciler.plan import Plan

# json.dumps(ensure_ascii=False) leaves non-ASCII characters as they are: these (C1
# controls, lone surrogates, bidi and line separators) are written as \u escapes instead,
# which parse back to the same string but cannot act on a terminal that prints the file.
_UNSAFE = re.compile("[\x7f-\x9f\ud800-\udfff\u2028\u2029\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def document_json(document: dict[str, Any]) -> str:
    try:
        # NaN and Infinity are not JSON: a strict reader (jq, another language) refuses
        # the file. Server values are type-checked on reading, so this is a last guard.
        text = json.dumps(document, indent=2, ensure_ascii=False, allow_nan=False)
    except ValueError:
        raise ReconcilerError(
            "cannot write the plan as JSON: it holds a number JSON cannot represent "
            "(NaN or Infinity)"
        ) from None
    return _UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", text) + "\n"


class JsonRenderer:
    def render(self, plan: Plan) -> str:
        return document_json(plan.to_document())
