"""Policies' patterns on RE2 (google-re2): in time linear in the text, whatever a pull
request writes; a pattern RE2 cannot run is refused with why."""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from typing import Any


def re2_refusal(pattern: str) -> str | None:
    import re2

    try:
        re2.compile(pattern, _re2_options())
    except re2.error as error:
        reason = error.args[0] if error.args else error
        text = reason.decode("utf-8", "replace") if isinstance(reason, bytes) else str(reason)
        return (
            f"`pattern` cannot be run in linear time ({text}): policies' patterns run on "
            "RE2, which has no look-around and no back-references"
        )
    return None


@cache
def _re2_options() -> Any:
    import re2

    options = re2.Options()
    options.log_errors = False  # else RE2 writes its own line on stderr
    return options


@cache
def re2_compiled(pattern: str) -> Any:
    import re2

    return re2.compile(pattern, _re2_options())


@cache
def re2_finds(pattern: str) -> Callable[[str], bool]:
    """Whether ``pattern`` matches somewhere in a text, as ``re2_compiled(pattern).search``
    says, without a match object: google-re2's search works out every group's place in
    characters, 25,000 instructions a call; an RE2 set of the one pattern answers yes or
    no in a third of that (60,000 texts a run under the benchmark's policies)."""
    import re2

    found = re2.Set.SearchSet(_re2_options())
    try:
        found.Add(pattern)
        found.Compile()
    except re2.error:  # not expected of a pattern re2.compile takes: ask search then
        search = re2_compiled(pattern).search
        return lambda text: search(text) is not None
    match = found.Match
    return lambda text: bool(match(text))


def re2_keywords() -> dict[str, Any]:
    """jsonschema's keywords that match patterns, on RE2: `pattern`, `patternProperties`
    and `additionalProperties` (which asks `patternProperties`' patterns too). Left to
    jsonschema, the last two run a policy's patterns on `re`: `^(.*)*(.*)*X$` over a field
    name took a minute, for every invite."""
    from jsonschema import ValidationError

    def pattern(validator: Any, value: str, instance: Any, schema: Any) -> Any:
        if validator.is_type(instance, "string") and not re2_finds(value)(instance):
            yield ValidationError(f"{instance!r} does not match {value!r}")

    def pattern_properties(
        validator: Any, value: dict[str, Any], instance: Any, schema: Any
    ) -> Any:
        if not validator.is_type(instance, "object"):
            return
        for each, subschema in value.items():
            compiled = re2_compiled(each)
            for name, item in instance.items():
                if compiled.search(name):
                    yield from validator.descend(item, subschema, path=name, schema_path=each)

    def additional_properties(validator: Any, value: Any, instance: Any, schema: Any) -> Any:
        if not validator.is_type(instance, "object"):
            return
        named = schema.get("properties", {})
        patterns = [re2_compiled(each) for each in schema.get("patternProperties", {})]
        extras = [
            name
            for name in instance
            if name not in named and not any(p.search(name) for p in patterns)
        ]
        if validator.is_type(value, "object"):
            for name in extras:
                yield from validator.descend(instance[name], value, path=name)
        elif not value and extras:
            shown = ", ".join(repr(name) for name in sorted(extras))
            yield ValidationError(f"additional properties are not allowed ({shown})")

    return {
        "pattern": pattern,
        "patternProperties": pattern_properties,
        "additionalProperties": additional_properties,
    }
