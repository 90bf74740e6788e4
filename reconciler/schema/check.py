"""JSON Schema validation whose errors point at the file, line and field.

An invite entry is first asked of fastjsonschema, compiled once from the packaged schema:
its yes is the answer for almost every entry (jsonschema's generic walk costs 4-7 s CPU
for 20,000 invites, fastjsonschema 0.2-0.35 s). A no is asked again of jsonschema, which
decides and words the problems; jsonschema (70 ms of imports) is imported only then.
"""

from __future__ import annotations

import json
import re
import warnings
from collections.abc import Callable, Iterator
from functools import cache, cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from reconciler.errors import FileProblem, ReconcilerError
from reconciler.files import invite_schema_path
from reconciler.safetext import escape
from reconciler.schema.messages import Where, describe, is_email
from reconciler.yamlload.source import MarkedDict

if TYPE_CHECKING:
    from jsonschema import Draft202012Validator, FormatChecker

# The formats this tool checks its own way, over jsonschema's.
FORMATS: dict[str, Callable[[Any], bool]] = {"email": is_email}


@cache
def format_checker() -> FormatChecker:
    """jsonschema's format checks, with ``FORMATS`` in place of its own: the one place
    formats are checked (invites, reconciler.yaml and the meta-schema of its policies,
    policies' own `format`s, and through ``conforms`` fastjsonschema's).

    A check that raises anything says the value is not in its format, never a traceback
    (jsonschema's `regex` runs `re.compile` on the value, which raises OverflowError for
    `a{99999999999}` where it declares only re.error); and what jsonschema's checks warn
    (`re`'s FutureWarning for `[[`: Python's words about the user's text, naming its own
    source line) never reaches stderr.
    """
    from jsonschema import FormatChecker

    functions = {name: _quiet(f) for name, (f, _) in FormatChecker().checkers.items()}
    functions.update(FORMATS)
    checker = FormatChecker(formats=())
    for name, function in functions.items():
        checker.checks(name, raises=Exception)(function)
    return checker


def _quiet(function: Callable[[Any], object]) -> Callable[[Any], object]:
    def check(value: Any) -> object:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return function(value)

    return check


def conforms(name: str) -> Callable[[Any], bool]:
    """The check of format ``name`` that ``format_checker`` makes (jsonschema imported only
    for a format this tool does not check its own way)."""
    if name in FORMATS:
        return FORMATS[name]
    return lambda value: format_checker().conforms(value, name)


@cache
def load_schema(path: Path) -> dict[str, Any]:
    schema: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return schema


def invite_schema() -> dict[str, Any]:
    return load_schema(invite_schema_path())


@cache
def _inlined(path: Path) -> dict[str, Any]:
    # Local references are inlined once, their siblings merged in: the entry's schema then
    # stands alone, and fastjsonschema (draft 7, where a `$ref`'s siblings are ignored)
    # sees the `maxLength` written beside `"$ref": "#/$defs/line"`.
    return _inline_refs(load_schema(path))


@cache
def _validator_for(path: Path) -> Draft202012Validator:
    from jsonschema import Draft202012Validator

    return Draft202012Validator(_inlined(path), format_checker=format_checker())


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

    inlined: dict[str, Any] = inline(schema)
    return inlined


def validate(validator: Draft202012Validator, where: Where) -> list[FileProblem]:
    """Every violation of ``validator``'s schema in ``where.document``, each placed."""
    problems: list[FileProblem] = []
    for error in validator.iter_errors(where.document.value):
        problems.extend(describe(error, where))
    return list(dict.fromkeys(problems))  # one error may word what another already said


def validate_document(document: MarkedDict, source: str, schema_path: Path) -> list[FileProblem]:
    """Every schema violation in ``document`` (as ``load_yaml`` gives it), each placed."""
    return validate(_validator_for(schema_path), Where(document.located, source))


class InviteSchema:
    """The invite file schema, split for checking each entry as it is read: each part a
    fastjsonschema yes or no (``entry_is_valid``, ``file_is_valid``: a no means "ask its
    jsonschema validator", which words the errors and is built when first asked for)."""

    def __init__(self, path: Path, entry: dict[str, Any], file: dict[str, Any]) -> None:
        self._path = path
        self._entry_schema = entry
        self._file_schema = file
        self._fast_entry = _fast(entry)
        self._fast_file = _fast(file)

    def entry_is_valid(self, entry: Any) -> bool:
        return _passes(self._fast_entry, entry)

    def file_is_valid(self, document: Any) -> bool:
        return _passes(self._fast_file, document)

    @cached_property
    def entry(self) -> Draft202012Validator:
        """One entry of `invites`."""
        return _validator_for(self._path).evolve(schema=self._entry_schema)

    @cached_property
    def file(self) -> Draft202012Validator:
        """The file around its entries."""
        return _validator_for(self._path).evolve(schema=self._file_schema)


def _fast(schema: dict[str, Any]) -> Callable[[Any], Any] | None:
    """fastjsonschema's check of ``schema``, each format checked by ``conforms``; None when
    it cannot compile the schema (an edited one): then jsonschema judges every value."""
    import fastjsonschema

    formats = {name: conforms(name) for name in _formats(schema)}
    try:
        return fastjsonschema.compile(
            schema, formats=formats, use_default=False, detailed_exceptions=False
        )
    except (fastjsonschema.JsonSchemaDefinitionException, re.error):
        return None


def _passes(check: Callable[[Any], Any] | None, value: Any) -> bool:
    if check is None:
        return False
    try:
        check(value)
    except Exception:  # a refusal, or a value it cannot judge (a key that is not text)
        return False
    return True


def _nodes(schema: Any) -> Iterator[dict[str, Any]]:
    """Every mapping in ``schema``, itself included."""
    if isinstance(schema, list):
        for item in schema:
            yield from _nodes(item)
    elif isinstance(schema, dict):
        yield schema
        for value in schema.values():
            yield from _nodes(value)


def _formats(schema: Any) -> set[str]:
    return {node["format"] for node in _nodes(schema) if isinstance(node.get("format"), str)}


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


def _refuse_item_rules(around: dict[str, Any], path: Path) -> None:
    """Refuse a schema whose `invites` list would be judged on entries it no longer has."""
    found = sorted({key for node in _nodes(around) for key in node if key in _ITEM_RULES})
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
    whole = _inlined(path)
    properties = whole["properties"]
    entries = properties["invites"]
    # The file-level check sees the list, not its entries (``_as_written`` in desired.state).
    around = {k: v for k, v in entries.items() if k != "items"}
    _refuse_item_rules(around, path)
    file_schema = {**whole, "properties": {**properties, "invites": around}}
    return InviteSchema(path, entries["items"], file_schema)
