"""What a policy's verdict on an entry depends on (``looked_at``), and a quick exact
verdict for the keywords policies are mostly made of (``quick_check``): a yes taken from
it, a no left to jsonschema to word and place."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from reconciler.schema.re2pattern import re2_finds

# Keywords that, at the entry's level, look only at the properties they name: a schema
# made of these (and of subschemas made of these, by the composition keywords) judges an
# entry by those properties alone. Any other keyword there sees the whole entry.
_NOTES = frozenset(
    {"$comment", "title", "description", "examples", "default", "$schema", "deprecated"}
)
_COMPOSED = ("allOf", "anyOf", "oneOf")
_ONE = ("not", "if", "then", "else")


def looked_at(schema: Any) -> frozenset[str] | None:
    """The entry properties ``schema`` judges an entry by, or None: the whole entry."""
    if isinstance(schema, bool):
        return frozenset()
    if not isinstance(schema, dict):
        return None
    names: set[str] = set()
    for key, value in schema.items():
        if key in _NOTES:
            continue
        if key == "type" and value == "object":
            continue  # every entry read is one
        if key == "properties" and isinstance(value, dict):
            names.update(value)
        elif key == "required" and isinstance(value, list):
            names.update(v for v in value if isinstance(v, str))
        elif key == "dependentRequired" and isinstance(value, dict):
            names.update(value)
            for needed in value.values():
                names.update(n for n in needed if isinstance(n, str))
        elif key == "dependentSchemas" and isinstance(value, dict):
            names.update(value)
            for sub in value.values():
                inner = looked_at(sub)
                if inner is None:
                    return None
                names.update(inner)
        elif key in _COMPOSED and isinstance(value, list):
            for sub in value:
                inner = looked_at(sub)
                if inner is None:
                    return None
                names.update(inner)
        elif key in _ONE:
            inner = looked_at(value)
            if inner is None:
                return None
            names.update(inner)
        else:
            return None
    return frozenset(names)


MISSING = object()


def frozen(value: Any) -> Any:
    kind = type(value)
    if kind is str or kind is bool:
        return value
    if kind is list:
        return ("L", *map(frozen, value))
    if kind is dict:
        return ("D", *sorted((k, frozen(v)) for k, v in value.items()))
    return ("?", repr(value))


Quick = Callable[[Any], bool]


def quick_check(schema: Any) -> Quick | None:
    """An exact verdict of ``schema`` for the few keywords policies are mostly made of
    (`properties`, `required`, `not`, `if`/`then`/`else`, `allOf`, `anyOf`, `contains`,
    `const`, `enum`, `pattern`, `minItems`, `maxItems`, `type` object), or None: then
    jsonschema judges. Only a yes is taken from it; a no is worded by jsonschema, which
    places the problem. A property test holds it to jsonschema's verdicts."""
    if schema is True or schema == {}:
        return lambda value: True
    if not isinstance(schema, dict):
        return None
    parts: list[Quick] = []
    for key, value in schema.items():
        part = _quick_keyword(key, value, schema)
        if part is None:
            return None
        parts.append(part)
    return lambda value: all(part(value) for part in parts)


def _quick_keyword(key: str, value: Any, schema: dict[str, Any]) -> Quick | None:
    if key in _NOTES or key in ("then", "else"):
        return lambda v: True  # notes; then/else are judged with their `if`
    if key == "type" and value == "object":
        return lambda v: type(v) is dict
    if key == "properties" and isinstance(value, dict):
        checks = {name: quick_check(sub) for name, sub in value.items()}
        if any(c is None for c in checks.values()):
            return None
        known = [(name, c) for name, c in checks.items() if c is not None]
        return lambda v: type(v) is not dict or all(c(v[n]) for n, c in known if n in v)
    if key == "required" and isinstance(value, list):
        names = tuple(value)
        return lambda v: type(v) is not dict or all(n in v for n in names)
    if key == "not":
        negated = quick_check(value)
        if negated is None:
            return None
        return lambda v: not negated(v)
    if key == "if":
        test, then, other = (quick_check(schema.get(k, True)) for k in ("if", "then", "else"))
        if test is None or then is None or other is None:
            return None
        return lambda v: then(v) if test(v) else other(v)
    if key in ("allOf", "anyOf") and isinstance(value, list):
        subs = [quick_check(sub) for sub in value]
        if any(c is None for c in subs):
            return None
        known_subs = [c for c in subs if c is not None]
        combine = all if key == "allOf" else any
        return lambda v: combine(c(v) for c in known_subs)
    if key == "contains":
        inner = quick_check(value)
        if inner is None or "minContains" in schema or "maxContains" in schema:
            return None
        return lambda v: type(v) is not list or any(inner(item) for item in v)
    if key == "const" and type(value) in (str, bool):
        return lambda v: type(v) is type(value) and v == value
    if key == "enum" and isinstance(value, list) and all(type(e) is str for e in value):
        allowed = frozenset(value)
        return lambda v: type(v) is str and v in allowed
    if key == "pattern" and isinstance(value, str):
        finds = re2_finds(value)
        return lambda v: type(v) is not str or finds(v)
    if key in ("minItems", "maxItems") and type(value) is int:
        if key == "minItems":
            return lambda v: type(v) is not list or len(v) >= value
        return lambda v: type(v) is not list or len(v) <= value
    return None
