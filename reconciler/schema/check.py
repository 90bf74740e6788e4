"""JSON Schema validation whose errors point at the file, line and field."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any, NamedTuple

from jsonschema import Draft202012Validator, FormatChecker

from reconciler.errors import FileProblem, ReconcilerError
from reconciler.resources import invite_schema_path
from reconciler.safetext import escape
from reconciler.schema.fast import compile_check
from reconciler.schema.messages import Where, describe
from reconciler.yamlload.positions import START, Lines, Located
from reconciler.yamlload.source import MarkedDict

# No whitespace or control characters: an address is shown in plans and sent on.
_EMAIL = re.compile(
    r"[^@\s\x00-\x1f\x7f-\x9f]+@[^@\s\x00-\x1f\x7f-\x9f]+\.[^@\s.\x00-\x1f\x7f-\x9f]+"
)
FORMAT_CHECKER = FormatChecker()


@FORMAT_CHECKER.checks("email")
def _is_email(value: object) -> bool:
    # jsonschema's own check only looks for an "@". fullmatch: a `$` would
    # let a final newline through.
    return not isinstance(value, str) or bool(_EMAIL.fullmatch(value))


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


def validate(validator: Draft202012Validator, where: Where) -> list[FileProblem]:
    """Every violation of ``validator``'s schema in ``where.document``, each placed."""
    problems: list[FileProblem] = []
    for error in validator.iter_errors(where.document.value):
        problems.extend(describe(error, where))
    return list(dict.fromkeys(problems))  # one error may word what another already said


def validate_document(document: Any, source: str, schema_path: Path) -> list[FileProblem]:
    """Every schema violation in ``document`` (as ``load_yaml`` gives it), each placed."""
    if isinstance(document, MarkedDict):
        located = document.located
    else:  # a value without positions: every problem is placed at the start
        located = Located(document, None, START, Lines(""))
    return validate(_validator_for(schema_path), Where(located, source))


class InviteSchema(NamedTuple):
    """The invite file schema, split for checking each entry as it is read."""

    entry: Draft202012Validator  # one entry of `invites`
    file: Draft202012Validator  # the file around its entries
    entry_is_valid: Callable[[Any], bool]  # quick yes; False means "ask `entry`"


# Keywords that judge a list's items, or several of them together. On the
# `invites` list itself (its `items` aside) they would need every entry of a
# file kept, and entries are checked one at a time as they are read, then dropped.
_ITEM_RULES = frozenset(
    {
        "items",
        "prefixItems",
        "additionalItems",
        "unevaluatedItems",
        "contains",
        "minContains",
        "maxContains",
        "uniqueItems",
    }
)


def _item_rules(schema: Any) -> set[str]:
    """The ``_ITEM_RULES`` keywords anywhere in ``schema``."""
    if isinstance(schema, list):
        return set().union(*map(_item_rules, schema))
    if not isinstance(schema, dict):
        return set()
    found = {key for key in schema if key in _ITEM_RULES}
    return found.union(*map(_item_rules, schema.values()))


def _refuse_item_rules(around: dict[str, Any], path: Path) -> None:
    """Refuse a schema whose `invites` list would be judged on entries it no longer has."""
    found = sorted(_item_rules(around))
    if found:
        rules = ("the rule " if len(found) == 1 else "the rules ") + ", ".join(
            f"`{name}`" for name in found
        )
        raise ReconcilerError(
            f"{escape(str(path))}: the `invites` list has {rules}, which would need a file's "
            "entries all at once, but entries are checked one at a time as they are read; "
            "on the list itself only `minItems` and `maxItems` can be used"
        )


@cache
def invite_validators() -> InviteSchema:
    path = invite_schema_path()
    whole = _validator_for(path)
    properties = whole.schema["properties"]
    entries = properties["invites"]
    # The file-level check sees the list, not its entries (``_as_written`` in desired.state).
    around = {k: v for k, v in entries.items() if k != "items"}
    _refuse_item_rules(around, path)
    file_schema = {**whole.schema, "properties": {**properties, "invites": around}}
    return InviteSchema(
        entry=whole.evolve(schema=entries["items"]),
        file=whole.evolve(schema=file_schema),
        entry_is_valid=compile_check(entries["items"], FORMAT_CHECKER),
    )
