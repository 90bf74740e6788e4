"""Path templates are paths (issue 51, row 5). A reconciler.yaml whose invite path leads
to another invite (a `..` segment, a query, a fragment: requests collapses dot segments,
and the plan showed inv_1 while the PATCH and the e-mail went to inv_2) is refused at
load, naming its line, key and value, before any request; a plan at paths of its own
names where its writes go.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support.cli import CliResult, run_cli
from support.helpers import sandbox_env
from support.hostile_server import HostileServer

pytestmark = pytest.mark.e2e

SECRET = "cs_live_paths_Zq9x"
SERVER = [
    {"id": "inv_1", "status": "pending", "name": "Acme Holdings Ltd", "email": "a@acme.example"},
    {"id": "inv_2", "status": "pending", "name": "Other Ltd", "email": "b@other.example"},
]
DESIRED = """\
invites:
  - id: inv_1
    name: Acme Holdings Ltd
    email: new@acme.example
    resendOnChange: true
"""
INVITES = "/public-api/v1/kyb/invites"


def run(tmp_path: Path, server: HostileServer, key: str, template: str, *args: str) -> CliResult:
    (tmp_path / "invites").mkdir(exist_ok=True)
    (tmp_path / "invites" / "a.yaml").write_text(DESIRED, encoding="utf-8")
    config = f"max_attempts: 2\n{key}: '{template}'\n"
    (tmp_path / "reconciler.yaml").write_text(config, encoding="utf-8")
    return run_cli(*args, cwd=tmp_path, env=sandbox_env(server))


@pytest.mark.parametrize(
    ("key", "template"),
    [
        ("update_invite_path", INVITES + "/{inviteId}/../inv_2"),
        ("resend_invite_path", INVITES + "/inv_2/resend?x={inviteId}"),
        ("get_invite_path", INVITES + "/inv_2#{inviteId}"),
    ],
)
def test_a_template_that_leads_to_another_invite_is_refused_before_any_request(
    tmp_path: Path, key: str, template: str
) -> None:
    with HostileServer(SERVER, secret=SECRET) as server:
        result = run(tmp_path, server, key, template, "apply", "--auto-approve")
    assert result.returncode == 1
    assert server.seen == [] and not server.resends  # not even the token request
    assert f"reconciler.yaml:2:{len(key) + 3}: `{key}`: '{template}' " in result.stderr
    assert "Traceback" not in result.stderr


def test_a_plan_at_paths_of_its_own_names_where_its_writes_go(tmp_path: Path) -> None:
    # A plain path, so it loads; only what the plan says shows the re-send goes elsewhere.
    template = INVITES + "/inv_2/resend/{inviteId}"
    with HostileServer(SERVER, secret=SECRET) as server:
        result = run(tmp_path, server, "resend_invite_path", template, "plan")
    assert "~ inv_1" in result.stdout, result.stderr
    assert f"re-sent at POST {server.url}{template}." in result.stdout
    assert [seen.method for seen in server.seen] == ["POST", "GET"]  # the token, the read


def test_a_saved_plan_is_not_applied_at_paths_reconciler_yaml_set_after_it(
    tmp_path: Path,
) -> None:
    # Reviewed at the contract's paths; before `apply --plan`, reconciler.yaml moves the
    # re-send to inv_2 (a plain path, so it loads): the paths the plan names must hold.
    with HostileServer(SERVER, secret=SECRET) as server:
        default = INVITES + "/{inviteId}/resend"
        planned = run(tmp_path, server, "resend_invite_path", default, "plan", "--out", "plan.json")
        assert "~ inv_1" in planned.stdout, planned.stderr
        before = len(server.seen)
        template = INVITES + "/inv_2/resend/{inviteId}"
        result = run(
            tmp_path, server, "resend_invite_path", template, "apply", "--plan", "plan.json"
        )
    assert result.returncode == 1
    assert "the plan's invite paths are the contract's own, but this run's are read " in (
        result.stderr
    )
    assert server.seen[before:] == []  # not a read, not a write
    assert not server.resends
