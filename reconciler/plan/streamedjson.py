"""JSON text written a record at a time: the text ``json.dumps(document, indent=2)`` gives,
for a document whose lists may be iterators of records made as they are written.

The saved plan (``reconciler.plan.saved``) and `plan --format json` are written so: a
plan of 200,000 changes is never a second time in memory.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import Any

from reconciler.errors import ReconcilerError
from reconciler.safetext import escape_json_text

_NOT_JSON = (
    "cannot write the plan as JSON: it holds a number JSON cannot represent (NaN or Infinity)"
)


def document_json(document: dict[str, Any]) -> str:
    return "".join(document_chunks(document.items()))


def document_chunks(parts: Iterable[tuple[str, Any]]) -> Iterator[str]:
    """The text of ``json.dumps(document, indent=2)`` and a newline, a record at a time.

    ``parts`` are the document's (key, value) pairs in order; a list value may be any
    iterator of records (``Plan.document_parts``), so no record is held longer than
    it takes to write it.
    """
    try:
        # NaN and Infinity are not JSON: a strict reader (jq, another language) refuses
        # the file. Server values are type-checked on reading, so this is a last guard.
        for piece in _pieces(parts):
            yield escape_json_text(piece)
    except ValueError:
        raise ReconcilerError(_NOT_JSON) from None
    yield "\n"


def _pieces(parts: Iterable[tuple[str, Any]]) -> Iterator[str]:
    opening = "{"
    for key, value in parts:
        yield f"{opening}\n  {_dumps(key)}: "
        opening = ","
        if isinstance(value, (list, Iterator)):
            yield from _list(value)
        else:
            yield _nested(value, "\n  ")
    yield "{}" if opening == "{" else "\n}"


_ITEM_INDENT = "\n    "


def _list(records: Iterable[Any]) -> Iterator[str]:
    # A list two levels down: json.dumps(indent=2) puts each item on its own lines,
    # indented four spaces, and writes an empty list as [].
    opening = "["
    for record in records:
        yield f"{opening}\n    {_nested(record, _ITEM_INDENT)}"
        opening = ","
    yield "[]" if opening == "[" else "\n  ]"


def _nested(value: Any, indent: str) -> str:
    # A string never holds a raw newline in JSON, so each newline of the text starts
    # a line of structure, which moves right by the depth it is written at.
    return _dumps(value).replace("\n", indent)


def _dumps(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, allow_nan=False)
