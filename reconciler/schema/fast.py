"""A quick yes for values the schema accepts, compiled once from the schema itself.

jsonschema walks its keywords generically: about 50 µs per invite, a second
for 20,000 invites. Almost every invite in a file is valid, so the loader
first asks a check compiled here from the same JSON Schema. It answers True
only when the value satisfies every keyword of the schema; anything it does
not understand, or any doubt, answers False, and jsonschema then decides and
words the errors. So this check can make loading faster, never more lenient:
a property test holds it to "True implies jsonschema finds no error".
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any, TypeAlias

Check = Callable[[Any], bool]
# Format checks by format name, as jsonschema's FormatChecker keeps them (its
# ``checkers``): the function, and the exceptions that mean "not in this format".
Formats: TypeAlias = Mapping[str, tuple[Callable[[Any], object], tuple[type[Exception], ...]]]

# Keywords that never make a value invalid ($defs only holds what a $ref names, and the
# references are inlined: one left is a keyword not known here, so a doubt).
_NOTES = frozenset(
    {"description", "title", "default", "examples", "$comment", "$schema", "$id", "$defs"}
)
_KEYWORDS = {
    "object": frozenset(
        {"type", "properties", "required", "additionalProperties", "patternProperties"}
    ),
    "array": frozenset({"type", "items", "uniqueItems", "minItems", "maxItems"}),
    "string": frozenset({"type", "pattern", "format", "minLength", "maxLength", "enum"}),
    "boolean": frozenset({"type"}),
}


# What the string checks remember as passed: short texts, a bounded number of them.
_CACHED_LENGTH = 64
_CACHED_TEXTS = 4096


def _never(value: Any) -> bool:
    return False


def compile_check(schema: Any, formats: Formats) -> Check:
    """A check of ``schema`` (references already inlined), conservative as described above."""
    if not isinstance(schema, dict):
        return _never
    if set(schema) - _NOTES == {"anyOf"} and isinstance(schema["anyOf"], list):
        # Valid when any branch is: one branch's sure yes is a sure yes.
        branches = [compile_check(branch, formats) for branch in schema["anyOf"]]
        return lambda value: any(branch(value) for branch in branches)
    kind = schema.get("type")
    known = _KEYWORDS.get(kind) if isinstance(kind, str) else None
    if known is None or not set(schema) - _NOTES <= known:
        return _never
    if kind == "object":
        return _object_check(schema, formats)
    if kind == "array":
        return _array_check(schema, formats)
    if kind == "string":
        return _string_check(schema, formats)
    return lambda value: isinstance(value, bool)


def _object_check(schema: dict[str, Any], formats: Formats) -> Check:
    properties = schema.get("properties", {})
    additional = schema.get("additionalProperties", True)
    if not isinstance(properties, dict) or not isinstance(additional, bool):
        return _never
    patterns = schema.get("patternProperties", {})
    if not isinstance(patterns, dict) or any(sub not in ({}, True) for sub in patterns.values()):
        return _never  # only a pattern whose keys take any value (`x-` templates) is known here
    # jsonschema applies a patternProperties key with re.search; so does this check.
    free = [re.compile(pattern).search for pattern in patterns]
    checks = {name: compile_check(sub, formats) for name, sub in properties.items()}
    required = tuple(schema.get("required", ()))
    closed = not additional
    allowed = frozenset(checks)

    def known(key: Any) -> bool:
        return key in allowed or (isinstance(key, str) and any(match(key) for match in free))

    def check(value: Any) -> bool:
        if not isinstance(value, dict):
            return False
        # Keys all named (almost always) are known in one set operation, in C.
        if closed and not allowed.issuperset(value) and not (free and all(map(known, value))):
            return False
        for name in required:
            if name not in value:
                return False
        for name, item in value.items():
            item_check = checks.get(name)
            if item_check is not None and not item_check(item):
                return False
        return True

    return check


def _array_check(schema: dict[str, Any], formats: Formats) -> Check:
    items = compile_check(schema["items"], formats) if "items" in schema else None
    unique = schema.get("uniqueItems", False) is True
    least = schema.get("minItems", 0)
    most = schema.get("maxItems")

    def check(value: Any) -> bool:
        if not isinstance(value, list) or len(value) < least:
            return False
        if most is not None and len(value) > most:
            return False
        if items is not None and not all(map(items, value)):
            return False
        if unique:
            try:
                # Distinct under Python's equality means distinct under jsonschema's.
                return len(set(value)) == len(value)
            except TypeError:
                return False
        return True

    return check


def _string_check(schema: dict[str, Any], formats: Formats) -> Check:
    least = schema.get("minLength", 0)
    most = schema.get("maxLength")
    # jsonschema applies `pattern` with re.search; so does this check.
    search = re.compile(schema["pattern"]).search if "pattern" in schema else None
    allowed = schema.get("enum")
    if allowed is not None and not (
        isinstance(allowed, list) and all(type(a) is str for a in allowed)
    ):
        return _never
    # The format's own function, as FormatChecker.check calls it. A format not in
    # ``formats`` is left to jsonschema, which may know it.
    name = schema.get("format")
    form, raises = formats.get(name, (None, ())) if isinstance(name, str) else (None, ())
    if name is not None and form is None:
        return _never

    # The verdict depends on the text alone: a text this very check has passed
    # passes again at one set lookup. Groups, attachments and contact names repeat
    # across thousands of invites. Bounded, and per check: a text good for one
    # field is never taken as good for another.
    passed: set[str] = set()

    def check(value: Any) -> bool:
        if not isinstance(value, str):
            return False
        if value in passed:
            return True
        if len(value) < least:
            return False
        if most is not None and len(value) > most:
            return False
        if search is not None and search(value) is None:
            return False
        if allowed is not None and value not in allowed:
            return False
        if form is not None:
            try:
                if not form(value):
                    return False
            except raises:
                return False
        if len(value) <= _CACHED_LENGTH and len(passed) < _CACHED_TEXTS:
            passed.add(value)
        return True

    return check
