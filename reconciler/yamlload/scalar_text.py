"""A value written back as YAML scalar text, in the style it was written in where that
reads back as the same value: plain, single-quoted, else double-quoted with escapes."""

from __future__ import annotations

import json
import re
from typing import Any

from reconciler.yamlload.scalars import RESOLVED_FIRST, STR_TAG, resolve_plain

# Characters a double-quoted scalar must escape: YAML reads them as breaks, or refuses them.
_UNPRINTABLE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\ufeff\ud800-\udfff\ufffe\uffff]")
# A plain scalar's first character is no indicator; inside [ ] or { } no character of
# `,[]{}` either, where in block context they are text like any other.
_PLAIN_FLOW = re.compile(r"[^\s\-?:,\[\]{}#&*!|>'\"%@`](?:[^,\[\]{}]*[^\s,\[\]{}:])?")
_PLAIN_BLOCK = re.compile(r"[^\s\-?:,\[\]{}#&*!|>'\"%@`](?:.*[^\s:])?", re.DOTALL)


def render_scalar(value: Any, style: str | None, flow: bool) -> str:
    """``value`` as a YAML scalar: in the style it was written in where that reads it back."""
    if not isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if style == "'" and not _UNPRINTABLE.search(value):
        return "'" + value.replace("'", "''") + "'"
    if style is None and _plain_ok(value, flow):
        return value
    return _double_quoted(value)


def _plain_ok(value: str, flow: bool) -> bool:
    plain = _PLAIN_FLOW if flow else _PLAIN_BLOCK
    if not plain.fullmatch(value) or ": " in value or " #" in value or "\n" in value:
        return False
    if _UNPRINTABLE.search(value):
        return False
    return value[:1] not in RESOLVED_FIRST or resolve_plain(value) == STR_TAG


def _double_quoted(value: str) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return _UNPRINTABLE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)
