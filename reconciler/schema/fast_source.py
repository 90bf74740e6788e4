"""The Python source of a quick schema check, written from a JSON Schema.

``fast.compile_check`` compiles what ``CheckSource`` writes: statements about one
value that ``return False`` where it fails a keyword known here, and None where a
schema holds one that is not (no value passes: jsonschema decides). Every literal
is written through ``repr()`` after its type is checked; every other value (a
compiled pattern, a set of names, a format's function) is handed to the code in
``namespace`` under a name made up here.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any, TypeAlias

from reconciler.schema.fast_text import (
    CACHED_LENGTH,
    CACHED_TEXTS,
    Formats,
    count,
    remembered,
    text_tests,
)

Check = Callable[[Any], bool]

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


# Objects and arrays nested deeper than this in one function are checked by a function
# of their own: Python refuses more than 20 nested loops in one function.
_INLINED_DEPTH = 8

Lines: TypeAlias = list[str]


def _indent(lines: Lines) -> Lines:
    return ["    " + line for line in lines]


class CheckSource:
    """The source of one schema's check: its functions, and the values they name.

    Each schema compiles to statements about one variable that ``return False``
    where a value fails; None stands for a schema not known here (no value passes).
    """

    def __init__(self, formats: Formats) -> None:
        self.formats = formats
        self.lines: Lines = []
        self.namespace: dict[str, Any] = {}
        self._made = 0

    def _name(self, prefix: str) -> str:
        self._made += 1
        return f"_{prefix}{self._made}"

    def _value(self, value: Any) -> str:
        """A name the code reads ``value`` by (never the value's own text)."""
        name = self._name("k")
        self.namespace[name] = value
        return name

    def function(self, schema: Any) -> str | None:
        """The name of a function that checks ``schema``, or None when no value passes."""
        param = self._name("v")
        body = self._statements(schema, param, 0)
        if body is None:
            return None
        name = self._name("check")
        self.lines += [f"def {name}({param}):", *_indent(body), "    return True", ""]
        return name

    def _statements(self, schema: Any, var: str, depth: int) -> Lines | None:
        kind = _kind(schema)
        if kind is None:
            return None
        if kind == "anyOf":
            # Valid when any branch is: one branch's sure yes is a sure yes.
            branches = [name for name in map(self.function, schema["anyOf"]) if name is not None]
            if not branches:
                return None
            calls = " or ".join(f"{name}({var})" for name in branches)
            return [f"if not ({calls}):", "    return False"]
        if kind in ("object", "array") and depth >= _INLINED_DEPTH:
            name = self.function(schema)
            return None if name is None else [f"if not {name}({var}):", "    return False"]
        if kind == "object":
            return self._object(schema, var, depth)
        if kind == "array":
            return self._array(schema, var, depth)
        if kind == "string":
            tests = text_tests(schema, var, self.formats, self._value)
            if tests is None:
                return None
            holds = " and ".join([f"isinstance({var}, str)", *tests])
            return [f"if not ({holds}):", "    return False"]
        return [f"if not isinstance({var}, bool):", "    return False"]

    def _object(self, schema: dict[str, Any], var: str, depth: int) -> Lines | None:
        properties = schema.get("properties", {})
        additional = schema.get("additionalProperties", True)
        required = schema.get("required", [])
        if (
            not isinstance(properties, dict)
            or not all(isinstance(name, str) for name in properties)
            or not isinstance(additional, bool)
            or not isinstance(required, list)
            or not all(isinstance(name, str) for name in required)
        ):
            return None
        patterns = schema.get("patternProperties", {})
        if not isinstance(patterns, dict) or any(
            sub not in ({}, True) for sub in patterns.values()
        ):
            return None  # only a pattern whose keys take any value (`x-` templates) is known here
        try:
            # jsonschema applies a patternProperties key with re.search; so does this check.
            free = [re.compile(pattern).search for pattern in patterns]
        except (re.error, TypeError):
            return None
        lines = [f"if not isinstance({var}, dict):", "    return False"]
        if not additional:
            # Keys all named (almost always) are known in one set operation, in C.
            allowed = self._value(frozenset(properties))
            test = f"not {allowed}.issuperset({var})"
            if free:
                known = self._value(_known(frozenset(properties), free))
                test += f" and not all(map({known}, {var}))"
            lines += [f"if {test}:", "    return False"]
        for name in dict.fromkeys(required):
            lines += [f"if {name!r} not in {var}:", "    return False"]
        for name, sub in properties.items():
            item = self._name("v")
            body = self._statements(sub, item, depth + 1)
            if body is None:
                lines += [f"if {name!r} in {var}:", "    return False"]
            elif name in required:  # known to be there
                lines += [f"{item} = {var}[{name!r}]", *body]
            else:
                lines += [f"if {name!r} in {var}:", f"    {item} = {var}[{name!r}]", *_indent(body)]
        return lines

    def _array(self, schema: dict[str, Any], var: str, depth: int) -> Lines | None:
        unique = schema.get("uniqueItems", False)
        least = schema.get("minItems", 0)
        most = schema.get("maxItems")
        if not isinstance(unique, bool) or not count(least) or not (most is None or count(most)):
            return None
        lines = [f"if not isinstance({var}, list):", "    return False"]
        if least:
            lines += [f"if len({var}) < {least!r}:", "    return False"]
        if most is not None:
            lines += [f"if len({var}) > {most!r}:", "    return False"]
        items: Any = schema.get("items")
        texts = "items" in schema and _kind(items) == "string"  # known text after the loop
        body = self._remembered_texts(items, var) if texts and remembered(items) else None
        if body is not None:
            lines += body
        elif "items" in schema:
            item = self._name("v")
            body = self._statements(items, item, depth + 1)
            if body is None:  # no item passes: only the empty list
                lines += [f"if len({var}):", "    return False"]
            else:
                lines += [f"for {item} in {var}:", *_indent(body)]
        if unique:
            # Distinct under Python's equality means distinct under jsonschema's (which
            # tells 1 from True: a doubt here, not a yes). Items that cannot be hashed
            # (lists, mappings) are a doubt too. Two or three texts (most sets) are
            # compared in place, without building a set.
            if texts:
                first, second, third = self._name("v"), self._name("v"), self._name("v")
                lines += [
                    f"if len({var}) == 2:",
                    f"    {first}, {second} = {var}",
                    f"    if {first} == {second}:",
                    "        return False",
                    f"elif len({var}) == 3:",
                    f"    {first}, {second}, {third} = {var}",
                    f"    if {first} == {second} or {first} == {third} or {second} == {third}:",
                    "        return False",
                    f"elif len({var}) > 3:",
                ]
            else:
                lines += [f"if len({var}) > 1:"]
            lines += [
                "    try:",
                f"        if len(set({var})) != len({var}):",
                "            return False",
                "    except TypeError:",
                "        return False",
            ]
        return lines

    def _remembered_texts(self, items: dict[str, Any], var: str) -> Lines | None:
        """The items of the list ``var``, texts checked by ``items``, whose verdicts are
        remembered: a list whose every item this very check has passed before passes
        at one set operation in C.

        A list's items (groups, add-ons, document types) come from a small vocabulary
        and repeat across thousands of invites; a single field's text (an id, a name,
        an address, a phone) is mostly its invite's own, and looking it up would cost
        its hash and a probe for nothing, so only items are remembered. The verdict
        depends on the text alone (``remembered``): an equal text, the same verdict.
        Bounded, and per check: a text good for one field is never taken as good for
        another.
        """
        item = self._name("v")
        tests = text_tests(items, item, self.formats, self._value)
        if tests is None:
            return None
        passed = self._value(set())
        every = self._name("v")
        return [
            "try:",
            f"    {every} = {passed}.issuperset({var})",
            "except TypeError:  # an item that cannot be hashed is no text",
            "    return False",
            f"if not {every}:",
            f"    for {item} in {var}:",
            f"        if not isinstance({item}, str):",
            "            return False",
            f"        if {item} not in {passed}:",
            f"            if not ({' and '.join(tests)}):",
            "                return False",
            f"            if len({passed}) < {CACHED_TEXTS} and len({item}) <= {CACHED_LENGTH}:",
            f"                {passed}.add({item})",
        ]


def _kind(schema: Any) -> str | None:
    """The kind of value ``schema`` is about ("anyOf" for a choice of schemas), or None
    when it is not a mapping or has a keyword not known for its kind."""
    if not isinstance(schema, dict):
        return None
    if set(schema) - _NOTES == {"anyOf"} and isinstance(schema["anyOf"], list):
        return "anyOf"
    kind = schema.get("type")
    known = _KEYWORDS.get(kind) if isinstance(kind, str) else None
    if known is None or not set(schema) - _NOTES <= known:
        return None
    return kind


def _known(named: frozenset[str], free: Sequence[Callable[[str], object]]) -> Check:
    """Whether a key of an object is ``named`` or matches a free pattern."""

    def known(key: Any) -> bool:
        return key in named or (isinstance(key, str) and any(match(key) for match in free))

    return known
