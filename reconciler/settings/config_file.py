"""reconciler.yaml: found from the working directory up to the repository's top, read
within bounds (never a FIFO or a device), checked against its schema, and its paths
made relative to where the command runs."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from reconciler.desired.files import CONFIG_FILE
from reconciler.errors import ConfigError, FileProblem, InputError
from reconciler.git import up_to_top
from reconciler.resources import resource_path
from reconciler.safefile import TooLarge, read_regular
from reconciler.safetext import escape
from reconciler.schema.check import validate_document
from reconciler.settings.contract import contract_problems
from reconciler.settings.policies import read_rules, too_large
from reconciler.settings.values import NUMBER_SETTINGS
from reconciler.yamlload.source import MarkedDict, decode_source, load_yaml, to_plain

DEFAULT_CONFIG_FILE = CONFIG_FILE  # a directory of invites read whole skips it


_SECRET_KEYS = {"client_secret", "secret", "access_token", "token", "password", "api_key"}


_CONFIG_FILE_LIMIT = 1024 * 1024


def find_config_file() -> str | None:
    """reconciler.yaml in the working directory, else the nearest directory above it up to
    the repository's top level (pre-commit's and editorconfig's way: a run from inside
    invites/ finds the project's file); relative to the working directory, so that the
    paths it sets, and every message, read from here."""
    for directory in up_to_top():
        candidate = directory / DEFAULT_CONFIG_FILE
        # Anything by that name (a FIFO, a device, a dangling link, a directory) is the
        # file meant: read_config_file refuses it, never skipped for defaults or one above.
        if os.path.lexists(candidate):
            return os.path.relpath(candidate)
    return None


def read_config_file(path: str) -> dict[str, Any]:
    try:
        data = read_regular(path, _CONFIG_FILE_LIMIT)  # a FIFO, a device: refused at once
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read config file: {exc.strerror}") from None
    except TooLarge:
        raise ConfigError(
            f"{path}: larger than {_CONFIG_FILE_LIMIT // 1024} KiB; a config file holds a few "
            "settings (is this the right file?)"
        ) from None
    text, problems = decode_source(data, path)
    document, parse_problems = load_yaml(text, path) if text is not None else (None, [])
    problems += parse_problems
    if document is None and not problems:
        return {}
    if isinstance(document, MarkedDict):
        problems += _secret_keys(document, path)
        if not problems:
            problems += too_large(document, path)  # before the meta-schema judges them
        if not problems:
            schema = resource_path("schemas/config.schema.json")
            problems += validate_document(document, path, schema)
    elif not problems:
        problems.append(FileProblem(path, 1, 1, "config file must be a mapping of settings"))
    if problems or not isinstance(document, MarkedDict):  # the second: a problem is listed
        raise InputError(problems)
    values: dict[str, Any] = to_plain(document)
    if "policies" in values or "checks" in values:
        values["rules"] = read_rules(values, document, path)
    contract = contract_problems(values)  # paths and field names, at their values
    if contract:
        raise InputError(
            [FileProblem(path, *document.located.mark(at), why) for at, why in contract]
        )
    for key, rule in NUMBER_SETTINGS.items():
        if key in values:
            line, column = document.key_marks[key]
            values[key] = rule.convert(values[key], f"{path}:{line}:{column}: {key}")
    base = Path(path).parent
    if "paths" in values:
        paths = [values["paths"]] if isinstance(values["paths"], str) else values["paths"]
        values["paths"] = tuple(_relative_to(base, p) for p in paths)
        outside = _paths_outside(values["paths"], base)
        if outside:
            line, column = document.key_marks["paths"]
            raise InputError([FileProblem(path, line, column, outside)])
    if "audit_log" in values:
        values["audit_log"] = _relative_to(base, values["audit_log"])
    return values


def _paths_outside(paths: tuple[str, ...], base: Path) -> str | None:
    """Why a path of ``paths`` is refused: it leaves the config file's repository (or its
    directory, outside git), symbolic links followed, as invite files may not; else None."""
    from reconciler.git import git_top  # runs git: only for a config that sets paths

    directory = os.path.abspath(base)
    top = git_top(directory) if os.path.isdir(directory) else None
    boundary = os.path.realpath(top or directory)
    where = "the repository" if top else "the config file's directory"
    for one in paths:
        real = os.path.realpath(one)
        if real != boundary and not real.startswith(boundary.rstrip(os.sep) + os.sep):
            return (
                f"`paths`: {escape(one)} is outside {where} ({escape(boundary)}); invite "
                "files are read only inside it, as for symbolic links (copy them in instead)"
            )
    return None


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


def _relative_to(base: Path, value: str) -> str:
    candidate = Path(value)
    return value if candidate.is_absolute() else os.path.normpath(base / candidate)
