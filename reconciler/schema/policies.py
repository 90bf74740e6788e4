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
from reconciler.schema.policy_refs import (
    SCHEMAS_BY_NAME,
    TOO_DEEP,
    VALUE_KEYWORDS,
    ref_problem,
    subschemas,
)
from reconciler.schema.re2pattern import re2_keywords, re2_refusal

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
            for pattern in value:  # run on RE2 as `pattern` is (re2_keywords)
                why = re2_refusal(str(pattern))
                if why:
                    yield (*here, pattern), why
        if key in SCHEMAS_BY_NAME and isinstance(value, dict):
            # Names, not keywords: a schema in `$defs` named `const` is a schema.
            for name, sub in value.items():
                yield from _refused(sub, (*here, name))
        elif key not in VALUE_KEYWORDS:  # values, not schemas
            yield from _refused(value, here)


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
        raise PolicyError(tuple(error.path), _schema_error(error)) from None
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


class PolicyLoop(ConfigError):
    """A policy jsonschema cannot follow to its end on an entry (past Python's stack): the
    checks when it is compiled (no `$ref` loop, short chains, bounded nesting) keep any
    known one out; the run stops with the policy named should another get through."""


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
                f"`policies`): {TOO_DEEP}"
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
