"""What an attacker found after the rebuild: each stays fixed.

A server echoing the secret inside invite values, a proxy on a plain-http
tunnel, nan and inf settings, a config file that never ends, and control
characters in paths that errors quote.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import clean_env, run_cli

from reconciler import safetext
from reconciler.api.http.network import make_session
from reconciler.errors import ConfigError
from reconciler.plan.changes import InviteChange
from reconciler.plan.model import Plan
from reconciler.safetext import Redactor, redact_strings
from reconciler.settings.config import load_settings

SECRET = "s3cr3t-Value-of-this-test"


@pytest.fixture
def registered_secret() -> str:
    saved = safetext._REDACTOR._secrets
    safetext.register_secret(SECRET)
    yield SECRET
    safetext._REDACTOR._secrets = saved


def test_a_secret_echoed_in_any_case_or_html_escaped_is_redacted() -> None:
    redactor = Redactor()
    redactor.register("a&b<secret>")
    shown = redactor.redact("A&B<SECRET> and a&amp;b&lt;secret&gt;")
    assert shown == "[redacted] and [redacted]"


def test_every_string_of_a_document_is_redacted_keys_included(registered_secret: str) -> None:
    document = {"k": [registered_secret.upper(), {registered_secret: 1}], "n": 2}
    assert redact_strings(document) == {"k": ["[redacted]", {"[redacted]": 1}], "n": 2}


def test_a_plan_never_holds_a_secret_the_server_put_in_an_invite(registered_secret: str) -> None:
    change = InviteChange(
        "inv_1", "invites/a.yaml:3", "Acme", {"name": registered_secret}, {"name": "Acme"}, False
    )
    plan = Plan(base_url="https://api.example", changes=[change])
    saved = json.dumps(plan.to_document())
    assert registered_secret not in saved and "[redacted]" in saved


def test_no_proxy_carries_a_plain_http_request(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTTP_PROXY", "http://proxy.example:3128")
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.example:3128")
    assert make_session("http://127.0.0.1:8787", 4).proxies == {}
    assert make_session("https://api.example", 4).proxies["https"] == "http://proxy.example:3128"


@pytest.mark.parametrize("raw", ["nan", "inf", "-inf", "NaN"])
def test_a_number_of_seconds_must_be_finite(raw: str) -> None:
    with pytest.raises(ConfigError, match="not a finite number"):
        load_settings(None, env={"RECONCILER_TIMEOUT": raw})


def test_a_number_of_seconds_in_the_config_file_must_be_finite(tmp_path: Path) -> None:
    config = tmp_path / "reconciler.yaml"
    config.write_text("retry_max_seconds: .inf\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="not a finite number"):
        load_settings(str(config), env={})


def test_a_config_file_that_never_ends_is_refused(tmp_path: Path) -> None:
    result = run_cli("validate", "--config", "/dev/zero", cwd=tmp_path, env=clean_env())
    assert result.returncode == 1
    assert "/dev/zero: larger than 1024 KiB" in result.stderr


def test_control_characters_in_a_quoted_path_reach_no_terminal(tmp_path: Path) -> None:
    name = str(tmp_path / "a\x1b]0;PWNED\x07.yaml")
    result = run_cli("validate", "--config", name, cwd=tmp_path, env=clean_env())
    assert result.returncode == 1
    assert "\x1b" not in result.stderr and "\x07" not in result.stderr
    assert "a\\x1b]0;PWNED\\x07.yaml" in result.stderr


def test_an_export_never_writes_a_secret_the_server_put_in_a_value(registered_secret: str) -> None:
    from reconciler.api.client import CurrentInvite
    from reconciler.commands.export import render_export

    invite = CurrentInvite("inv_1", "pending", {"name": f"Acme {registered_secret}"})
    text = render_export([invite], "https://api.example", "schemas/invites.schema.json")
    assert registered_secret not in text and "Acme [redacted]" in text
