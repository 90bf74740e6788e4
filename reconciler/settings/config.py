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

from reconciler.desired.files import DEFAULT_PATH
from reconciler.desired.rules import Rules
from reconciler.errors import ConfigError
from reconciler.safetext import escape
from reconciler.settings.config_file import find_config_file, read_config_file
from reconciler.settings.contract import Contract, check_contract
from reconciler.settings.environment import (
    ENV_VARS,
    TOKEN_AUTH_METHODS,
    check_secret_length,
    ci_variable,
    env_text,
    values_from_env,
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
        values = read_config_file(path)
        if not config_file and "paths" not in values and Path(path).parent != Path("."):
            # Found above the working directory: the project's invites are beside it.
            values["paths"] = (os.path.normpath(Path(path).parent / DEFAULT_PATH),)
        ci = ci_variable(env)
        if ci is not None and "base_url" in values and not env_text(env, ENV_VARS["base_url"]):
            # A pull request can change the file: it must not decide where the secret goes.
            del values["base_url"]
            settings = replace(settings, refused_base_url=(path, ci))
        settings = settings.with_values(values)
    return settings.with_values(values_from_env(env))
