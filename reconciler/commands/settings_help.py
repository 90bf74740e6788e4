"""What a command's --help says of the settings it reads: the environment variables and
the reconciler.yaml keys, and which wins."""

from __future__ import annotations

from reconciler.settings.environment import ENV_VARS, SECRET_ENV, SECRET_FILE_ENV

_API_SETTINGS = (
    "base_url",
    "client_id",
    "scope",
    "token_auth_method",
    "parallelism",
    "max_parallelism",
    "max_rate",
    "timeout",
    "max_response_bytes",
)


_API_FILE_ONLY = ("max_attempts", "retry_max_seconds", "token_path", "*_invite_path", "field_names")


def settings_help(
    *,
    api: bool,
    reads_paths: bool = False,
    extra: tuple[str, ...] = (),
    other_env: tuple[str, ...] = (),
) -> str:
    """The epilog of a command's --help: the environment and reconciler.yaml settings it reads."""
    keys = [*(_API_SETTINGS if api else ()), *extra]
    env = [ENV_VARS[key] for key in keys if key in ENV_VARS]
    if api:
        env.insert(2, f"{SECRET_ENV} (or {SECRET_FILE_ENV})")
    settings = [*(["paths"] if reads_paths else []), *keys, *(_API_FILE_ONLY if api else ())]
    lines = []
    if env or other_env:
        lines.append("Environment: " + ", ".join([*env, *other_env]) + ".")
    lines.append("reconciler.yaml (or --config): " + ", ".join(settings) + ".")
    if api:
        lines.append("Options win over the environment, which wins over the file.")
    return "\n\n".join(lines)


RUN_ENV = ("NO_COLOR", "TERM", "GITHUB_ACTIONS", "GITHUB_STEP_SUMMARY")
