"""JSON Schema validation whose errors point at the file, line and field."""

from __future__ import annotations

import difflib
import json
import re
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
from jsonschema import Draft202012Validator, FormatChecker

from reconciler.errors import SourceError
from reconciler.resources import invite_schema_path
from reconciler.yaml_source import MarkedDict, locate, locate_key, raw_text

_EMAIL = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s.]+$")
FORMAT_CHECKER = FormatChecker()


@FORMAT_CHECKER.checks("email")
def _is_email(value: object) -> bool:
    # jsonschema's own check only looks for an "@".
    return not isinstance(value, str) or bool(_EMAIL.match(value))


@cache
def load_schema(path: Path) -> dict[str, Any]:
    schema: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return schema


def invite_schema() -> dict[str, Any]:
    return load_schema(invite_schema_path())


@cache
def _validator_for(path: Path) -> Draft202012Validator:
    # Local references are inlined once here: resolving them cost jsonschema
    # more than the rest of the validation of an invite.
    return Draft202012Validator(_inline_refs(load_schema(path)), format_checker=FORMAT_CHECKER)


def _inline_refs(schema: dict[str, Any]) -> dict[str, Any]:
    definitions = schema.get("$defs", {})

    def inline(node: Any) -> Any:
        if isinstance(node, list):
            return [inline(item) for item in node]
        if not isinstance(node, dict):
            return node
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/$defs/") and "/" not in ref[8:]:
            siblings = {k: v for k, v in node.items() if k != "$ref"}
            return inline({**definitions[ref[8:]], **siblings})
        return {k: inline(v) for k, v in node.items()}

    return inline(schema)


def validate_document(document: Any, source: str, schema_path: Path) -> list[SourceError]:
    """Every schema violation in ``document``, each with its position."""
    validator = _validator_for(schema_path)
    problems = []
    for error in validator.iter_errors(document):
        problems.extend(_describe(error, document, source))
    return problems


def _field_name(path: tuple[Any, ...]) -> str:
    parts = [p for p in path if isinstance(p, str)]
    return parts[-1] if parts else "document"


def _yaml_type(value: Any) -> str:
    for kind, name in (
        (bool, "a boolean"),
        (int, "a number"),
        (float, "a number"),
        (str, "text"),
        (dict, "a mapping"),
        (list, "a list"),
    ):
        if isinstance(value, kind):
            return name
    return "a date" if hasattr(value, "year") else f"a {type(value).__name__}"


def _place(path: tuple[Any, ...]) -> str:
    """How a message names the value at ``path``."""
    if path and isinstance(path[-1], int):
        parent = _field_name(path[:-1])
        return "each invite entry" if parent == "invites" else f"each item of `{parent}`"
    return f"`{_field_name(path)}`" if path else "the file"


def _describe(error: jsonschema.ValidationError, document: Any, source: str) -> list[SourceError]:
    path = tuple(error.absolute_path)
    line, column = locate(document, path)
    field = _field_name(path)
    validator = error.validator
    if validator == "additionalProperties" and isinstance(error.instance, dict):
        allowed = sorted(error.schema.get("properties", {}))
        extra = [k for k in error.instance if k not in allowed]
        out = []
        for key in extra:
            mark = (
                error.instance.key_marks.get(key)
                if isinstance(error.instance, MarkedDict)
                else None
            )
            hint = difflib.get_close_matches(str(key), allowed, n=1)
            advice = f"did you mean `{hint[0]}`?" if hint else f"allowed: {', '.join(allowed)}"
            out.append(
                SourceError(
                    source,
                    mark.line if mark else line,
                    mark.column if mark else column,
                    f"unknown field `{key}`; {advice}",
                )
            )
        return out
    if validator == "required":
        line, column = locate_key(document, path)
        missing = re.findall(r"'([^']+)' is a required property", error.message)
        what = (
            "invite" if path and isinstance(path[-1], int) else (f"`{field}`" if path else "file")
        )
        return [
            SourceError(source, line, column, f"{what} is missing required field `{name}`")
            for name in missing
        ]
    if validator == "type":
        expected = error.validator_value
        raw = raw_text(document, path)
        place = _place(path)
        if error.instance is None and path == ("invites",):
            message = "`invites` is empty; list invites under it, or write `invites: []`"
        elif error.instance is None:
            message = f"{place} is empty; give it a value or remove it"
        elif expected == "string" and raw is not None:
            message = (
                f"{place} must be text, but YAML reads {raw} as {_yaml_type(error.instance)} "
                f'({error.instance!r}); put it in quotes: "{raw}"'
            )
        else:
            message = f"{place} must be {_a(expected)}, not {_yaml_type(error.instance)}"
            if place == "each invite entry":
                message += " (start each entry with `- id: ...`)"
        return [SourceError(source, line, column, message)]
    if validator == "format" and error.validator_value == "email":
        message = f"`{field}`: {error.instance!r} is not a valid email address"
    elif validator == "pattern" and field in ("phone",):
        message = f'`{field}`: {error.instance!r} is not E.164 text such as "+442079460000"'
    elif validator == "pattern" and field == "id":
        message = (
            f"`id`: {error.instance!r} is not a valid inviteId "
            "(1 to 128 letters, digits, `_`, `-`, `.`, and not dots alone)"
        )
    elif validator == "uniqueItems":
        message = f"`{field}` lists the same item twice; it is a set"
    elif validator in ("minLength", "maxLength"):
        message = f"`{field}` must be {error.validator_value} characters at {_bound(validator)}"
    else:
        message = f"`{field}`: {error.message}"
    return [SourceError(source, line, column, message)]


def _a(expected: Any) -> str:
    names = {"string": "text", "array": "a list", "object": "a mapping", "boolean": "true or false"}
    if isinstance(expected, list):
        return " or ".join(names.get(e, str(e)) for e in expected)
    return names.get(expected, str(expected))


def _bound(validator: str) -> str:
    return "least" if validator == "minLength" else "most"
