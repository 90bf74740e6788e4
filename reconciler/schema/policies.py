"""The organisation's rules (`policies` in reconciler.yaml): each a JSON Schema run by
jsonschema on every invite entry as written, compiled once per run.

A policy is plain JSON Schema (draft 2020-12, as the invite schema): no rule language.
What a file may not make a run do:

- fetch anything: a `$ref` must point inside the policy (`#...`), a `$id` is refused,
  and the validator's registry retrieves nothing, whatever it is asked;
- backtrack for ever: `pattern` (and the patterns of `patternProperties`) run on RE2
  (google-re2), in time linear in the text. A pattern RE2 cannot run (a look-around, a
  back-reference) is refused with its place;
- fail every run with a traceback, or hold its job for hours, through its `$ref`s: they
  point at a subschema (a place jsonschema reads as a schema: the policy itself, what an
  applicator or `$defs` holds), never at a value (a `const`, an `enum`'s list, a
  `pattern`'s text), whose contents no check of the policy has read; followed, they
  expand the policy to at most ``MAX_EXPANDED`` subschemas, never lead back into one they
  come from (an invite entry nests three levels: a loop would only multiply the work at
  each), and lead from one to the next at most ``MAX_CHAIN`` times.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Any, Literal

from reconciler.errors import ConfigError, FileProblem
from reconciler.safetext import escape, kind_in_words

if TYPE_CHECKING:
    from jsonschema import ValidationError
    from jsonschema.protocols import Validator

Severity = Literal["error", "warning"]
Path = tuple[Any, ...]
Problem = tuple[Path, str]
DRAFT = "https://json-schema.org/draft/2020-12/schema"

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


@dataclass(frozen=True)
class Policy:
    """One rule as the config file wrote it, and where (for its problems)."""

    name: str
    message: str
    severity: Severity
    schema: dict[str, Any] | bool
    source: str  # the config file
    index: int  # its place in `policies`


class PolicyError(Exception):
    """A policy that cannot be run: ``path`` inside its schema, and why."""

    def __init__(self, path: Path, reason: str) -> None:
        super().__init__(reason)
        self.path = path
        self.reason = reason


class PolicyLoop(ConfigError):
    """A policy jsonschema cannot follow to its end on an entry (past Python's stack): the
    checks when it is compiled (no `$ref` loop, short chains, bounded nesting) keep any
    known one out; the run stops with the policy named should another get through."""


# -- what a policy may not hold, read before jsonschema is asked ---------------------------


def refused_parts(schema: Any) -> Iterator[Problem]:
    """Each part of ``schema`` that may not be in a policy."""
    yield from _refused(schema, ())
    used = {
        key: path
        for path, node in subschemas(schema)
        if isinstance(node, dict)
        for key in ("patternProperties", "unevaluatedProperties")
        if key in node
    }
    if len(used) == 2:
        # jsonschema finds what `unevaluatedProperties` leaves with `re`, patterns and all.
        yield (
            (*used["unevaluatedProperties"], "unevaluatedProperties"),
            "`unevaluatedProperties` cannot be used with `patternProperties` in a policy "
            "(their patterns would run on Python's re, not RE2); name the fields in "
            "`properties`, or use `additionalProperties`",
        )


def _refused(node: Any, path: Path) -> Iterator[Problem]:
    if isinstance(node, list):
        for index, item in enumerate(node):
            yield from _refused(item, (*path, index))
        return
    if not isinstance(node, dict):
        return
    for key, value in node.items():
        here = (*path, key)
        yield from _refused_here(key, value, here)
        if key in SCHEMAS_BY_NAME and isinstance(value, dict):
            # Names, not keywords: a schema in `$defs` named `const` is a schema.
            for name, sub in value.items():
                yield from _refused(sub, (*here, name))
        elif key not in VALUE_KEYWORDS:  # values, not schemas
            yield from _refused(value, here)


def _refused_here(key: str, value: Any, here: Path) -> Iterator[Problem]:
    """The refusals of one keyword, and of the patterns it names."""
    why = _keyword_refusal(key, value)
    if why:
        yield here, why
    for pattern in value if key == "patternProperties" and isinstance(value, dict) else ():
        why = re2_refusal(str(pattern))  # run on RE2 as `pattern` is (re2_keywords)
        if why:
            yield (*here, pattern), why


def _reference_refusal(key: str, value: Any) -> str | None:
    if key in ("$ref", "$dynamicRef") and isinstance(value, str) and not value.startswith("#"):
        return (
            f"`{key}` may only point inside the policy (`#/$defs/...`): "
            "a policy never fetches a schema from a URL or a file"
        )
    if key in ("$id", "$dynamicRef", "$dynamicAnchor", "$anchor"):
        return f"`{key}` is not allowed in a policy: a `$ref` names a place in it (`#/$defs/NAME`)"
    return None


def _keyword_refusal(key: str, value: Any) -> str | None:
    if key.startswith("$") and (reference := _reference_refusal(key, value)):
        return reference
    if key == "$schema" and value != DRAFT:
        return f"a policy is draft 2020-12: `$schema` may only be {DRAFT}"
    if key == "pattern" and isinstance(value, str):
        return re2_refusal(value)
    if key == "format" and isinstance(value, str):
        return _format_refusal(value)
    return None


def _format_refusal(name: str) -> str | None:
    # jsonschema says yes to any value of a format it has no check for: a policy's
    # `format: date-time` would pass everything, the organisation's rule silently skipped.
    from reconciler.schema.check import format_checker

    checked = format_checker().checkers
    if name in checked:
        return None
    return (
        f"`format: {escape(name)}` cannot be checked here, so it would pass any value; "
        f"the formats checked are {', '.join(sorted(checked))} (or use `pattern`)"
    )


# -- patterns on RE2 ------------------------------------------------------------------------


def re2_refusal(pattern: str) -> str | None:
    import re2

    try:
        re2_compiled(pattern)
    except re2.error as error:
        reason = error.args[0] if error.args else error
        text = reason.decode("utf-8", "replace") if isinstance(reason, bytes) else str(reason)
        return (
            f"`pattern` cannot be run in linear time ({text}): policies' patterns run on "
            "RE2, which has no look-around and no back-references"
        )
    return None


@cache
def re2_compiled(pattern: str) -> Any:
    import re2

    options = re2.Options()
    options.log_errors = False  # else RE2 writes its own line on stderr
    return re2.compile(pattern, options)


def re2_keywords() -> dict[str, Any]:
    """jsonschema's keywords that match patterns, on RE2: `pattern`, `patternProperties`
    and `additionalProperties` (which asks `patternProperties`' patterns too). Left to
    jsonschema, the last two run a policy's patterns on `re`: `^(.*)*(.*)*X$` over a field
    name took a minute, for every invite."""
    from jsonschema import ValidationError

    def pattern(validator: Any, value: str, instance: Any, schema: Any) -> Any:
        if validator.is_type(instance, "string") and not re2_compiled(value).search(instance):
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


# -- what a policy's `$ref`s may do ---------------------------------------------------------


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
    try:
        for path, node in places:
            ref = node.get("$ref") if isinstance(node, dict) else None
            if isinstance(ref, str):
                targets[id(node)] = _target(ref, lookup, path, at)
        return _Expansion(targets, at).problem(schema)
    except _Problem as found:
        return found.problem
    except RecursionError:
        return (), TOO_DEEP


def _target(ref: str, lookup: Any, path: Path, at: dict[int, Path]) -> Any:
    """The subschema ``ref`` points at; a `$ref` to nothing, or to no schema, refused."""
    try:
        contents = lookup(ref).contents
    except Exception:
        # with errors of Python's as well as its own (a list stepped by a name).
        raise _Problem(((*path, "$ref"), NOTHING)) from None
    if not isinstance(contents, bool) and id(contents) not in at:
        raise _Problem(
            (
                (*path, "$ref"),
                f"`$ref` points at {_kind(contents)} in the policy, not at a schema (one "
                "that `$defs`, `properties`, `allOf` or another keyword of schemas holds)",
            )
        )
    return contents


def _kind(value: Any) -> str:
    if isinstance(value, dict):
        return "a value (an object no check reads as a schema)"
    return "null" if value is None else kind_in_words(value)


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
        """The bound ``schema`` passes (a ``_Problem`` raised for the first one passed)."""
        size, _, _ = self._size(schema, 0, 0)
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
        found = self._sized_before(key, depth)
        if found is not None:
            return found
        return self._size_of_schema(node, key, links, depth)

    def _size_of_schema(
        self, node: dict[str, Any], key: int, links: int, depth: int
    ) -> tuple[int, int, int]:
        self._open.add(key)
        total, chain, height = 1, 0, 1
        for name, value in node.items():
            if name in VALUE_KEYWORDS or name in ("$defs", "definitions"):
                total += 1  # a value; schemas in `$defs` counted where a `$ref` uses them
            else:
                followed = name == "$ref" and key in self._targets
                size, deep, high = (
                    self._followed(key, links, depth)
                    if followed
                    else self._size(value, links, depth + 1)
                )
                total, chain, height = total + size, max(chain, deep), max(height, high + 1)
            if total > MAX_EXPANDED:
                raise _Problem(((), FAN_OUT))
        self._open.discard(key)
        self._sized[key] = (total, chain, height)
        return total, chain, height

    def _sized_before(self, key: int, depth: int) -> tuple[int, int, int] | None:
        """The size of the schema ``key`` when it was sized before; too deep, refused."""
        if depth + 1 > MAX_DEPTH:
            raise _Problem((self._at.get(key, ()), TOO_DEEP))
        found = self._sized.get(key)
        if found is not None and depth + found[2] > MAX_DEPTH:  # sized from a shallower place
            raise _Problem((self._at.get(key, ()), TOO_DEEP))
        return found

    def _followed(self, key: int, links: int, depth: int) -> tuple[int, int, int]:
        """The size, chain and height of what the `$ref` of the schema ``key`` points at,
        its chain counting this link."""
        target = self._targets[key]
        if id(target) in self._open:
            raise _Problem(((*self._at[key], "$ref"), LOOP))
        if links + 1 > MAX_CHAIN:
            raise _Problem(((*self._at[key], "$ref"), CHAIN))
        size, deep, high = self._size(target, links + 1, depth + 1)
        if links + 1 + deep > MAX_CHAIN:  # a chain sized before, from elsewhere
            raise _Problem(((*self._at[key], "$ref"), CHAIN))
        return size, deep + 1, high


# -- compiled and run -----------------------------------------------------------------------


@cache
def _validator_class() -> Any:
    """Draft 2020-12 with every pattern on RE2."""
    from jsonschema import Draft202012Validator, validators

    return validators.extend(Draft202012Validator, validators=re2_keywords())


def _no_retrieval(uri: str) -> Any:
    from referencing.exceptions import NoSuchResource

    raise NoSuchResource(ref=uri)  # type: ignore[call-arg]


def compile_policy(policy: Policy) -> CompiledPolicy:
    """The policy's validator, or a PolicyError at the first part of it that cannot be run."""
    for path, reason in refused_parts(policy.schema):
        raise PolicyError(path, reason)
    from jsonschema.exceptions import SchemaError
    from referencing import Registry
    from referencing.jsonschema import DRAFT202012

    from reconciler.schema.check import format_checker

    kind = _validator_class()
    try:
        kind.check_schema(policy.schema, format_checker=format_checker())
    except SchemaError as error:
        why = f"not valid JSON Schema (draft 2020-12): {escape(str(error.message)[:300])}"
        raise PolicyError(tuple(error.path), why) from None
    registry: Registry[Any] = Registry(retrieve=_no_retrieval)  # type: ignore[call-arg]
    resolver = registry.with_resource("", DRAFT202012.create_resource(policy.schema)).resolver()
    problem = ref_problem(policy.schema, resolver.lookup)
    if problem is not None:
        raise PolicyError(*problem)
    validator = kind(policy.schema, format_checker=format_checker(), registry=registry)
    try:  # what the checks above could not bound, met by any entry: refused here
        validator.is_valid({"id": "inv_probe"})
    except RecursionError:
        raise PolicyError((), TOO_DEEP) from None
    return CompiledPolicy(policy, validator)


@dataclass(frozen=True, eq=False)  # compared and hashed as the one object it is
class CompiledPolicy:
    """A policy ready to run: ``failure(entry)`` is None, or the path its verdict is about."""

    policy: Policy
    validator: Validator

    def failure(self, entry: dict[str, Any]) -> Path | None:
        try:
            if self.validator.is_valid(entry):
                return None
            errors = list(self.validator.iter_errors(entry))
        except RecursionError:
            rule = self.policy
            raise PolicyLoop(
                f"{escape(rule.source)}: policy {escape(rule.name)} (item {rule.index + 1} of "
                f"`policies`): {TOO_DEEP}"
            ) from None
        return _about(errors)


def _about(errors: list[ValidationError]) -> Path:
    """The path of the field a failed policy is about: the deepest error's, the entry's
    (()) when no error names a field."""
    paths = [tuple(error.absolute_path) for error in _leaves(errors)]
    return max(paths, key=len, default=())


def _leaves(errors: list[ValidationError]) -> Iterator[ValidationError]:
    for error in errors:
        if error.context:
            yield from _leaves(list(error.context))
        yield error


@dataclass(frozen=True, eq=False)
class Policies:
    """The compiled policies of a run, applied to each entry read."""

    compiled: tuple[CompiledPolicy, ...]

    def check(
        self, entry: dict[str, Any], source: str, mark: Callable[[Path], tuple[int, int]]
    ) -> list[FileProblem]:
        problems = []
        for policy in self.compiled:
            path = policy.failure(entry)
            if path is None:
                continue
            rule = policy.policy
            line, column = mark(path)
            message = f"policy {rule.name}: {rule.message}"
            problems.append(FileProblem(source, line, column, message, rule.severity))
        return problems
