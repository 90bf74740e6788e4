"""Settings: command-line options, then environment, then config file, then defaults.

Every setting is declared once, as a field of ``Settings`` (its type, default, whether
RECONCILER_<NAME> sets it, a number's bounds); ``ENV_VARS`` and ``NUMBER_SETTINGS`` are
read from those fields. Every numeric setting has one conversion, whichever source says it:
``load_settings`` converts the file's and the environment's values, ``SettingType`` an
option's, so RECONCILER_PARALLELISM=1000 is refused exactly as `--parallelism 1000` is.

What the environment says comes first below: the RECONCILER_* variables, the client
secret (or the file that holds it), and whether this runs under CI (``CI_MARKERS``).
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

import click

from reconciler.desired.files import DEFAULT_PATH
from reconciler.desired.rules import Rules
from reconciler.errors import ConfigError
from reconciler.files import open_regular
from reconciler.safetext import MIN_SECRET_LENGTH, escape, quote_value
from reconciler.settings.config_file import find_config_file, read_config_file
from reconciler.settings.contract import BASE_URL_VARIABLE, Contract, check_contract

SECRET_ENV = "RECONCILER_CLIENT_SECRET"
SECRET_FILE_ENV = "RECONCILER_CLIENT_SECRET_FILE"


# How the client authenticates at the token endpoint (RFC 6749 §2.3.1): the form
# fields of the interface document, or HTTP Basic, which every server must support.
TOKEN_AUTH_METHODS = ("client_secret_post", "client_secret_basic")


_SECRET_FILE_LIMIT = 64 * 1024


def check_secret_length(secret: str, name: str) -> None:
    """A secret too short to be told apart from ordinary words is refused at start."""
    if len(secret) < MIN_SECRET_LENGTH:
        raise ConfigError(
            f"{name} is shorter than {MIN_SECRET_LENGTH} characters: a secret that short "
            "could not be kept out of output (it would be found inside ordinary words, "
            "so it is never redacted) and is no real client secret; set the secret the "
            "platform issued"
        )


# What says a run is under CI (cli.md, "Where the secret may go"), erring on the safe
# side: `CI` set to anything but empty, `false` or `0`, or any of these set (not empty).
# docs/configuration.md lists the same table. A system that sets none (Concourse, Tekton,
# a cron job) is not seen: the docs say to set CI=true there.
CI_MARKERS: dict[str, tuple[str, ...]] = {
    "GitHub Actions": ("GITHUB_ACTIONS",),
    "GitLab CI/CD": ("GITLAB_CI",),
    "Azure Pipelines": ("TF_BUILD", "SYSTEM_TEAMFOUNDATIONCOLLECTIONURI"),
    "Jenkins": ("JENKINS_URL", "JENKINS_HOME"),
    "TeamCity": ("TEAMCITY_VERSION",),
    "CircleCI": ("CIRCLECI",),
    "Bitbucket Pipelines": ("BITBUCKET_BUILD_NUMBER", "BITBUCKET_COMMIT"),
    "Buildkite": ("BUILDKITE",),
    "Drone": ("DRONE",),
    "Woodpecker": ("CI_PIPELINE_NUMBER",),  # and CI=woodpecker
    "AWS CodeBuild": ("CODEBUILD_BUILD_ID", "CODEBUILD_BUILD_ARN"),
    "Google Cloud Build": ("BUILDER_OUTPUT",),
    "Travis CI": ("TRAVIS",),
    # None of these four sets `CI`; Jenkins may run without JENKINS_URL.
    "Bamboo": ("bamboo_buildKey", "bamboo_planKey"),
    "GoCD": ("GO_SERVER_URL", "GO_PIPELINE_NAME"),
    "Codefresh": ("CF_BUILD_ID",),
    "Harness CI": ("HARNESS_BUILD_ID",),
    "any that sets a build's generic variables": (
        "CONTINUOUS_INTEGRATION",
        "BUILD_NUMBER",
        "BUILD_ID",
    ),
}


def ci_variable(env: Mapping[str, str]) -> str | None:
    """What says this runs under CI (`CI=woodpecker`, `AWS CodeBuild: CODEBUILD_BUILD_ID
    is set`), None when nothing does. A marker's value is never shown."""
    value = env.get("CI", "").strip()
    if value.lower() not in ("", "false", "0"):
        return f"CI={escape(value[:40])}"
    for system, names in CI_MARKERS.items():
        for name in names:
            if env.get(name):
                return f"{system}: {name} is set"
    return None


def env_text(env: Mapping[str, str], name: str) -> str | None:
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


def secret_from_env(env: Mapping[str, str]) -> str | None:
    """The client secret, from its variable or the file its other variable names."""
    secret, secret_file = env_text(env, SECRET_ENV), env_text(env, SECRET_FILE_ENV)
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


class NumberSetting(NamedTuple):
    """A whole number or a number of seconds, with the bounds every source must respect."""

    kind: type  # int or float
    minimum: float
    maximum: float | None = None
    above_minimum: bool = False  # True: the minimum itself is not allowed
    unit: str = "seconds"  # what a number of the kind float counts, for messages and --help

    def describe(self) -> str:
        low = f"more than {self.minimum:g}" if self.above_minimum else f"at least {self.minimum:g}"
        return low if self.maximum is None else f"{low} and at most {self.maximum:g}"

    def convert(self, raw: Any, where: str) -> int | float:
        """``raw`` as this setting's type; ``where`` names the source, as in `--parallelism`."""
        shown = repr(raw) if len(str(raw)) <= 40 else f"{str(raw)[:40]!r}..."  # 5,000 digits
        if isinstance(raw, bool):  # YAML `true` is not a number of anything
            raise ConfigError(f"{where}: {shown} is not a number")
        whole = self.kind is int
        text = str(raw).strip()
        try:
            # ASCII, no `_`: int() and float() also read `٣` and `1_0`, which no one types.
            if not text.isascii() or "_" in text:
                raise ValueError(text)
            value: int | float = self.kind(text)
        except (TypeError, ValueError):
            said = "a whole number" if whole else f"a number of {self.unit}"
            raise ConfigError(f"{where}: {shown} is not {said}") from None
        if not whole and not math.isfinite(value):  # nan or inf: no wait could be bounded by it
            raise ConfigError(f"{where}: {shown} is not a finite number of {self.unit}")
        too_low = value <= self.minimum if self.above_minimum else value < self.minimum
        if too_low or (self.maximum is not None and value > self.maximum):
            raise ConfigError(f"{where}: {shown} must be {self.describe()}")
        return value


MIN_MAX_RATE = 0.2  # requests per second: the pacer's MIN_RATE


def _env(*bounds: Any, env: bool = True, **more: Any) -> dict[str, Any]:
    """A setting's metadata: whether RECONCILER_<NAME> sets it too, and a number's
    ``NumberSetting`` (none without ``bounds``)."""
    return {"env": env, "rule": NumberSetting(*bounds, **more) if bounds else None}


if TYPE_CHECKING:  # generic from click 8.2; at run time the plain class, for click 8.1
    _ParamType = click.ParamType[float, Any]
else:
    _ParamType = click.ParamType


class SettingType(_ParamType):
    """A click type that converts an option exactly as the environment and file are."""

    def __init__(self, setting: str) -> None:
        self.setting = setting
        self.rule = NUMBER_SETTINGS[setting]
        self.name = "integer" if self.rule.kind is int else self.rule.unit

    def get_metavar(self, param: click.Parameter, ctx: click.Context | None = None) -> str:
        return "N" if self.rule.kind is int else "RATE"  # the options: counts, and --max-rate

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        where = param.opts[-1] if param is not None and param.opts else self.setting
        try:
            return self.rule.convert(value, where)
        except ConfigError as exc:
            self.fail(str(exc).split(": ", 1)[1], param, ctx)


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
    """Every setting, declared once: its type and default, and in its metadata whether
    RECONCILER_<NAME> sets it too (``_env``) and the bounds of a number (``rule``)."""

    base_url: str | None = field(default=None, metadata=_env())
    # What set base_url, for the advice of a failure to reach it ("check ..."): the
    # variable, or the config file's key.
    base_url_source: str = BASE_URL_VARIABLE
    client_id: str | None = field(default=None, metadata=_env())
    client_secret: str | None = field(default=None, repr=False)  # SECRET_ENV, SECRET_FILE_ENV
    token_auth_method: str = field(default=TOKEN_AUTH_METHODS[0], metadata=_env())
    contract: Contract = field(default_factory=Contract)  # its scope: RECONCILER_SCOPE
    paths: tuple[str, ...] = (DEFAULT_PATH,)
    # None: nobody chose a number, so the in-flight limit adapts (reconciler.api.capacity).
    parallelism: int | None = field(default=None, metadata=_env(int, 1, 256))
    max_parallelism: int = field(default=64, metadata=_env(int, 1, 256))
    # Bounded above as well: a wait of 1e10 s is no bound, and overflows the clock's
    # arithmetic (OverflowError) long before it would end.
    timeout: float = field(default=30.0, metadata=_env(float, 0, 3600, above_minimum=True))
    max_attempts: int = field(default=5, metadata=_env(int, 1, 20, env=False))
    retry_max_seconds: float = field(default=60.0, metadata=_env(float, 0, 86400, env=False))
    # API answers are a few KiB.
    max_response_bytes: int = field(default=4 * 1024 * 1024, metadata=_env(int, 1024))
    # Requests per second at most, for a gateway whose limit the user knows (a burst
    # blocker refuses for seconds once crossed); None: learned from the answers alone.
    # At least the pacer's own least rate (api.capacity.MIN_RATE): below it a run, a CI
    # job's with a reconciler.yaml a pull request can edit, would crawl for hours.
    max_rate: float | None = field(
        default=None,
        metadata=_env(float, MIN_MAX_RATE, 100000, unit="requests per second"),
    )
    max_changes: int | None = field(default=None, metadata=_env(int, 0))
    max_resends: int | None = field(default=None, metadata=_env(int, 0))
    audit_log: str | None = field(default=None, metadata=_env())
    schema_ref: str = "../schemas/invites.schema.json"
    # Set by code only (the Ansible module's options), never by the file or a variable:
    # a CA bundle or hashed directory trusted in place of REQUESTS_CA_BUNDLE's, and
    # whether the server's certificate is checked at all.
    ca_path: str | None = None
    validate_certs: bool = True
    # Under CI, the config file that set base_url (refused: see load_settings) and the
    # variable that says CI; None otherwise.
    refused_base_url: tuple[str, str] | None = None
    # `policies` and `checks` (reconciler.settings.config_file): what validate checks beyond
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
        names = (ENV_VARS["base_url"], ENV_VARS["client_id"], SECRET_ENV)
        given = (base_url, client_id, secret)
        missing = [name for name, value in zip(names, given, strict=True) if not value]
        raise ConfigError(
            f"missing {', '.join(missing)}: set {'it' if len(missing) == 1 else 'them'} in "
            "the environment (base_url and client_id may also go in reconciler.yaml), "
            "or try the tool with --sandbox"
        )


# The table the fields declare: the variable of each setting the environment sets, and
# the one conversion of each number, whichever source says it.
ENV_VARS = {
    name: f"RECONCILER_{name.upper()}"
    for name in ("scope", *(f.name for f in fields(Settings) if f.metadata.get("env")))
}
NUMBER_SETTINGS: dict[str, NumberSetting] = {
    f.name: f.metadata["rule"] for f in fields(Settings) if f.metadata.get("rule")
}


def load_settings(config_file: str | None, env: Mapping[str, str] | None = None) -> Settings:
    """Settings from the config file (if any) overlaid with the environment."""
    env = os.environ if env is None else env
    path = config_file or find_config_file()
    settings = _from_file(path, env, found=not config_file) if path else Settings()
    # An empty variable changes nothing; numbers are converted as the file's are.
    values = {key: raw for key, name in ENV_VARS.items() if (raw := env_text(env, name))}
    method = values.get("token_auth_method", TOKEN_AUTH_METHODS[0])
    if method not in TOKEN_AUTH_METHODS:
        raise ConfigError(
            f"{ENV_VARS['token_auth_method']}: {quote_value(method[:40])} must be "
            f"{' or '.join(TOKEN_AUTH_METHODS)}"
        )
    values = _numbers_converted(values, ENV_VARS)
    if "base_url" in values:
        values["base_url_source"] = BASE_URL_VARIABLE
    secret = secret_from_env(env)
    if secret:
        values["client_secret"] = secret
    return settings.with_values(values)


def _from_file(path: str, env: Mapping[str, str], *, found: bool) -> Settings:
    """The settings of the config file; ``found``: looked for, not named by the user."""
    values, where = read_config_file(path)
    if found and "paths" not in values and Path(path).parent != Path("."):
        # Found above the working directory: the project's invites are beside it.
        values["paths"] = (os.path.normpath(Path(path).parent / DEFAULT_PATH),)
    refused = None
    ci = ci_variable(env)
    if ci is not None and "base_url" in values and not env_text(env, ENV_VARS["base_url"]):
        # A pull request can change the file: it must not decide where the secret goes.
        del values["base_url"]
        refused = (path, ci)
    if "base_url" in values:
        values["base_url_source"] = f"base_url in {escape(path)}"
    return Settings(refused_base_url=refused).with_values(_numbers_converted(values, where))


def _numbers_converted(values: dict[str, Any], where: Mapping[str, str]) -> dict[str, Any]:
    """``values`` with each numeric setting converted; ``where`` names each one's source."""
    return {
        key: NUMBER_SETTINGS[key].convert(value, where[key]) if key in NUMBER_SETTINGS else value
        for key, value in values.items()
    }
