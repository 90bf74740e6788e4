# Copyright: invite-reconciler maintainers
# MIT License (see the repository's pyproject.toml)
"""The invite-reconciler library, imported in-process behind a guarded import.

The modules never run the ``reconcile`` command: they call the service the command
calls (``reconciler.service``: the plan, the writes, the export entries), with Settings
loaded here as the command loads them, so a task compares, writes and redacts exactly
as the CLI does.
"""

from __future__ import annotations

import os
import re
import traceback

from ansible.module_utils.basic import env_fallback, missing_required_lib

LIBRARY = "invite-reconciler"
MIN_VERSION = "0.1.0"

try:
    import reconciler
    from reconciler import safetext
    from reconciler.settings.config import load_settings
except ImportError:
    HAS_LIBRARY = False
    IMPORT_ERROR = traceback.format_exc()
else:
    HAS_LIBRARY = True
    IMPORT_ERROR = None

# Option -> the variable the library reads it from: an option goes through the very
# conversion and checks its variable does (RECONCILER_PARALLELISM=1000 and
# parallelism: 1000 are refused alike).
SETTING_VARIABLES = {
    "base_url": "RECONCILER_BASE_URL",
    "client_id": "RECONCILER_CLIENT_ID",
    "client_secret": "RECONCILER_CLIENT_SECRET",
    "token_auth_method": "RECONCILER_TOKEN_AUTH_METHOD",
    "parallelism": "RECONCILER_PARALLELISM",
    "max_rate": "RECONCILER_MAX_RATE",
    "max_changes": "RECONCILER_MAX_CHANGES",
    "max_resends": "RECONCILER_MAX_RESENDS",
    "audit_log": "RECONCILER_AUDIT_LOG",
}


def connection_spec():
    """The options of doc_fragments/connection.py, with their environment fallbacks."""
    return dict(
        base_url=dict(type="str", fallback=(env_fallback, ["RECONCILER_BASE_URL"])),
        client_id=dict(type="str", fallback=(env_fallback, ["RECONCILER_CLIENT_ID"])),
        client_secret=dict(
            type="str", no_log=True, fallback=(env_fallback, ["RECONCILER_CLIENT_SECRET"])
        ),
        token_auth_method=dict(
            type="str",
            choices=["client_secret_post", "client_secret_basic"],
            fallback=(env_fallback, ["RECONCILER_TOKEN_AUTH_METHOD"]),
        ),
        config=dict(type="path"),
    )


def version_tuple(text):
    """(0, 1, 0) of "0.1.0", of "0.1.0rc1" and of "0.1.0.dev3": the release it leads to."""
    return tuple(int(part) for part in re.findall(r"\d+", text.split("+")[0])[:3])


def require_library(module):
    """Fail the task unless a recent enough library is importable; then tell the module
    every secret and token the library learns, so they are no-log values too."""
    if not HAS_LIBRARY:
        module.fail_json(msg=missing_required_lib(LIBRARY), exception=IMPORT_ERROR)
    found = getattr(reconciler, "__version__", "0")
    if version_tuple(found) < version_tuple(MIN_VERSION):
        module.fail_json(
            msg=f"{LIBRARY} {found} is installed on this host; "
            f"this collection needs {MIN_VERSION} or newer"
        )
    safetext.watch_secrets(module.no_log_values.add)


def module_settings(module):
    """One Settings through the library's own loading: the options as the variables they
    stand for, over the task's environment, over ``config``, over the defaults."""
    env = dict(os.environ)
    for option, variable in SETTING_VARIABLES.items():
        value = module.params.get(option)
        if value is not None and value != "":
            env[variable] = str(value)
    return load_settings(module.params.get("config"), env)


def shown(error):
    """An error's message as the CLI prints it: what a server said redacted, escaped."""
    return safetext.redact_and_escape_lines(str(error))
