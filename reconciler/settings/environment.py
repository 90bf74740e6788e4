"""What the environment says: the RECONCILER_* variables, the client secret (or the file
that holds it), and whether this runs under CI."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from reconciler.errors import ConfigError
from reconciler.safefile import open_regular
from reconciler.safetext import MIN_SECRET_LENGTH, escape, quote_value
from reconciler.settings.values import NUMBER_SETTINGS

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


def check_secret_length(secret: str, name: str) -> None:
    """A secret too short to be told apart from ordinary words is refused at start."""
    if len(secret) < MIN_SECRET_LENGTH:
        raise ConfigError(
            f"{name} is shorter than {MIN_SECRET_LENGTH} characters: a secret that short "
            "could not be kept out of output (it would be found inside ordinary words, "
            "so it is never redacted) and is no real client secret; set the secret the "
            "platform issued"
        )


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


def values_from_env(env: Mapping[str, str]) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for key, name in ENV_VARS.items():
        raw = env_text(env, name)
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


def _secret_from_env(env: Mapping[str, str]) -> str | None:
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
