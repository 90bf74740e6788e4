"""Settings: command-line options, then environment, then config file, then defaults."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from reconciler.desired import DEFAULT_PATH
from reconciler.errors import ConfigError, InputError, SourceError
from reconciler.resources import resource_path
from reconciler.schema import validate_document
from reconciler.yaml_source import MarkedDict, decode_source, load_yaml, to_plain

DEFAULT_CONFIG_FILE = "reconciler.yaml"
DEFAULT_SCOPE = "kyb:invites:read kyb:invites:write"
INVITE_PATH = "/public-api/v1/kyb/invites/{inviteId}"
UPDATABLE_FIELDS = ("name", "email", "phone", "primaryContact", "groups", "addOns", "attachments")


class _DefaultParallelism(int):
    """The default parallelism: a plain 16 to every reader, and a mark that nobody chose it,
    so the in-flight limit adapts from 16 up to ``max_parallelism`` (see limiter.py)."""


DEFAULT_PARALLELISM = _DefaultParallelism(16)
_SECRET_KEYS = {"client_secret", "secret", "access_token", "token", "password", "api_key"}


@dataclass(frozen=True)
class Settings:
    base_url: str | None = None
    client_id: str | None = None
    client_secret: str | None = field(default=None, repr=False)
    scope: str = DEFAULT_SCOPE
    paths: tuple[str, ...] = (DEFAULT_PATH,)
    parallelism: int = DEFAULT_PARALLELISM
    max_parallelism: int = 64
    timeout: float = 30.0
    max_attempts: int = 5
    retry_max_seconds: float = 60.0
    max_changes: int | None = None
    audit_log: str | None = None
    schema_ref: str = "../schemas/invites.schema.json"
    token_path: str = "/oauth/token"
    get_invite_path: str = INVITE_PATH
    update_invite_path: str = INVITE_PATH
    resend_invite_path: str = INVITE_PATH + "/resend"
    field_names: Mapping[str, str] = field(default_factory=dict)

    def wire_name(self, canonical: str) -> str:
        return self.field_names.get(canonical, canonical)

    def with_overrides(self, **overrides: Any) -> Settings:
        return replace(self, **{k: v for k, v in overrides.items() if v is not None})

    def require_credentials(self) -> None:
        missing = [
            env
            for env, value in (
                ("RECONCILER_BASE_URL", self.base_url),
                ("RECONCILER_CLIENT_ID", self.client_id),
                ("RECONCILER_CLIENT_SECRET", self.client_secret),
            )
            if not value
        ]
        if missing:
            raise ConfigError(
                f"missing {', '.join(missing)}: set {'it' if len(missing) == 1 else 'them'} in "
                "the environment (base_url and client_id may also go in reconciler.yaml), "
                "or try the tool with --sandbox"
            )


def parallelism_is_fixed(settings: Settings) -> bool:
    """Whether parallelism was set by an option, the environment or the config file."""
    return not isinstance(settings.parallelism, _DefaultParallelism)


def load_settings(config_file: str | None, env: Mapping[str, str] | None = None) -> Settings:
    """Settings from the config file (if any) overlaid with the environment."""
    env = os.environ if env is None else env
    settings = Settings()
    path = config_file or (DEFAULT_CONFIG_FILE if Path(DEFAULT_CONFIG_FILE).is_file() else None)
    if path:
        settings = replace(settings, **_read_config_file(path))
    return replace(settings, **_from_env(env))


def _read_config_file(path: str) -> dict[str, Any]:
    file = Path(path)
    try:
        data = file.read_bytes()
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read config file: {exc.strerror}") from None
    text, problems = decode_source(data, path)
    document, parse_problems, _ = load_yaml(text, path) if text is not None else (None, [], None)
    problems += parse_problems
    if document is None and not problems:
        return {}
    if not problems and not isinstance(document, MarkedDict):
        problems.append(SourceError(path, 1, 1, "config file must be a mapping of settings"))
    if isinstance(document, MarkedDict):
        problems += _secret_keys(document, path)
        if not problems:
            schema = resource_path("schemas/config.schema.json")
            problems += validate_document(document, path, schema)
    if problems:
        raise InputError(problems)
    values = to_plain(document)
    base = file.parent
    if "paths" in values:
        paths = [values["paths"]] if isinstance(values["paths"], str) else values["paths"]
        values["paths"] = tuple(_relative_to(base, p) for p in paths)
    if "audit_log" in values:
        values["audit_log"] = _relative_to(base, values["audit_log"])
    return values


def _secret_keys(document: MarkedDict, path: str) -> list[SourceError]:
    return [
        SourceError(
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


def _from_env(env: Mapping[str, str]) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for name, key in (
        ("RECONCILER_BASE_URL", "base_url"),
        ("RECONCILER_CLIENT_ID", "client_id"),
        ("RECONCILER_SCOPE", "scope"),
        ("RECONCILER_AUDIT_LOG", "audit_log"),
    ):
        if env.get(name):
            values[key] = env[name]
    for name, key in (
        ("RECONCILER_PARALLELISM", "parallelism"),
        ("RECONCILER_MAX_CHANGES", "max_changes"),
        ("RECONCILER_MAX_PARALLELISM", "max_parallelism"),
    ):
        if env.get(name):
            values[key] = _env_int(name, env[name], minimum=0 if key == "max_changes" else 1)
    if values.get("max_parallelism", 0) > 256:
        raw = env["RECONCILER_MAX_PARALLELISM"]
        raise ConfigError(f"RECONCILER_MAX_PARALLELISM={raw!r} must be at most 256")
    if env.get("RECONCILER_TIMEOUT"):
        values["timeout"] = _env_float("RECONCILER_TIMEOUT", env["RECONCILER_TIMEOUT"])
    secret = _secret_from_env(env)
    if secret:
        values["client_secret"] = secret
    return values


def _secret_from_env(env: Mapping[str, str]) -> str | None:
    if env.get("RECONCILER_CLIENT_SECRET"):
        return env["RECONCILER_CLIENT_SECRET"]
    secret_file = env.get("RECONCILER_CLIENT_SECRET_FILE")
    if not secret_file:
        return None
    try:
        secret = Path(secret_file).read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as exc:
        reason = getattr(exc, "strerror", None) or "not UTF-8 text"
        raise ConfigError(
            f"RECONCILER_CLIENT_SECRET_FILE={secret_file}: cannot read: {reason}"
        ) from None
    if not secret:
        raise ConfigError(f"RECONCILER_CLIENT_SECRET_FILE={secret_file}: file is empty")
    return secret


def _env_int(name: str, raw: str, minimum: int) -> int:
    try:
        value = int(raw)
    except ValueError:
        raise ConfigError(f"{name}={raw!r} is not a whole number") from None
    if value < minimum:
        raise ConfigError(f"{name}={raw!r} must be at least {minimum}")
    return value


def _env_float(name: str, raw: str) -> float:
    try:
        value = float(raw)
    except ValueError:
        raise ConfigError(f"{name}={raw!r} is not a number of seconds") from None
    if value <= 0:
        raise ConfigError(f"{name}={raw!r} must be more than 0")
    return value
