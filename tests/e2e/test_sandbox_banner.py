"""`reconcile sandbox` names the ids it serves when it starts (issue 39, row 2): a first
`reconcile export ID` has something to ask for. Up to 20, then how many more."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.cli import run_cli, serving_sandbox
from support.helpers import clean_env

from reconciler.commands.sandbox import _served_ids

pytestmark = pytest.mark.e2e


def _banner(*args: str) -> list[str]:
    with serving_sandbox(*args) as lines:
        return lines


def test_the_bundled_sandbox_names_its_ids() -> None:
    lines = _banner()
    assert lines[1].startswith("Invite ids: inv_8f2k1, inv_3m9q7, ")
    assert lines[1].endswith(", inv_5q5q5.")
    assert lines[3].startswith("  export RECONCILER_BASE_URL=http://127.0.0.1:")


def test_beyond_twenty_ids_it_says_how_many_more(tmp_path: Path) -> None:
    state = tmp_path / "state.json"
    invites = [
        {"id": f"inv_{n:02}", "status": "pending", "name": f"B {n}", "email": f"b{n}@x.example"}
        for n in range(25)
    ]
    state.write_text(json.dumps(invites), encoding="utf-8")
    lines = _banner("--state", str(state))
    assert lines[1] == (
        "Invite ids: " + ", ".join(f"inv_{n:02}" for n in range(20)) + ", and 5 more."
    )


def test_an_id_is_shown_escaped_and_an_empty_state_says_none() -> None:
    assert _served_ids({"inv_\x1b[2J": {}}) == "Invite ids: inv_\\x1b[2J."
    assert _served_ids({}) == "Invite ids: none."


def test_a_read_only_client_plans_and_is_refused_before_any_write(tmp_path: Path) -> None:
    # CI's two clients rehearsed on the sandbox: the pull request's client reads, and
    # its secret, the user's own, is never echoed.
    secret = "pr-secret-4711:with-colon"
    with serving_sandbox("--read-only-client", f"ci-plan:{secret}") as banner:
        url = banner[3].strip().split("=", 1)[1]
        env = clean_env(
            RECONCILER_BASE_URL=url,
            RECONCILER_CLIENT_ID="ci-plan",
            RECONCILER_CLIENT_SECRET=secret,
            RECONCILER_SCOPE="kyb:invites:read",  # as CI's plan job asks
        )
        invites = tmp_path / "invites.yaml"
        invites.write_text(
            "invites:\n  - id: inv_8f2k1\n    name: Renamed GmbH\n", encoding="utf-8"
        )
        plan = run_cli("plan", str(invites), env=env)
        apply = run_cli("apply", "--auto-approve", str(invites), env=env)
    assert "Read-only clients (read scope only, with the secrets you gave): ci-plan" in banner[-2]
    assert secret not in "".join(banner)
    assert plan.returncode == 0, plan.stdout + plan.stderr
    assert "1 to update" in plan.stdout
    assert apply.returncode == 1, apply.stdout + apply.stderr
    assert "kyb:invites:write" in apply.stderr, apply.stderr
    assert "no new writes were started" in apply.stderr  # the 403'd PATCH was not carried out


@pytest.mark.parametrize(
    ("value", "said"),
    [("ci-plan", "expected ID:SECRET"), ("sandbox-client:x", "the sandbox's own (write) client")],
)
def test_a_read_only_client_is_id_and_secret_and_not_the_sandboxs_own(
    value: str, said: str
) -> None:
    result = run_cli("sandbox", "--port", "0", "--read-only-client", value)
    assert result.returncode == 1  # a usage error (cli.md)
    assert said in result.stderr
