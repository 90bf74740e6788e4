"""The guarded import, the version check and one Settings through the library's loading."""

from __future__ import annotations

import pytest

from ansible_collections.kyb.invites.plugins.module_utils import invite_reconciler as lib


class Failed(Exception):
    pass


class FakeModule:
    """What the module_utils use of AnsibleModule: params, no-log values, fail_json."""

    def __init__(self, **params):
        self.params = dict.fromkeys(lib.connection_spec(), None)
        self.params.update(params)
        self.no_log_values = set()
        self.warnings = []

    def warn(self, warning):
        self.warnings.append(warning)

    def fail_json(self, **result):
        raise Failed(result)


@pytest.mark.parametrize(
    ("text", "parts"),
    [
        ("0.1.0", (0, 1, 0)),
        ("0.10.2", (0, 10, 2)),
        ("1.2.0rc1", (1, 2, 0)),
        ("2.0.0.dev3", (2, 0, 0)),
    ],
)
def test_a_version_is_the_release_it_leads_to(text, parts):
    assert lib.version_tuple(text) == parts


def test_without_the_library_the_task_fails_saying_what_to_install(monkeypatch):
    monkeypatch.setattr(lib, "HAS_LIBRARY", False)
    monkeypatch.setattr(lib, "IMPORT_ERROR", "ModuleNotFoundError: No module named 'reconciler'")
    with pytest.raises(Failed) as failed:
        lib.require_library(FakeModule())
    result = failed.value.args[0]
    assert "Failed to import the required Python library (invite-reconciler)" in result["msg"]
    assert "No module named 'reconciler'" in result["exception"]


reconciler = pytest.importorskip("reconciler")


def test_a_library_older_than_the_collection_needs_fails_the_task(monkeypatch):
    monkeypatch.setattr(reconciler, "__version__", "0.0.9")
    with pytest.raises(Failed) as failed:
        lib.require_library(FakeModule())
    assert "invite-reconciler 0.0.9 is installed" in failed.value.args[0]["msg"]
    assert "needs 0.1.0 or newer" in failed.value.args[0]["msg"]


def test_every_secret_the_library_learns_becomes_a_no_log_value():
    from reconciler import safetext

    module = FakeModule()
    lib.require_library(module)
    safetext.replace_secrets([], ["eyJ.a-token-issued.later"])
    assert "eyJ.a-token-issued.later" in module.no_log_values


def test_options_go_through_the_library_checks_as_their_variables_do(monkeypatch):
    monkeypatch.setenv("RECONCILER_BASE_URL", "https://from-env.example")
    monkeypatch.setenv("RECONCILER_TIMEOUT", "7")
    settings = lib.module_settings(
        FakeModule(client_id="ci", client_secret="a-long-secret", parallelism=8, timeout=None)
    )
    assert settings.base_url == "https://from-env.example"  # the task's environment
    assert settings.timeout == 7  # a variable the module has no option for
    assert (settings.client_id, settings.client_secret, settings.parallelism) == (
        "ci",
        "a-long-secret",
        8,
    )
    from reconciler.errors import ConfigError

    # Refused as the variable is, named as the option the task set.
    with pytest.raises(ConfigError) as refused:
        lib.module_settings(FakeModule(parallelism=1000))
    assert str(refused.value) == "parallelism: '1000' must be at least 1 and at most 256"
    with pytest.raises(ConfigError) as refused:
        lib.module_settings(FakeModule(client_secret="short"))
    assert str(refused.value).startswith("client_secret is shorter than 6 characters")
    assert "RECONCILER_" not in str(refused.value)
    with pytest.raises(ConfigError) as refused:
        lib.module_settings(FakeModule(client_id="ci", client_secret="a-long-secret", timeout=0.0))
    assert str(refused.value) == "timeout: '0.0' must be more than 0 and at most 3600"


def test_a_config_file_holding_a_secret_is_refused_as_the_cli_refuses_it(tmp_path):
    from reconciler.errors import InputError

    config = tmp_path / "reconciler.yaml"
    config.write_text("base_url: https://api.example.com\nclient_secret: oops-committed\n")
    with pytest.raises(InputError, match="must not be in the config file"):
        lib.module_settings(FakeModule(config=str(config)))


CREDENTIALS = dict(
    base_url="https://api.example.com", client_id="ci", client_secret="a-long-secret"
)


def test_missing_credentials_are_named_as_the_options_never_the_cli_words(monkeypatch, tmp_path):
    from reconciler.errors import ConfigError

    for variable in ("RECONCILER_BASE_URL", "RECONCILER_CLIENT_ID", "RECONCILER_CLIENT_SECRET"):
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.chdir(tmp_path)  # no reconciler.yaml found
    with pytest.raises(ConfigError) as refused:
        lib.module_settings(FakeModule(base_url="https://api.example.com", client_id="ci"))
    message = str(refused.value)
    assert message.startswith("missing client_secret: set it on the task (client_secret from ")
    assert "vault_reconciler_secret" in message and "nothing was sent" in message
    assert "RECONCILER_" not in message and "--sandbox" not in message
    with pytest.raises(ConfigError, match=r"^missing base_url, client_id, client_secret: set them"):
        lib.module_settings(FakeModule())


def test_the_timeout_and_ca_path_options_reach_the_settings(tmp_path):
    settings = lib.module_settings(FakeModule(timeout=7.5, ca_path="/etc/ca.pem", **CREDENTIALS))
    assert (settings.timeout, settings.ca_path) == (7.5, "/etc/ca.pem")
    assert settings.validate_certs is True


def test_unchecked_certificates_are_refused_for_a_remote_host_allowed_on_loopback_loudly():
    from reconciler.errors import ConfigError

    with pytest.raises(ConfigError) as refused:
        lib.module_settings(FakeModule(validate_certs=False, **CREDENTIALS))
    assert str(refused.value).startswith(
        "validate_certs is false for api.example.com, which is not a loopback host"
    )
    assert "ca_path" in str(refused.value)
    module = FakeModule(
        validate_certs=False, **dict(CREDENTIALS, base_url="https://127.0.0.1:8443")
    )
    settings = lib.module_settings(module)
    assert settings.validate_certs is False
    assert module.warnings == [
        "validate_certs is false: the certificate of 127.0.0.1 is not checked (allowed for "
        "a loopback host only); prefer ca_path"
    ]


def test_the_session_trusts_ca_path_checked_at_start_and_named_as_the_option(tmp_path):
    from reconciler.api.exchange import GuardedAdapter
    from reconciler.api.network import make_session
    from reconciler.errors import ConfigError

    missing = tmp_path / "no-such-ca.pem"
    with pytest.raises(ConfigError) as refused:
        make_session("https://api.example.com", GuardedAdapter(), ca_path=str(missing))
    assert str(refused.value) == f"ca_path names {missing}, which does not exist"
    unchecked = make_session("https://127.0.0.1:8443", GuardedAdapter(), validate_certs=False)
    assert unchecked.verify is False


def test_the_cli_advice_for_a_private_ca_is_given_in_the_options_words():
    said = lib.shown(
        Exception(
            "TLS verification failed for 127.0.0.1 (certificate verify failed: self-signed "
            "certificate); for a private CA, point REQUESTS_CA_BUNDLE at its certificate "
            "(a PEM file, or a directory hashed with `openssl rehash`)"
        )
    )
    assert "for a private CA, set ca_path to its certificate (a PEM file" in said
    assert "REQUESTS_CA_BUNDLE" not in said


def test_a_variable_the_task_did_not_set_keeps_its_name(monkeypatch, tmp_path):
    from reconciler.errors import ConfigError

    secret_file = tmp_path / "secret"
    secret_file.write_text("another-long-secret\n")
    monkeypatch.setenv("RECONCILER_CLIENT_SECRET_FILE", str(secret_file))
    with pytest.raises(ConfigError) as refused:
        lib.module_settings(FakeModule(**CREDENTIALS))
    assert str(refused.value).startswith(
        "both client_secret and RECONCILER_CLIENT_SECRET_FILE are set"
    )


# The variables a task sets with an option: a message never tells the task to set them.
_OPTION_VARIABLES = (
    r"RECONCILER_(BASE_URL|CLIENT_ID|CLIENT_SECRET|TOKEN_AUTH_METHOD|MAX_RATE|AUDIT_LOG)\b"
)


def _in_options_words(said):
    import re

    assert not re.search(_OPTION_VARIABLES, said), said
    assert not re.search(r"--(max-rate|parallelism|audit-log)\b", said), said
    return said


def test_a_connection_failure_names_base_url_as_the_task_set_it():
    import socket

    import requests

    from reconciler.api.exchange import GuardedAdapter
    from reconciler.api.network import make_session, transport_error

    with socket.socket() as closed:  # a port nothing listens on
        closed.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{closed.getsockname()[1]}/oauth/token"
    with pytest.raises(requests.RequestException) as failed:
        make_session(url, GuardedAdapter()).get(url, timeout=5)
    said = _in_options_words(lib.shown(transport_error(failed.value, "127.0.0.1", 5.0)))
    assert said.endswith("(connection refused); check base_url")


def test_the_token_requests_advice_names_the_options(monkeypatch):
    from reconciler.api import auth
    from reconciler.api.exceptions import GATEWAY_PAGE
    from reconciler.api.network import parse_base_url
    from reconciler.errors import ConfigError

    for method in ("client_secret_post", "client_secret_basic"):
        settings = lib.module_settings(FakeModule(token_auth_method=method, **CREDENTIALS))
        for key in (401, "invalid_client", 404, "unsupported_grant_type", None):
            _in_options_words(lib.shown(Exception(auth._advice(key, settings))))
        other = "client_secret_basic" if method == "client_secret_post" else "client_secret_post"
        assert lib.shown(Exception(auth._advice(401, settings))) == (
            f"check client_id and client_secret; they were sent with token_auth_method "
            f"{method}: {auth._HOW[method]} (a server that takes only the other way needs "
            f"token_auth_method: {other})"
        )
    assert lib.shown(Exception(auth._advice(404, settings))).endswith("and base_url")
    with pytest.raises(ConfigError) as refused:
        parse_base_url("https://user:pw@api.example.com")
    said = _in_options_words(lib.shown(refused.value))
    assert said.endswith(
        "must not carry credentials (user info before the host); use client_id and client_secret"
    )
    with pytest.raises(ConfigError) as refused:
        parse_base_url("https://api.example.com:99999")
    assert _in_options_words(lib.shown(refused.value)).endswith("; set base_url")
    said = _in_options_words(lib.shown(Exception(GATEWAY_PAGE)))
    assert said.endswith("wait, then run again with max_rate below its limit")


def test_the_gateways_advice_and_a_committed_secret_name_the_options(tmp_path):
    from reconciler.errors import ReconcilerError

    gateway = (
        "Run again once a block would be over with --parallelism 1, or with --max-rate "
        "(RECONCILER_MAX_RATE, setting max_rate) below the gateway's limit"
    )  # reconciler.api.exchange's words for a gateway that kept refusing
    assert _in_options_words(lib.shown(Exception(gateway))) == (
        "Run again once a block would be over with parallelism: 1, or with max_rate below "
        "the gateway's limit"
    )
    config = tmp_path / "reconciler.yaml"
    config.write_text("base_url: https://api.example.com\nclient_secret: oops-committed\n")
    with pytest.raises(ReconcilerError) as refused:
        lib.module_settings(FakeModule(config=str(config)))
    said = lib.shown(refused.value)
    assert "set client_secret on the task instead (from Ansible Vault" in said
    assert "RECONCILER_CLIENT_SECRET " not in said and "oops-committed" not in said
