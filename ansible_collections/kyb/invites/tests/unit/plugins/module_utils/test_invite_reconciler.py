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
        FakeModule(client_id="ci", client_secret="a-long-secret", parallelism=8)
    )
    assert settings.base_url == "https://from-env.example"  # the task's environment
    assert settings.timeout == 7  # a variable the module has no option for
    assert (settings.client_id, settings.client_secret, settings.parallelism) == (
        "ci",
        "a-long-secret",
        8,
    )
    from reconciler.errors import ConfigError

    with pytest.raises(ConfigError, match="RECONCILER_PARALLELISM"):
        lib.module_settings(FakeModule(parallelism=1000))
    with pytest.raises(ConfigError, match="shorter than 6 characters"):
        lib.module_settings(FakeModule(client_secret="short"))


def test_a_config_file_holding_a_secret_is_refused_as_the_cli_refuses_it(tmp_path):
    from reconciler.errors import InputError

    config = tmp_path / "reconciler.yaml"
    config.write_text("base_url: https://api.example.com\nclient_secret: oops-committed\n")
    with pytest.raises(InputError, match="must not be in the config file"):
        lib.module_settings(FakeModule(config=str(config)))
