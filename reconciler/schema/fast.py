"""A quick yes for values the schema accepts, compiled once from the schema itself.

jsonschema walks its keywords generically: about 50 µs per invite, a second
for 20,000 invites. Almost every invite in a file is valid, so the loader
first asks a check compiled here from the same JSON Schema. It answers True
only when the value satisfies every keyword of the schema; anything it does
not understand, or any doubt, answers False, and jsonschema then decides and
words the errors. So this check can make loading faster, never more lenient:
a property test holds it to "True implies jsonschema finds no error".

The check is Python source written from the schema and compiled once, as
fastjsonschema does: one function for a whole invite with its fields' checks
inline, so a value costs no Python call of its own (a closure per keyword and a
call per value cost about 1.4 times the instructions). This is done only for the
schema packaged with this tool (``schema.check``), never for a schema a user
passes at run time, and even so no text of the schema becomes code: every
literal written (a property's name, a length) is written through ``repr()``
after its type is checked, and every other value (a compiled pattern, a set of
names, a format's function) is handed to the code under a name made up here.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
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


# What a check of a list's texts remembers as passed: short texts, a bounded number.
_CACHED_LENGTH = 64
_CACHED_TEXTS = 4096
# Objects and arrays nested deeper than this in one function are checked by a function
# of their own: Python refuses more than 20 nested loops in one function.
_INLINED_DEPTH = 8

Lines: TypeAlias = list[str]


def _never(value: Any) -> bool:
    return False


def compile_check(schema: Any, formats: Formats) -> Check:
    """A check of ``schema`` (references already inlined), conservative as described above.

    Only for a schema this tool ships: the check is Python source written from it."""
    source = _Source(formats)
    name = source.function(schema)
    if name is None:
        return _never
    text = "\n".join(source.lines) + "\n"
    exec(compile(text, "<quick schema check>", "exec"), source.namespace)
    check: Check = source.namespace[name]
    return check


def _indent(lines: Lines) -> Lines:
    return ["    " + line for line in lines]


def _count(value: Any) -> bool:
    """A length or a number of items, as this check takes one (not a bool, not 2.0)."""
    return type(value) is int and value >= 0


class _Source:
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
            tests = self._text_tests(schema, var)
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
        if not isinstance(unique, bool) or not _count(least) or not (most is None or _count(most)):
            return None
        lines = [f"if not isinstance({var}, list):", "    return False"]
        if least:
            lines += [f"if len({var}) < {least!r}:", "    return False"]
        if most is not None:
            lines += [f"if len({var}) > {most!r}:", "    return False"]
        items: Any = schema.get("items")
        texts = "items" in schema and _kind(items) == "string"  # known text after the loop
        body = self._remembered_texts(items, var) if texts and _remembered(items) else None
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
        depends on the text alone (``_remembered``): an equal text, the same verdict.
        Bounded, and per check: a text good for one field is never taken as good for
        another.
        """
        item = self._name("v")
        tests = self._text_tests(items, item)
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
            f"            if len({passed}) < {_CACHED_TEXTS} and len({item}) <= {_CACHED_LENGTH}:",
            f"                {passed}.add({item})",
        ]

    def _text_tests(self, schema: dict[str, Any], var: str) -> list[str] | None:
        """Conditions on a text ``var`` that hold when it satisfies the string schema
        ``schema``, cheapest first (the verdict does not depend on the order: every one
        must hold); None when it has a keyword not known here."""
        least = schema.get("minLength", 0)
        most = schema.get("maxLength")
        if not _count(least) or not (most is None or _count(most)):
            return None
        tests = []
        if least and most is not None:
            tests.append(f"{least!r} <= len({var}) <= {most!r}")
        elif least:
            tests.append(f"len({var}) >= {least!r}")
        elif most is not None:
            tests.append(f"len({var}) <= {most!r}")
        allowed = schema.get("enum")
        if allowed is not None:
            if not (isinstance(allowed, list) and all(type(a) is str for a in allowed)):
                return None
            tests.append(f"{var} in {self._value(tuple(allowed))}")
        if "pattern" in schema:
            try:
                # jsonschema applies `pattern` with re.search; so does this check.
                search = re.compile(schema["pattern"]).search
            except (re.error, TypeError):
                return None
            tests.append(f"{self._value(search)}({var})")  # a match is true, None false
        # The format's own function, as FormatChecker.check calls it (a false result or
        # one of its exceptions means "not in this format"). A format not in
        # ``formats`` is left to jsonschema, which may know it.
        name = schema.get("format")
        if name is not None:
            if not isinstance(name, str) or name not in self.formats:
                return None
            form, raises = self.formats[name]
            tests.append(f"{self._value(_passes(form, raises) if raises else form)}({var})")
        return tests


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


def _remembered(schema: dict[str, Any]) -> bool:
    """Whether a string check's verdicts are worth remembering, and may be: it calls a
    pattern or looks in a list of values (a length alone is cheaper to measure again),
    and has no format. A format's function may judge more than the text: e-mail's
    refuses a subclass of str, which a set takes for the equal text it remembers."""
    return ("pattern" in schema or "enum" in schema) and "format" not in schema


def _known(named: frozenset[str], free: Sequence[Callable[[str], object]]) -> Check:
    """Whether a key of an object is ``named`` or matches a free pattern."""

    def known(key: Any) -> bool:
        return key in named or (isinstance(key, str) and any(match(key) for match in free))

    return known


def _passes(form: Callable[[Any], object], raises: tuple[type[Exception], ...]) -> Check:
    """``form`` as a yes or no, its ``raises`` a no."""

    def passes(value: Any) -> bool:
        try:
            return bool(form(value))
        except raises:
            return False

    return passes
