"""reconciler.yaml: found from the working directory up to the repository's top, read
within bounds (never a FIFO or a device, never through a link out of the repository),
checked against its schema, its paths made relative to where the command runs and kept
inside the repository, and its `policies` and `checks` made into the run's ``Rules``.

The config schema checks the policies' shape (names, messages, severities, each `schema`
against the draft's meta-schema where jsonschema can); here each policy is compiled, once
for the run, and one that cannot be run is a problem placed at the part of it that is wrong.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from reconciler.desired.files import CONFIG_FILE
from reconciler.desired.rules import BUILT_IN, Level, Rules
from reconciler.errors import ConfigError, FileProblem, InputError
from reconciler.files import TooLarge, read_regular, resource_path
from reconciler.git import outside_repository, up_to_top
from reconciler.safetext import escape
from reconciler.schema.check import validate_document
from reconciler.schema.policies import (
    CompiledPolicy,
    Policies,
    Policy,
    PolicyError,
    compile_policy,
)
from reconciler.settings.contract import contract_problems, no_scheme
from reconciler.yamlload.source import MarkedDict, decode_source, load_yaml, to_plain

_SECRET_KEYS = {"client_secret", "secret", "access_token", "token", "password", "api_key"}
_CONFIG_FILE_LIMIT = 1024 * 1024
# A policy is a rule, not a data set: checking a schema against the draft's meta-schema
# costs jsonschema about a millisecond a value, so the values of all policies together
# are bounded (2,000: about 2 s at worst; the examples' policies have 10 to 20 each).
MAX_POLICY_VALUES = 2_000


def find_config_file() -> str | None:
    """reconciler.yaml in the working directory, else the nearest directory above it up to
    the repository's top level (pre-commit's and editorconfig's way: a run from inside
    invites/ finds the project's file); relative to the working directory, so that the
    paths it sets, and every message, read from here."""
    for directory in up_to_top():
        candidate = directory / CONFIG_FILE
        # Anything by that name (a FIFO, a device, a dangling link, a directory) is the
        # file meant: read_config_file refuses it, never skipped for defaults or one above.
        if os.path.lexists(candidate):
            return os.path.relpath(candidate)
    return None


def read_config_file(path: str) -> tuple[dict[str, Any], dict[str, str]]:
    """The settings ``path`` sets, as plain values (numbers as written: they are converted
    as the environment's are), and where each is written (`PATH:LINE:COLUMN: KEY`)."""
    document = _document(_read(path), path)
    if document is None:
        return {}, {}
    values: dict[str, Any] = to_plain(document)
    if "policies" in values or "checks" in values:
        values["rules"] = _read_rules(values, document, path)
    contract = contract_problems(values)  # paths and field names, at their values
    if contract:
        raise InputError(
            [FileProblem(path, *document.located.mark(at), why) for at, why in contract]
        )
    _confine_paths(values, document, path)
    marks = document.key_marks
    return values, {
        str(key): f"{path}:{line}:{column}: {key}" for key, (line, column) in marks.items()
    }


def _read(path: str) -> bytes:
    outside = outside_repository(path)  # a link committed out of the repository: unread
    if outside:
        raise ConfigError(
            f"{escape(path)}: not read: it {outside}; a config file is never read through "
            "a link out of it (copy it in instead)"
        )
    try:
        return read_regular(path, _CONFIG_FILE_LIMIT)  # a FIFO, a device: refused at once
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read config file: {exc.strerror}") from None
    except TooLarge:
        raise ConfigError(
            f"{path}: larger than {_CONFIG_FILE_LIMIT // 1024} KiB; a config file holds a few "
            "settings (is this the right file?)"
        ) from None


def _document(data: bytes, path: str) -> MarkedDict | None:
    """The file's mapping, checked against the config schema; None when it is empty."""
    text, problems = decode_source(data, path)
    document, parse_problems = load_yaml(text, path) if text is not None else (None, [])
    problems += parse_problems
    if document is None and not problems:
        return None
    if isinstance(document, MarkedDict):
        problems += _secret_keys(document, path)
        # Before the meta-schema judges them: policies too large to be checked.
        problems = problems or _too_many_policy_values(document, path)
        schema = resource_path("schemas/config.schema.json")
        problems = problems or _no_scheme_said(document, path, schema)
    elif not problems:
        problems.append(FileProblem(path, 1, 1, "config file must be a mapping of settings"))
    if problems or not isinstance(document, MarkedDict):  # the second: a problem is listed
        raise InputError(problems)
    return document


def _no_scheme_said(document: MarkedDict, path: str, schema: Any) -> list[FileProblem]:
    """The schema's problems, a `base_url` written without its scheme worded as the
    environment's is (with the URL meant), not as the pattern it does not match."""
    problems = validate_document(document, path, schema)
    written = document.get("base_url")
    said = no_scheme(written.strip()) if isinstance(written, str) and "://" not in written else None
    if not said:
        return problems
    line, column = document.located.mark(("base_url",))
    return [
        FileProblem(path, line, column, f"`base_url`: {said}")
        if (p.line, p.column) == (line, column) and p.message.startswith("`base_url`:")
        else p
        for p in problems
    ]


def _confine_paths(values: dict[str, Any], document: MarkedDict, path: str) -> None:
    """`paths` and `audit_log` made relative to the working directory, each refused at its
    place when it leads out of the repository (reconciler.git.outside_repository)."""
    base = str(Path(path).parent)
    named: list[tuple[tuple[Any, ...], str]] = []  # (its place in the file, as written)
    if "paths" in values:
        listed = isinstance(values["paths"], list)
        written = values["paths"] if listed else [values["paths"]]
        values["paths"] = tuple(_relative_to(base, p) for p in written)
        named += [(("paths", i) if listed else ("paths",), p) for i, p in enumerate(written)]
    if "audit_log" in values:
        named.append((("audit_log",), values["audit_log"]))
        values["audit_log"] = _relative_to(base, values["audit_log"])
    problems = []
    for place, written in named:
        why = outside_repository(_relative_to(base, written), base=base)
        if why:
            line, column = document.located.mark(place)
            key = place[0]
            said = f"`{key}`: {escape(written)} {why}; {_CONFINED[key]}"
            problems.append(FileProblem(path, line, column, said))
    if problems:
        raise InputError(problems)


_CONFINED = {
    "paths": "invite files are read only inside it (copy them in instead)",
    "audit_log": (
        "a file in the repository names an audit log only inside it (give one elsewhere "
        "with --audit-log or RECONCILER_AUDIT_LOG, which a pull request cannot set)"
    ),
}


def _secret_keys(document: MarkedDict, path: str) -> list[FileProblem]:
    return [
        FileProblem(
            path,
            *document.key_marks[key],
            f"`{key}` must not be in the config file, which is committed to git; "
            "set RECONCILER_CLIENT_SECRET (or RECONCILER_CLIENT_SECRET_FILE) instead",
        )
        for key in document
        if str(key).lower() in _SECRET_KEYS
    ]


def _relative_to(base: str, value: str) -> str:
    return value if os.path.isabs(value) else os.path.normpath(os.path.join(base, value))


# -- policies and checks ----------------------------------------------------------------------


def _too_many_policy_values(document: MarkedDict, path: str) -> list[FileProblem]:
    """A problem when the `policies` of ``document`` hold too many values to be checked."""
    count, stack = 0, [document.get("policies")]
    while stack and count <= MAX_POLICY_VALUES:  # keys and items, counted past the bound
        item = stack.pop()
        if isinstance(item, dict | list):
            count += len(item)
            stack.extend(item.values() if isinstance(item, dict) else item)
    if count <= MAX_POLICY_VALUES:
        return []
    message = (
        f"`policies` hold more than {MAX_POLICY_VALUES:,} values (keys and list items) "
        "together; a policy is a rule over an invite's fields, not a list of data"
    )
    return [FileProblem(path, *document.key_marks["policies"], message)]


def _read_rules(values: dict[str, Any], document: MarkedDict, path: str) -> Rules:
    """The rules of ``values`` (the config as plain values), its keys taken out of it."""
    written: list[dict[str, Any]] = values.pop("policies", None) or []
    levels: dict[str, Level] = dict(BUILT_IN)
    # A bare `off` is YAML 1.1's false: the config schema takes either.
    levels.update((name, level or "off") for name, level in values.pop("checks", {}).items())
    compiled: list[CompiledPolicy] = []
    problems: list[FileProblem] = []
    seen: dict[str, int] = {}
    located = document.located
    for index, item in enumerate(written):
        at = ("policies", index)
        name = item["name"]
        if name in seen:
            message = (
                f"policy `{escape(name)}` is already defined (item {seen[name] + 1} of "
                "`policies`); give each its own name"
            )
            problems.append(FileProblem(path, *located.mark((*at, "name")), message))
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
