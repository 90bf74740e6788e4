"""Settings: command-line options, then environment, then config file, then defaults.

Every source goes through the same conversions (reconciler.settings.values), so
RECONCILER_PARALLELISM=1000 is refused exactly as `--parallelism 1000` is.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, NamedTuple

from reconciler.desired.rules import Rules
from reconciler.desired.state import DEFAULT_PATH
from reconciler.errors import ConfigError, FileProblem, InputError
from reconciler.git import up_to_top
from reconciler.resources import resource_path
from reconciler.safefile import open_regular
from reconciler.safetext import MIN_SECRET_LENGTH, escape, quote_value
from reconciler.schema.check import validate_document
from reconciler.settings.contract import Contract, check_contract, field_name_problems
from reconciler.settings.policies import read_rules, too_large
from reconciler.settings.values import NUMBER_SETTINGS
from reconciler.yamlload.source import MarkedDict, decode_source, load_yaml, to_plain

DEFAULT_CONFIG_FILE = "reconciler.yaml"

_SECRET_KEYS = {"client_secret", "secret", "access_token", "token", "password", "api_key"}
# Settings read from the environment, and the variable each is read from.
ENV_VARS = {
    "base_url": "RECONCILER_BASE_URL",
    "client_id": "RECONCILER_CLIENT_ID",
    "scope": "RECONCILER_SCOPE",
    "token_auth_method": "RECONCILER_TOKEN_AUTH_METHOD",
    "audit_log": "RECONCILER_AUDIT_LOG",
    "parallelism": "RECONCILER_PARALLELISM",
    "max_changes": "RECONCILER_MAX_CHANGES",
    "max_resends": "RECONCILER_MAX_RESENDS",
    "timeout": "RECONCILER_TIMEOUT",
    "max_response_bytes": "RECONCILER_MAX_RESPONSE_BYTES",
    "max_parallelism": "RECONCILER_MAX_PARALLELISM",
}
SECRET_ENV = "RECONCILER_CLIENT_SECRET"
SECRET_FILE_ENV = "RECONCILER_CLIENT_SECRET_FILE"
# How the client authenticates at the token endpoint (RFC 6749 §2.3.1): the form
# fields of the interface document, or HTTP Basic, which every server must support.
TOKEN_AUTH_METHODS = ("client_secret_post", "client_secret_basic")
_SECRET_FILE_LIMIT = 64 * 1024
_CONFIG_FILE_LIMIT = 1024 * 1024


def check_secret_length(secret: str, name: str) -> None:
    """A secret too short to be told apart from ordinary words is refused at start."""
    if len(secret) < MIN_SECRET_LENGTH:
        raise ConfigError(
            f"{name} is shorter than {MIN_SECRET_LENGTH} characters: a secret that short "
            "could not be kept out of output (it would be found inside ordinary words, "
            "so it is never redacted) and is no real client secret; set the secret the "
            "platform issued"
        )


class Credentials(NamedTuple):
    """What a run needs to talk to the API at all, resolved: ``Settings.credentials``."""

    base_url: str
    client_id: str
    client_secret: str

    def __repr__(self) -> str:  # never the secret
        return f"Credentials(base_url={self.base_url!r}, client_id={self.client_id!r})"


# Settings that are parts of the contract: the file and the environment name them
# one by one (`scope`, `token_path`, ...), Settings holds them as one Contract.
_CONTRACT_PARTS = frozenset(Contract._fields)


@dataclass(frozen=True)
class Settings:
    base_url: str | None = None
    client_id: str | None = None
    client_secret: str | None = field(default=None, repr=False)
    token_auth_method: str = TOKEN_AUTH_METHODS[0]
    contract: Contract = field(default_factory=Contract)
    paths: tuple[str, ...] = (DEFAULT_PATH,)
    # None: nobody chose a number, so the in-flight limit adapts (reconciler.api.capacity.limiter).
    parallelism: int | None = None
    max_parallelism: int = 64
    timeout: float = 30.0
    max_attempts: int = 5
    retry_max_seconds: float = 60.0
    max_response_bytes: int = 4 * 1024 * 1024  # API answers are a few KiB
    max_changes: int | None = None
    max_resends: int | None = None
    audit_log: str | None = None
    schema_ref: str = "../schemas/invites.schema.json"
    # Under CI, the config file that set base_url (refused: see load_settings) and the
    # variable that says CI; None otherwise.
    refused_base_url: tuple[str, str] | None = None
    # `policies` and `checks` (reconciler.settings.policies): what validate checks beyond
    # the schema. The default: the built-in checks as warnings, no policy.
    rules: Rules = field(default_factory=Rules)

    def with_values(self, values: Mapping[str, Any]) -> Settings:
        """``values`` by the names the file and the environment use, the contract's among them."""
        parts = {k: v for k, v in values.items() if k in _CONTRACT_PARTS}
        rest = {k: v for k, v in values.items() if k not in _CONTRACT_PARTS}
        return replace(self, contract=self.contract._replace(**parts), **rest)

    def with_overrides(self, **overrides: Any) -> Settings:
        return self.with_values({k: v for k, v in overrides.items() if v is not None})

    def with_contract(self, contract: Contract) -> Settings:
        return replace(self, contract=contract)

    def credentials(self) -> Credentials:
        """Where to send requests and who sends them, all three set; a ConfigError naming
        each one missing otherwise (and the contract's field names checked)."""
        base_url, client_id, secret = self.base_url, self.client_id, self.client_secret
        if secret:  # set in code, not read from the environment
            check_secret_length(secret, "the client secret")
        check_contract(self.contract)
        if base_url and client_id and secret:
            return Credentials(base_url, client_id, secret)
        if not base_url and self.refused_base_url is not None:
            path, ci = self.refused_base_url
            raise ConfigError(
                f"{escape(path)} sets base_url, which under CI ({ci}) is never taken from a "
                "file in the repository: a pull request can change that file, and base_url "
                "decides where the client secret is sent. Set RECONCILER_BASE_URL in the CI "
                "settings (a variable of the project, not a file); nothing was sent"
            )
        missing = [
            env
            for env, value in (
                ("RECONCILER_BASE_URL", base_url),
                ("RECONCILER_CLIENT_ID", client_id),
                ("RECONCILER_CLIENT_SECRET", secret),
            )
            if not value
        ]
        raise ConfigError(
            f"missing {', '.join(missing)}: set {'it' if len(missing) == 1 else 'them'} in "
            "the environment (base_url and client_id may also go in reconciler.yaml), "
            "or try the tool with --sandbox"
        )


def load_settings(config_file: str | None, env: Mapping[str, str] | None = None) -> Settings:
    """Settings from the config file (if any) overlaid with the environment."""
    env = os.environ if env is None else env
    settings = Settings()
    path = config_file or find_config_file()
    if path:
        values = _read_config_file(path)
        if not config_file and "paths" not in values and Path(path).parent != Path("."):
            # Found above the working directory: the project's invites are beside it.
            values["paths"] = (os.path.normpath(Path(path).parent / DEFAULT_PATH),)
        ci = ci_variable(env)
        if ci is not None and "base_url" in values and not _env_text(env, ENV_VARS["base_url"]):
            # A pull request can change the file: it must not decide where the secret goes.
            del values["base_url"]
            settings = replace(settings, refused_base_url=(path, ci))
        settings = settings.with_values(values)
    return settings.with_values(_from_env(env))


def find_config_file() -> str | None:
    """reconciler.yaml in the working directory, else the nearest directory above it up to
    the repository's top level (pre-commit's and editorconfig's way: a run from inside
    invites/ finds the project's file); relative to the working directory, so that the
    paths it sets, and every message, read from here."""
    for directory in up_to_top():
        candidate = directory / DEFAULT_CONFIG_FILE
        if candidate.is_file():
            return os.path.relpath(candidate)
    return None


CI_VARIABLES = ("CI", "GITHUB_ACTIONS", "GITLAB_CI", "TF_BUILD")  # `true` or `1`
# Jenkins and TeamCity set no CI variable of that kind; each sets one of its own.
CI_PRESENT = ("JENKINS_URL", "TEAMCITY_VERSION")


def ci_variable(env: Mapping[str, str]) -> str | None:
    """`NAME=value` of the variable that says this runs under CI (`true` or `1`, in any
    case; Jenkins' and TeamCity's own when set), None when none does."""
    for name in CI_VARIABLES:
        value = env.get(name, "")
        if value.strip().lower() in ("true", "1"):
            return f"{name}={escape(value.strip())}"
    for name in CI_PRESENT:
        if env.get(name, "").strip():
            return f"{name} (set)"
    return None


def _read_config_file(path: str) -> dict[str, Any]:
    try:
        with open_regular(path) as stream:  # a FIFO or device: refused, never waited on
            data = stream.read(_CONFIG_FILE_LIMIT + 1)  # bounded: --config /dev/zero ends
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read config file: {exc.strerror}") from None
    if len(data) > _CONFIG_FILE_LIMIT:
        raise ConfigError(
            f"{path}: larger than {_CONFIG_FILE_LIMIT // 1024} KiB; a config file holds a few "
            "settings (is this the right file?)"
        )
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
    names = field_name_problems(values.get("field_names", {}))
    if names:
        raise InputError(
            [
                FileProblem(
                    path,
                    *document.located.mark(("field_names", name)),
                    f"`field_names.{escape(name)}`: {why}",
                )
                for name, why in names
            ]
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


def _from_env(env: Mapping[str, str]) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for key, name in ENV_VARS.items():
        raw = _env_text(env, name)
        if not raw:  # an empty variable changes nothing
            continue
        rule = NUMBER_SETTINGS.get(key)
        values[key] = rule.convert(raw, name) if rule else raw
        if key == "token_auth_method" and raw not in TOKEN_AUTH_METHODS:
            raise ConfigError(
                f"{name}: {quote_value(raw[:40])} must be {' or '.join(TOKEN_AUTH_METHODS)}"
            )
    secret = _secret_from_env(env)
    if secret:
        values["client_secret"] = secret
    return values


def _env_text(env: Mapping[str, str], name: str) -> str | None:
    """The variable's value, refused when it is not UTF-8: Python keeps such bytes as
    lone surrogates, which no HTTP header, form or signature key can carry."""
    value = env.get(name)
    if value:
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            # Never shown: it may be the secret.
            raise ConfigError(f"{name} is not UTF-8 text; set it again") from None
    return value


def _secret_from_env(env: Mapping[str, str]) -> str | None:
    secret, secret_file = _env_text(env, SECRET_ENV), _env_text(env, SECRET_FILE_ENV)
    if secret and secret_file:
        raise ConfigError(
            f"both {SECRET_ENV} and {SECRET_FILE_ENV} are set; "
            "set only one, so it is clear which secret is used"
        )
    if secret:
        check_secret_length(secret, SECRET_ENV)
        return secret
    if not secret_file:
        return None
    shown = f"{SECRET_FILE_ENV}={escape(secret_file)}"
    try:
        with open_regular(secret_file) as handle:  # a secret is short; never read a whole disk
            secret = handle.read(_SECRET_FILE_LIMIT).decode("utf-8").strip()
    except (OSError, UnicodeDecodeError) as exc:
        reason = getattr(exc, "strerror", None) or "not UTF-8 text"
        raise ConfigError(f"{shown}: cannot read: {reason}") from None
    if not secret:
        raise ConfigError(f"{shown}: file is empty")
    check_secret_length(secret, f"the secret in {shown}")
    return secret
