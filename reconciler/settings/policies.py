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


def read_rules(values: dict[str, Any], document: MarkedDict, path: str) -> Rules:
    """The rules of ``values`` (the config as plain values), its keys taken out of it."""
    written: list[dict[str, Any]] = values.pop("policies", None) or []
    levels: dict[str, Level] = {**BUILT_IN, **values.pop("checks", {})}
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
