"""What a policy's `$ref`s may do, checked when it is compiled, before any entry is judged.

A `$ref` points inside the policy at a subschema: a place jsonschema reads as a schema
(the policy itself, what an applicator or `$defs` holds), never at a value (a `const`,
an `enum`'s list, a `pattern`'s text), whose contents no check of the policy has read.
Followed, the `$ref`s expand the policy to at most ``MAX_EXPANDED`` subschemas, never
lead back into one they come from (an invite entry nests three levels: a loop would
only multiply the work at each), and lead from one to the next at most ``MAX_CHAIN``
times. Each is a way a pull request's policy could fail every run with a traceback, or
hold its job for hours.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

Path = tuple[Any, ...]
Problem = tuple[Path, str]

# Keywords whose value is a value, never a schema (a `$ref` inside is text to jsonschema).
VALUE_KEYWORDS = frozenset({"const", "enum", "default", "examples"})
# Keywords holding schemas by name, in a list, or one schema.
SCHEMAS_BY_NAME = frozenset(
    {"$defs", "definitions", "properties", "patternProperties", "dependentSchemas"}
)
_LISTED = frozenset({"allOf", "anyOf", "oneOf", "prefixItems"})
_ONE = frozenset(
    {
        "not",
        "if",
        "then",
        "else",
        "items",
        "contains",
        "additionalProperties",
        "propertyNames",
        "unevaluatedItems",
        "unevaluatedProperties",
        "contentSchema",
    }
)

# Subschemas a policy may expand to, each `$ref` counting what it points at each time it
# is met: `$defs` whose each entry refers twice to the next (`allOf: [{$ref: b}, {$ref:
# b}]`) double the work at every step, so 22 of them (130 values written) kept jsonschema
# busy for minutes on one entry, and `validate`, `plan` and `apply` with it.
MAX_EXPANDED = 5_000
# `$ref`s leading one to the next: jsonschema follows each with several calls of its own,
# and a chain of some hundreds runs out of Python's stack on the first entry it judges.
MAX_CHAIN = 32
# Schemas one inside another, `$ref`s followed: an invite entry nests three levels, and
# jsonschema, some frames a level, runs out of Python's stack a few hundred down (and
# inside `referencing`'s lookup that is a Rust panic, not a RecursionError).
MAX_DEPTH = 50

NOTHING = "`$ref` points at nothing in the policy"
FAN_OUT = (
    f"its `$ref`s expand it to more than {MAX_EXPANDED:,} subschemas (each `$ref` counts "
    "the schema it points at, every time it is met); a policy that large would take "
    "minutes on each invite"
)
LOOP = (
    "`$ref` leads back into a schema it stands in (a loop); an invite entry nests three "
    "levels at most: write each level out"
)
CHAIN = (
    f"`$ref`s lead one to the next more than {MAX_CHAIN} times to here; point at the "
    "schema meant, not at another `$ref`"
)
TOO_DEEP = (
    f"it nests too deeply to be followed (more than {MAX_DEPTH} schemas one inside another, "
    "its `$ref`s followed); an invite entry nests three levels, and no rule needs so many"
)


def subschemas(node: Any, path: Path = ()) -> Iterator[tuple[Path, Any]]:
    """Each place of ``node`` that jsonschema reads as a schema, with its path: ``node``
    itself, and what its applicators and `$defs` hold (an object or a boolean)."""
    yield path, node
    if not isinstance(node, dict):
        return
    for key, value in node.items():
        here = (*path, key)
        if key in SCHEMAS_BY_NAME and isinstance(value, dict):
            for name, sub in value.items():
                yield from subschemas(sub, (*here, name))
        elif key in _LISTED and isinstance(value, list):
            for index, sub in enumerate(value):
                yield from subschemas(sub, (*here, index))
        elif key in _ONE:
            yield from subschemas(value, here)


def ref_problem(schema: Any, lookup: Any) -> Problem | None:
    """The first problem with the `$ref`s of ``schema`` (each resolved with ``lookup``,
    a `referencing` resolver's), or None."""
    try:
        places = list(subschemas(schema))
    except RecursionError:
        return (), TOO_DEEP
    at: dict[int, Path] = {}  # where each subschema is first written (one may be listed twice)
    for path, node in places:
        if isinstance(node, dict):
            at.setdefault(id(node), path)
    targets: dict[int, Any] = {}  # the subschema each `$ref` holder points at, by id()
    for path, node in places:
        ref = node.get("$ref") if isinstance(node, dict) else None
        if not isinstance(ref, str):
            continue
        try:
            contents = lookup(ref).contents
        except Exception:
            # with errors of Python's as well as its own (a list stepped by a name).
            return (*path, "$ref"), NOTHING
        if not isinstance(contents, bool) and id(contents) not in at:
            return (*path, "$ref"), (
                f"`$ref` points at {_kind(contents)} in the policy, not at a schema (one "
                "that `$defs`, `properties`, `allOf` or another keyword of schemas holds)"
            )
        targets[id(node)] = contents
    try:
        return _Expansion(targets, at).problem(schema)
    except RecursionError:
        return (), TOO_DEEP


def _kind(value: Any) -> str:
    if isinstance(value, str):
        return "text"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a value (an object no check reads as a schema)"
    return "null" if value is None else "a number"


class _Problem(Exception):
    def __init__(self, problem: Problem) -> None:
        self.problem = problem


class _Expansion:
    """Sizes the policy with its `$ref`s followed: each subschema once, by id()."""

    def __init__(self, targets: dict[int, Any], at: dict[int, Path]) -> None:
        self._targets = targets
        self._at = at
        self._sized: dict[int, tuple[int, int, int]] = {}  # id -> size, chain, height
        self._open: set[int] = set()  # being sized: a `$ref` back into one is a loop

    def problem(self, schema: Any) -> Problem | None:
        try:
            size, _, _ = self._size(schema, 0, 0)
        except _Problem as found:
            return found.problem
        return ((), FAN_OUT) if size > MAX_EXPANDED else None

    def _size(self, node: Any, links: int, depth: int) -> tuple[int, int, int]:
        """How many subschemas ``node`` stands for, its longest chain of `$ref`s and how
        many schemas deep it goes; ``links``, ``depth``: `$ref`s followed and schemas
        entered to reach it (each bound refused as it is passed, before going on)."""
        if isinstance(node, list):
            total, chain, height = 1, 0, 0
            for item in node:
                size, deep, high = self._size(item, links, depth)
                total, chain, height = total + size, max(chain, deep), max(height, high)
            return total, chain, height
        if not isinstance(node, dict):
            return 1, 0, 0
        key = id(node)
        if depth + 1 > MAX_DEPTH:
            raise _Problem((self._at.get(key, ()), TOO_DEEP))
        if key in self._sized:
            found = self._sized[key]
            if depth + found[2] > MAX_DEPTH:  # sized before, from a shallower place
                raise _Problem((self._at.get(key, ()), TOO_DEEP))
            return found
        self._open.add(key)
        total, chain, height = 1, 0, 1
        for name, value in node.items():
            if name in VALUE_KEYWORDS:
                total += 1
            elif name == "$ref" and key in self._targets:
                target = self._targets[key]
                if id(target) in self._open:
                    raise _Problem(((*self._at[key], "$ref"), LOOP))
                if links + 1 > MAX_CHAIN:
                    raise _Problem(((*self._at[key], "$ref"), CHAIN))
                size, deep, high = self._size(target, links + 1, depth + 1)
                if links + 1 + deep > MAX_CHAIN:  # a chain sized before, from elsewhere
                    raise _Problem(((*self._at[key], "$ref"), CHAIN))
                total, chain, height = total + size, max(chain, deep + 1), max(height, high + 1)
            elif name in ("$defs", "definitions"):
                total += 1  # schemas counted where a `$ref` uses them
            else:
                size, deep, high = self._size(value, links, depth + 1)
                total, chain, height = total + size, max(chain, deep), max(height, high + 1)
            if total > MAX_EXPANDED:
                raise _Problem(((), FAN_OUT))
        self._open.discard(key)
        self._sized[key] = (total, chain, height)
        return total, chain, height
