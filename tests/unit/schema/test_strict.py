"""The shipped schemas compile under `ajv --strict=true`, the editors' engine: every
keyword that only applies to one type sits beside that `type` (beside a `$ref` too,
which strict mode does not look through)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.ajv import require_ajv

SCHEMAS = sorted((Path(__file__).parents[3] / "schemas").glob("*.schema.json"))
# The keywords strict mode ties to a type ("strictTypes"), by the type they need.
NEEDS_TYPE = {
    "string": {"minLength", "maxLength", "pattern", "format"},
    "object": {"minProperties", "maxProperties", "propertyNames", "required", "properties"},
    "array": {"minItems", "maxItems", "uniqueItems", "items", "contains"},
}


def _nodes(node: Any, path: str) -> Iterator[tuple[str, dict[str, Any]]]:
    if isinstance(node, dict):
        yield path, node
        for key, value in node.items():
            yield from _nodes(value, f"{path}/{key}")
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from _nodes(value, f"{path}/{index}")


def _untyped(schema: dict[str, Any]) -> list[str]:
    found = []
    for path, node in _nodes(schema, "#"):
        declared = node.get("type")
        types = set(declared) if isinstance(declared, list) else {declared}
        for kind, keywords in NEEDS_TYPE.items():
            used = keywords & set(node)
            if used and kind not in types and not _is_keyword_map(path):
                found.append(f'{path}: {", ".join(sorted(used))} without "type": "{kind}"')
    return found


def _is_keyword_map(path: str) -> bool:
    """A mapping of names to schemas (`properties`, `$defs`): its keys are not keywords."""
    return path.rsplit("/", 1)[-1] in ("properties", "$defs", "patternProperties")


@pytest.mark.parametrize("path", SCHEMAS, ids=lambda p: p.name)
def test_no_type_bound_keyword_without_its_type(path: Path) -> None:
    assert _untyped(json.loads(path.read_text(encoding="utf-8"))) == []


def test_the_rule_finds_a_length_beside_a_ref() -> None:
    schema = {"properties": {"name": {"$ref": "#/$defs/line", "maxLength": 200}}}
    assert _untyped({"type": "object", **schema}) == [
        '#/properties/name: maxLength without "type": "string"'
    ]


def test_every_schema_compiles_under_ajv_strict() -> None:
    ajv = require_ajv()
    schemas = [json.loads(p.read_text(encoding="utf-8")) for p in SCHEMAS]
    assert dict(zip([p.name for p in SCHEMAS], ajv.compile_errors(schemas), strict=True)) == {
        p.name: None for p in SCHEMAS
    }
