"""`policies` and `checks` of reconciler.yaml made into the run's ``Rules``.

The config schema has already checked their shape (names, messages, severities,
each `schema` against the draft's meta-schema where jsonschema can); here each
policy is compiled, once for the run, and one that cannot be run is a configuration
problem placed at the part of it that is wrong.
"""

from __future__ import annotations

from typing import Any

from reconciler.desired.rules import BUILT_IN, Level, Rules
from reconciler.errors import FileProblem, InputError
from reconciler.safetext import escape
from reconciler.schema.policies import (
    CompiledPolicy,
    Policies,
    Policy,
    PolicyError,
    compile_policy,
)
from reconciler.yamlload.source import MarkedDict

# A policy is a rule, not a data set: checking a schema against the draft's meta-schema
# costs jsonschema about a millisecond a value, so the values of all policies together
# are bounded (2,000: about 2 s at worst; the examples' policies have 10 to 20 each).
MAX_POLICY_VALUES = 2_000


def too_large(document: MarkedDict, path: str) -> list[FileProblem]:
    """A problem when the `policies` of ``document`` hold too many values to be checked."""
    written = document.get("policies")
    count = _values(written, MAX_POLICY_VALUES + 1)
    if count <= MAX_POLICY_VALUES:
        return []
    message = (
        f"`policies` hold more than {MAX_POLICY_VALUES:,} values (keys and list items) "
        "together; a policy is a rule over an invite's fields, not a list of data"
    )
    return [FileProblem(path, *document.key_marks["policies"], message)]


def _values(node: Any, limit: int) -> int:
    """The keys and items in ``node``, counted up to ``limit`` (then it stops)."""
    count = 0
    stack = [node]
    while stack and count < limit:
        item = stack.pop()
        if isinstance(item, dict):
            count += len(item)
            stack.extend(item.values())
        elif isinstance(item, list):
            count += len(item)
            stack.extend(item)
    return count


def read_rules(values: dict[str, Any], document: MarkedDict, path: str) -> Rules:
    """The rules of ``values`` (the config as plain values), its keys taken out of it."""
    written: list[dict[str, Any]] = values.pop("policies", None) or []
    # A bare `off` is YAML 1.1's false: the config schema takes either.
    chosen: dict[str, Level] = {
        name: level or "off" for name, level in values.pop("checks", {}).items()
    }
    levels: dict[str, Level] = {**BUILT_IN, **chosen}
    compiled: list[CompiledPolicy] = []
    problems: list[FileProblem] = []
    seen: dict[str, int] = {}
    located = document.located
    for index, item in enumerate(written):
        at = ("policies", index)
        name = item["name"]
        if name in seen:
            problems.append(
                FileProblem(
                    path,
                    *located.mark((*at, "name")),
                    f"policy `{escape(name)}` is already defined (item {seen[name] + 1} of "
                    "`policies`); give each its own name",
                )
            )
            continue
        seen[name] = index
        policy = Policy(
            name, item["message"], item.get("severity", "error"), item["schema"], path, index
        )
        try:
            compiled.append(compile_policy(policy))
        except PolicyError as error:
            where = (*at, "schema", *error.path)
            message = f"policy {escape(name)}: `schema` cannot be used: {error.reason}"
            problems.append(FileProblem(path, *located.key_mark(where), message))
    if problems:
        raise InputError(problems)
    return Rules(Policies(tuple(compiled)) if compiled else None, levels)
