"""The organisation's rules (`policies` in reconciler.yaml): each a JSON Schema run on every
invite entry as written, compiled once per run.

A policy is plain JSON Schema (draft 2020-12, as the invite schema), run by jsonschema:
no rule language. What a file may not make a run do:

- fetch anything: a `$ref` must point inside the policy (`#...`), a `$id` is refused,
  and the validator's registry retrieves nothing, whatever it is asked;
- backtrack for ever: `pattern` runs on RE2 (google-re2), in time linear in the text.
  A pattern RE2 cannot run (a look-around, a back-reference) is refused with its place.

Most policies look at a few fields (`groups`, `email`): the verdict is then a function
of those fields alone, kept per distinct value (``_Projected``), so 20,000 invites in
a handful of groups cost a handful of jsonschema runs, and an entry without any of the
fields a policy names costs one dictionary look-up.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Any, Literal

from reconciler.errors import ConfigError, FileProblem
from reconciler.safetext import escape
from reconciler.schema.policy_quick import MISSING, frozen, looked_at, quick_check
from reconciler.schema.re2pattern import re2_compiled, re2_refusal

if TYPE_CHECKING:
    from jsonschema import ValidationError
    from jsonschema.protocols import Validator

Severity = Literal["error", "warning"]
DRAFT = "https://json-schema.org/draft/2020-12/schema"

_CACHE_LIMIT = 100_000  # distinct values kept per policy; then the cache starts again


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

    def __init__(self, path: tuple[Any, ...], reason: str) -> None:
        super().__init__(reason)
        self.path = path
        self.reason = reason


def refused_parts(schema: Any) -> Iterator[tuple[tuple[Any, ...], str]]:
    """Each part of ``schema`` that may not be in a policy (read before jsonschema is asked)."""
    yield from _refused(schema, ())


def _refused(node: Any, path: tuple[Any, ...]) -> Iterator[tuple[tuple[Any, ...], str]]:
    if isinstance(node, list):
        for index, item in enumerate(node):
            yield from _refused(item, (*path, index))
        return
    if not isinstance(node, dict):
        return
    for key, value in node.items():
        here = (*path, key)
        if key in ("$ref", "$dynamicRef") and isinstance(value, str) and not value.startswith("#"):
            yield (
                here,
                (
                    f"`{key}` may only point inside the policy (`#/$defs/...`): "
                    "a policy never fetches a schema from a URL or a file"
                ),
            )
        elif key in ("$id", "$dynamicRef", "$dynamicAnchor", "$anchor"):
            yield (
                here,
                f"`{key}` is not allowed in a policy: a `$ref` names a place in it "
                + ("(`#/$defs/NAME`)"),
            )
        elif key == "$schema" and value != DRAFT:
            yield here, f"a policy is draft 2020-12: `$schema` may only be {DRAFT}"
        elif key == "pattern" and isinstance(value, str):
            why = re2_refusal(value)
            if why:
                yield here, why
        elif key == "patternProperties" and isinstance(value, dict):
            # Run by jsonschema on `re`, over an entry's few known field names: bounded;
            # held to RE2's syntax all the same, so a policy's patterns are of one kind.
            for pattern in value:
                why = re2_refusal(str(pattern))
                if why:
                    yield (*here, pattern), why
        if key not in ("const", "enum", "default", "examples"):  # values, not schemas
            yield from _refused(value, here)


@cache
def _validator_class() -> Any:
    """Draft 2020-12 with `pattern` on RE2."""
    from jsonschema import Draft202012Validator, ValidationError, validators

    def pattern(validator: Any, value: str, instance: Any, schema: Any) -> Iterator[Any]:
        if validator.is_type(instance, "string") and not re2_compiled(value).search(instance):
            yield ValidationError(f"{instance!r} does not match {value!r}")

    return validators.extend(Draft202012Validator, validators={"pattern": pattern})


def _no_retrieval(uri: str) -> Any:
    from referencing.exceptions import NoSuchResource

    raise NoSuchResource(ref=uri)  # type: ignore[call-arg]


def compile_policy(policy: Policy) -> CompiledPolicy:
    """The policy's validator, or a PolicyError at the first part of it that cannot be run."""
    for path, reason in refused_parts(policy.schema):
        raise PolicyError(path, reason)
    from jsonschema.exceptions import SchemaError
    from referencing import Registry

    from reconciler.schema.check import format_checker, quiet_regex_warnings

    kind = _validator_class()
    try:
        with quiet_regex_warnings():
            kind.check_schema(policy.schema)
    except SchemaError as error:
        raise PolicyError(tuple(error.path), _schema_error(error)) from None
    registry: Registry[Any] = Registry(retrieve=_no_retrieval)  # type: ignore[call-arg]
    _refuse_dangling_refs(policy.schema, registry)
    _refuse_fan_out(policy.schema)
    validator = kind(policy.schema, format_checker=format_checker(), registry=registry)
    try:  # a loop that any entry would run into is refused here, at its place
        validator.is_valid({"id": "inv_probe"})
    except RecursionError:
        raise PolicyError((), _LOOP) from None
    return CompiledPolicy(policy, validator)


_LOOP = (
    "its `$ref`s lead back to themselves without end; a `$ref` may only come back after "
    "a step into the entry (`properties`, `items`)"
)


def _refuse_dangling_refs(schema: Any, registry: Any) -> None:
    """A PolicyError at the first `$ref` that points at nothing in the policy."""
    from referencing.exceptions import Unresolvable
    from referencing.jsonschema import DRAFT202012

    resource = DRAFT202012.create_resource(schema)
    resolver = registry.with_resource("", resource).resolver()
    for path, ref in _refs(schema, ()):
        try:
            contents = resolver.lookup(ref).contents
        except (Unresolvable, LookupError, TypeError, ValueError):
            # `referencing` also steps through values (a `pattern`'s text, a boolean), and
            # a step it cannot take there fails with an error of Python's, not its own.
            raise PolicyError(path, "`$ref` points at nothing in the policy") from None
        if not isinstance(contents, dict | bool):  # jsonschema would fail on each entry
            raise PolicyError(
                path,
                f"`$ref` points at {_value_kind(contents)} in the policy, not at a schema "
                "(an object, or true or false)",
            )


def _value_kind(value: Any) -> str:
    if isinstance(value, str):
        return "text"
    if isinstance(value, list):
        return "a list"
    return "null" if value is None else "a number"


# Subschemas a policy may expand to, each `$ref` counting what it points at each time it
# is met: `$defs` whose each entry refers twice to the next (`allOf: [{$ref: b}, {$ref:
# b}]`) double the work at every step, so 22 of them (130 values written) kept jsonschema
# busy for minutes on one entry, and `validate`, `plan` and `apply` with it.
MAX_EXPANDED = 5_000


def _refuse_fan_out(schema: Any) -> None:
    """A PolicyError when ``schema``, its `$ref`s followed, is larger than MAX_EXPANDED."""
    sizes: dict[int, int] = {}  # by id(): each subschema is sized once
    open_: set[int] = set()  # those being sized: a `$ref` back to one is a loop

    def size(node: Any) -> int:
        if isinstance(node, list):
            return 1 + sum(size(item) for item in node)
        if not isinstance(node, dict):
            return 1
        key = id(node)
        if key in sizes:
            return sizes[key]
        if key in open_:
            return 1  # a loop: each round steps into the entry, whose depth bounds it
        open_.add(key)
        total = 1
        for name, value in node.items():
            if name in ("const", "enum", "default", "examples", "$defs"):
                total += 1  # values, or schemas counted where a `$ref` uses them
            elif name == "$ref" and isinstance(value, str):
                total += size(_pointed(schema, value))
            else:
                total += size(value)
            if total > MAX_EXPANDED:
                break
        open_.discard(key)
        sizes[key] = total
        return total

    try:
        expanded = size(schema)
    except RecursionError:  # jsonschema would fail so too, on the first entry reaching it
        raise PolicyError(
            (),
            "its `$ref`s lead one to the next too deeply to be followed (hundreds in a "
            "chain); reach the rule in fewer steps",
        ) from None
    if expanded > MAX_EXPANDED:
        raise PolicyError(
            (),
            f"its `$ref`s expand it to more than {MAX_EXPANDED:,} subschemas (each "
            "`$ref` counts the schema it points at, every time it is met); a policy that "
            "large would take minutes on each invite",
        )


def _pointed(schema: Any, ref: str) -> Any:
    """The part of ``schema`` a local `$ref` (`#/...`, checked to resolve) points at."""
    from urllib.parse import unquote

    node = schema
    for token in unquote(ref.removeprefix("#")).split("/")[1:]:
        token = token.replace("~1", "/").replace("~0", "~")
        if isinstance(node, list) and token.isdigit() and int(token) < len(node):
            node = node[int(token)]
        elif isinstance(node, dict) and token in node:
            node = node[token]
        else:
            return None
    return node


def _refs(node: Any, path: tuple[Any, ...]) -> Iterator[tuple[tuple[Any, ...], str]]:
    if isinstance(node, list):
        for index, item in enumerate(node):
            yield from _refs(item, (*path, index))
    elif isinstance(node, dict):
        for key, value in node.items():
            if key == "$ref" and isinstance(value, str):
                yield (*path, key), value
            elif key not in ("const", "enum", "default", "examples"):
                yield from _refs(value, (*path, key))


class PolicyLoop(ConfigError):
    """A policy whose `$ref`s lead back to themselves without reading any deeper."""


def _schema_error(error: Any) -> str:
    return f"not valid JSON Schema (draft 2020-12): {escape(str(error.message)[:300])}"


class CompiledPolicy:
    """A policy ready to run: ``failure(entry)`` is None, or the path its verdict is about."""

    def __init__(self, policy: Policy, validator: Validator) -> None:
        self.policy = policy
        self._validator = validator
        names = looked_at(policy.schema)
        self._names = tuple(sorted(names)) if names is not None else None
        self._verdicts: dict[Any, tuple[Any, ...] | None] = {}
        self._quick = quick_check(policy.schema)

    def failure(self, entry: dict[str, Any]) -> tuple[Any, ...] | None:
        quick = self._quick
        if quick is not None and quick(entry):
            return None  # almost every entry: no key built, nothing kept
        names = self._names
        if names is None:
            return self._judge(entry)
        key = tuple(frozen(entry[n]) if n in entry else MISSING for n in names)
        verdicts = self._verdicts
        try:
            return verdicts[key]
        except KeyError:
            pass
        if len(verdicts) >= _CACHE_LIMIT:
            verdicts.clear()
        verdict = self._judge({n: entry[n] for n in names if n in entry})
        verdicts[key] = verdict
        return verdict

    def _judge(self, value: dict[str, Any]) -> tuple[Any, ...] | None:
        try:
            if self._validator.is_valid(value):
                return None
            errors = list(self._validator.iter_errors(value))
        except RecursionError:
            rule = self.policy
            raise PolicyLoop(
                f"{escape(rule.source)}: policy {escape(rule.name)} (item {rule.index + 1} of "
                f"`policies`): {_LOOP}"
            ) from None
        return _about(errors)


def _about(errors: list[ValidationError]) -> tuple[Any, ...]:
    """The path of the field a failed policy is about: the deepest error's, the entry's
    (()) when no error names a field."""
    paths = [tuple(error.absolute_path) for error in _leaves(errors)]
    return max(paths, key=len, default=())


def _leaves(errors: list[ValidationError]) -> Iterator[ValidationError]:
    for error in errors:
        if error.context:
            yield from _leaves(list(error.context))
        yield error


class Policies:
    """The compiled policies of a run, applied to each entry read."""

    def __init__(self, compiled: tuple[CompiledPolicy, ...]) -> None:
        self.compiled = compiled

    def check(
        self, entry: dict[str, Any], source: str, mark: Callable[[tuple[Any, ...]], tuple[int, int]]
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
