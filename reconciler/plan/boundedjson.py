"""Read JSON from outside within bounds: size, nesting depth, duplicate keys.

``json.loads`` recurses once per nesting level, so 30,000 ``[`` can exhaust
the stack before it says anything. The depth is measured first, by a scan
that does not recurse, and the document refused with ``path:line:col``.
"""

from __future__ import annotations

import json
import re
from typing import Any

from reconciler.errors import ReconcilerError
from reconciler.files import TooLarge, read_regular
from reconciler.safetext import escape

# A JSON string (possessive: no backtracking on a long unterminated one), or a bracket.
_STRING = re.compile(r'"(?:[^"\\]|\\.)*+"', re.DOTALL)
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_STRING_OR_BRACKET = re.compile(r'"(?:[^"\\]|\\.)*+"|[\[\]{}]', re.DOTALL)


def read_bounded_text(path: str, limit: int, what: str) -> str:
    """The file's text, refused past ``limit`` bytes or when it is not UTF-8."""
    try:
        data = read_regular(path, limit)  # a FIFO, a device: refused at once
    except OSError as exc:
        raise ReconcilerError(f"{escape(path)}: cannot read {what}: {exc.strerror}") from None
    except TooLarge:
        size = f"{limit // 1048576} MiB" if limit >= 1048576 else f"{limit:,} bytes"
        raise ReconcilerError(f"{escape(path)}: larger than {size}: too large for {what}") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise ReconcilerError(f"{escape(path)}: not {what} (not UTF-8 text)") from None


def too_deep_at(text: str, limit: int) -> int | None:
    """The offset of the bracket that takes nesting past ``limit``, or None."""
    depth = 0
    for char in _NOT_BRACKET.sub("", _STRING.sub('""', text)):
        depth += 1 if char in "[{" else -1
        if depth > limit:
            return _offset_past(text, limit)
    return None


def _offset_past(text: str, limit: int) -> int:
    # Only on refusal: a second, slower scan that keeps positions. It always
    # finds the bracket (the first scan saw it), so the last line is never reached.
    depth = 0
    for match in _STRING_OR_BRACKET.finditer(text):
        char = match.group()
        if char in "[{":
            depth += 1
            if depth > limit:
                return match.start()
        elif char in "]}":
            depth -= 1
    return len(text)


def _line_col(text: str, offset: int) -> tuple[int, int]:
    line = text.count("\n", 0, offset) + 1
    return line, offset - (text.rfind("\n", 0, offset) + 1) + 1


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise _DuplicateKey(key)
        result[key] = value
    return result


class _DuplicateKey(Exception):
    def __init__(self, key: str) -> None:
        self.key = key


def loads_bounded(text: str, path: str, max_depth: int, what: str) -> Any:
    """``text`` parsed, or a ReconcilerError naming ``path`` (and line:col where known)."""
    where = escape(path)
    offset = too_deep_at(text, max_depth)
    if offset is not None:
        line, col = _line_col(text, offset)
        raise ReconcilerError(f"{where}:{line}:{col}: nested too deeply (limit {max_depth})")
    try:
        return json.loads(text, object_pairs_hook=_unique_keys)
    except json.JSONDecodeError as exc:
        raise ReconcilerError(
            f"{where}:{exc.lineno}:{exc.colno}: not {what} (invalid JSON: {exc.msg})"
        ) from None
    except _DuplicateKey as exc:
        key = escape(json.dumps(exc.key, ensure_ascii=False))
        raise ReconcilerError(f"{where}: not {what} (key {key} appears twice)") from None
    except (ValueError, RecursionError) as exc:  # absurd numbers
        raise ReconcilerError(f"{where}: not {what} ({type(exc).__name__})") from None
