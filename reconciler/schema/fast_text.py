"""What a quick schema check writes for a text: the conditions a string schema puts
on it, and whether its verdicts may be remembered (``fast_source`` writes the rest)."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any, TypeAlias

# Format checks by format name, as jsonschema's FormatChecker keeps them (its
# ``checkers``): the function, and the exceptions that mean "not in this format".
Formats: TypeAlias = Mapping[str, tuple[Callable[[Any], object], tuple[type[Exception], ...]]]
# What a check of a list's texts remembers as passed: short texts, a bounded number.
CACHED_LENGTH = 64
CACHED_TEXTS = 4096


def count(value: Any) -> bool:
    """A length or a number of items, as this check takes one (not a bool, not 2.0)."""
    return type(value) is int and value >= 0


def text_tests(
    schema: dict[str, Any], var: str, formats: Formats, value: Callable[[Any], str]
) -> list[str] | None:
    """Conditions on a text ``var`` that hold when it satisfies the string schema
    ``schema``, cheapest first (the verdict does not depend on the order: every one
    must hold); None when it has a keyword not known here. ``value`` gives the name
    the code reads a value by (a compiled pattern, a format's function)."""
    least = schema.get("minLength", 0)
    most = schema.get("maxLength")
    if not count(least) or not (most is None or count(most)):
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
        tests.append(f"{var} in {value(tuple(allowed))}")
    if "pattern" in schema:
        try:
            # jsonschema applies `pattern` with re.search; so does this check.
            search = re.compile(schema["pattern"]).search
        except (re.error, TypeError):
            return None
        tests.append(f"{value(search)}({var})")  # a match is true, None false
    # The format's own function, as FormatChecker.check calls it (a false result or
    # one of its exceptions means "not in this format"). A format not in
    # ``formats`` is left to jsonschema, which may know it.
    name = schema.get("format")
    if name is not None:
        if not isinstance(name, str) or name not in formats:
            return None
        form, raises = formats[name]
        tests.append(f"{value(_passes(form, raises) if raises else form)}({var})")
    return tests


def remembered(schema: dict[str, Any]) -> bool:
    """Whether a string check's verdicts are worth remembering, and may be: it calls a
    pattern or looks in a list of values (a length alone is cheaper to measure again),
    and has no format. A format's function may judge more than the text: e-mail's
    refuses a subclass of str, which a set takes for the equal text it remembers."""
    return ("pattern" in schema or "enum" in schema) and "format" not in schema


def _passes(
    form: Callable[[Any], object], raises: tuple[type[Exception], ...]
) -> Callable[[Any], bool]:
    """``form`` as a yes or no, its ``raises`` a no."""

    def passes(value: Any) -> bool:
        try:
            return bool(form(value))
        except raises:
            return False

    return passes
