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
import warnings
from dataclasses import replace

from ansible.module_utils.basic import env_fallback, missing_required_lib

LIBRARY = "invite-reconciler"
MIN_VERSION = "0.1.0"

try:
    import urllib3

    import reconciler
    from reconciler import safetext
    from reconciler.api.network import parse_base_url
    from reconciler.errors import ConfigError
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
    "timeout": "RECONCILER_TIMEOUT",
}

# The options a run cannot do without, in the order a message names them.
CREDENTIALS = ("base_url", "client_id", "client_secret")

# The CLI's words for what a task sets with an option: the library's advice (check,
# set, use RECONCILER_X or --flag) in the task's words, so a task that set base_url is
# never told to check RECONCILER_BASE_URL. Applied in this order, each as written.
_IN_ANSIBLE_WORDS = (
    ("point REQUESTS_CA_BUNDLE at its certificate", "set ca_path to its certificate"),
    # reconciler.api.network (connection, name resolution, a refused base URL) and
    # reconciler.api.auth (the token request refused: 404, unsupported_grant_type, ...).
    ("check RECONCILER_BASE_URL", "check base_url"),
    ("and RECONCILER_BASE_URL", "and base_url"),
    ("; set RECONCILER_BASE_URL", "; set base_url"),
    # reconciler.settings.config: a config file's base_url, refused under CI.
    (
        "Set RECONCILER_BASE_URL in the CI settings (a variable of the project, not a file)",
        "Set base_url on the task (or RECONCILER_BASE_URL in the CI settings: a variable "
        "of the project, not a file)",
    ),
    # auth: invalid_client, 401; network: user info in base_url; online: a read-only grant.
    ("RECONCILER_CLIENT_ID and RECONCILER_CLIENT_SECRET", "client_id and client_secret"),
    ("), RECONCILER_CLIENT_ID and token_path", "), client_id and token_path"),
    (", or RECONCILER_TOKEN_AUTH_METHOD=client_secret_basic)", ")"),
    (", or RECONCILER_TOKEN_AUTH_METHOD=client_secret_post)", ")"),
    # reconciler.api.exchange and exceptions: a gateway that blocks a burst.
    (
        "with --parallelism 1, or with --max-rate (RECONCILER_MAX_RATE, setting max_rate) below",
        "with parallelism: 1, or with max_rate below",
    ),
    ("run again with --max-rate below its limit", "run again with max_rate below its limit"),
    # reconciler.settings.config_file: what a committed config file may not hold.
    (
        "with --audit-log or RECONCILER_AUDIT_LOG, which a pull request cannot set",
        "with the task's audit_log, which a pull request cannot set",
    ),
    (
        "set RECONCILER_CLIENT_SECRET (or RECONCILER_CLIENT_SECRET_FILE) instead",
        'set client_secret on the task instead (from Ansible Vault: client_secret: "{{ '
        'vault_reconciler_secret }}"; or RECONCILER_CLIENT_SECRET_FILE)',
    ),
)


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
        ca_path=dict(type="path"),
        validate_certs=dict(type="bool", default=True),
        timeout=dict(type="float"),
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
    stand for, over the task's environment, over ``config``, over the defaults. A problem
    names the option (``parallelism``), never the variable the option was passed as."""
    params = module.params
    env = dict(os.environ)
    given = {}
    for option, variable in SETTING_VARIABLES.items():
        value = params.get(option)
        if value is not None and value != "":
            env[variable] = str(value)
            given[variable] = option
    try:
        settings = load_settings(params.get("config"), env)
    except ConfigError as error:
        # The advice first: "--audit-log or RECONCILER_AUDIT_LOG" as one phrase.
        raise ConfigError(_named_as_options(in_task_words(str(error)), given)) from None
    settings = replace(
        settings,
        ca_path=params.get("ca_path") or None,
        validate_certs=params.get("validate_certs") is not False,
    )
    _refuse_missing_credentials(settings)
    if not settings.validate_certs and settings.base_url:  # else the library says why
        _refuse_unchecked_remote(module, settings.base_url)
    return settings


def _named_as_options(message, given):
    for variable, option in given.items():  # RECONCILER_CLIENT_SECRET_FILE stays itself
        message = re.sub(rf"\b{variable}\b", option, message)
    return message


def _refuse_missing_credentials(settings):
    """The library's check, in the task's words: the options missing, never the CLI's."""
    if not settings.base_url and settings.refused_base_url is not None:
        return  # the library says why config's base_url is not taken under CI
    missing = [name for name in CREDENTIALS if not getattr(settings, name)]
    if missing:
        raise ConfigError(
            f"missing {', '.join(missing)}: set {'it' if len(missing) == 1 else 'them'} on "
            'the task (client_secret from Ansible Vault: client_secret: "{{ '
            'vault_reconciler_secret }}"); base_url and client_id may also be in config; '
            "nothing was sent"
        )


def _refuse_unchecked_remote(module, base_url):
    """validate_certs: false only for a loopback host, as http:// is: elsewhere, anyone
    on the path could take the client secret with a certificate of their own."""
    base = parse_base_url(base_url)
    if base.scheme == "https" and not base.is_loopback:
        raise ConfigError(
            f"validate_certs is false for {safetext.escape(base.host)}, which is not a loopback "
            "host: the client secret would go to whoever answers with any certificate; "
            "give the CA that issued the server's certificate as ca_path instead; nothing "
            "was sent"
        )
    if base.scheme == "https":
        module.warn(
            f"validate_certs is false: the certificate of {safetext.escape(base.host)} is not "
            "checked (allowed for a loopback host only); prefer ca_path"
        )
        # Said once above, not once a request on the module's stderr.
        warnings.simplefilter("ignore", urllib3.exceptions.InsecureRequestWarning)


def shown(error):
    """An error's message as the CLI prints it: what a server said redacted, escaped,
    in the task's words where the CLI's name a variable the task sets with an option."""
    return in_task_words(safetext.redact_and_escape_lines(str(error)))


def in_task_words(message):
    """The library's advice in the options' words (_IN_ANSIBLE_WORDS)."""
    for cli_words, task_words in _IN_ANSIBLE_WORDS:
        message = message.replace(cli_words, task_words)
    return message
