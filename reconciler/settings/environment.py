"""What the environment says: the RECONCILER_* variables, the client secret (or the file
that holds it), and whether this runs under CI."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from reconciler.errors import ConfigError
from reconciler.files import open_regular
from reconciler.safetext import MIN_SECRET_LENGTH, escape, quote_value

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
    "max_rate": "RECONCILER_MAX_RATE",
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


def values_from_env(env: Mapping[str, str]) -> dict[str, Any]:
    """The settings the RECONCILER_* variables set, as written (numbers too: they are
    converted as the file's are), the client secret aside (``secret_from_env``)."""
    values: dict[str, Any] = {}
    for key, name in ENV_VARS.items():
        raw = env_text(env, name)
        if not raw:  # an empty variable changes nothing
            continue
        if key == "token_auth_method" and raw not in TOKEN_AUTH_METHODS:
            raise ConfigError(
                f"{name}: {quote_value(raw[:40])} must be {' or '.join(TOKEN_AUTH_METHODS)}"
            )
        values[key] = raw
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
