"""Saved plans end to end, in process: signed by plan, checked by apply, rendered by show.

Each run goes through `reconciler.cli.run` (the CLI a user runs, minus the
process start) against a real sandbox over HTTP on 127.0.0.1.
"""

from __future__ import annotations

import copy
import json
import os
from collections.abc import Callable
from typing import Any, NamedTuple

import pytest
from support.helpers import sandbox_env
from support.invites import ACME, desired_entry, write_invites

from reconciler.cli import run
from reconciler.sandbox import Sandbox


class Result(NamedTuple):
    code: int
    stdout: str
    stderr: str


@pytest.fixture
def reconcile(monkeypatch, capsys, tmp_path) -> Callable[..., Result]:
    """Run `reconcile ARGS` in this process, in tmp_path, with exactly ``env``'s settings."""

    def invoke(*args: str, env: dict[str, str]) -> Result:
        with monkeypatch.context() as patch:
            for name in [n for n in os.environ if n.startswith("RECONCILER_")]:
                patch.delenv(name)
            for name, value in env.items():
                if name.startswith("RECONCILER_") or name in ("NO_COLOR", "TERM"):
                    patch.setenv(name, value)
            patch.chdir(tmp_path)
            capsys.readouterr()
            code = run(list(args))
            out, err = capsys.readouterr()
        assert "Traceback" not in err
        return Result(code, out, err)

    return invoke


OTHER = dict(ACME, id="inv_other", email="other@acme.example")


@pytest.fixture
def planned(start_sandbox, tmp_path, reconcile) -> tuple[Sandbox, dict[str, str], dict[str, Any]]:
    """A sandbox, its env, and a saved plan that updates two invites, one with a re-send."""
    server = start_sandbox([ACME, OTHER])
    entries = [
        desired_entry(ACME, email="new@acme.example", resendOnChange=True),
        desired_entry(OTHER, groups=["emea", "vip"]),
    ]
    write_invites(tmp_path / "invites", entries)
    env = sandbox_env(server)
    result = reconcile("plan", "--max-changes", "5", "--out", "plan.json", env=env)
    assert result.code == 0, result.stderr
    document = json.loads((tmp_path / "plan.json").read_text(encoding="utf-8"))
    return server, env, document


def _assert_nothing_written(server: Sandbox) -> None:
    assert server.stats.calls("PATCH") == [] and server.stats.calls("POST", "/public") == []
    assert sum(server.store.resends.values()) == 0
    assert server.store.get("inv_acme")["email"] == ACME["email"]
    assert server.store.get("inv_other")["groups"] == ACME["groups"]


def _edit(document: dict[str, Any], edit: str) -> dict[str, Any]:
    document = copy.deepcopy(document)
    first = document["changes"][0]
    if edit == "value":
        first["patch"]["email"] = first["after"]["email"] = "evil@attacker.example"
    elif edit == "resend":
        for change in document["changes"]:
            change["resend"] = True
    elif edit == "duplicated":
        document["changes"].append(copy.deepcopy(first))
    elif edit == "id switched":
        # Pointed at another invite, its `before` copied from the server: drift finds nothing.
        first["id"] = "inv_other"
        first["before"] = {"email": OTHER["email"]}
        document["changes"].pop(1)
    elif edit == "max_changes nulled":
        document["max_changes"] = None
    return document


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        ("value", "the plan was altered, or made with another credential"),
        ("resend", "the plan was altered, or made with another credential"),
        ("duplicated", "names inv_acme more than once"),
        ("id switched", "the plan was altered, or made with another credential"),
        ("max_changes nulled", "the plan was altered, or made with another credential"),
    ],
)
def test_a_hand_edited_plan_is_refused_with_nothing_written(
    planned, tmp_path, reconcile, edit, message
):
    server, env, document = planned
    (tmp_path / "plan.json").write_text(json.dumps(_edit(document, edit)), encoding="utf-8")
    result = reconcile("apply", "--plan", "plan.json", env=env)
    assert result.code == 1
    assert message in result.stderr and "nothing was changed" in result.stderr
    _assert_nothing_written(server)


def test_an_unsigned_plan_and_one_from_another_credential_are_refused(planned, tmp_path, reconcile):
    server, env, document = planned
    del document["signature"]
    (tmp_path / "plan.json").write_text(json.dumps(document), encoding="utf-8")
    unsigned = reconcile("apply", "--plan", "plan.json", env=env)
    assert unsigned.code == 1 and "it is not signed" in unsigned.stderr
    other_secret = {**env, "RECONCILER_CLIENT_SECRET": "another-client-secret"}
    assert reconcile("plan", "--out", "plan.json", env=other_secret).code == 1  # 401 at read
    _assert_nothing_written(server)


def test_the_signed_plan_applies_as_reviewed(planned, reconcile):
    server, env, document = planned
    assert document["signature"].startswith("hmac-sha256:")
    result = reconcile("apply", "--plan", "plan.json", env=env)
    assert result.code == 0, result.stderr
    assert "Apply: 2 updated, 0 failed." in result.stdout
    assert dict(server.store.resends) == {"inv_acme": 1}


def test_json_output_is_signed_like_the_saved_plan(planned, reconcile):
    _server, env, document = planned
    printed = json.loads(
        reconcile("plan", "--max-changes", "5", "--format", "json", env=env).stdout
    )
    assert printed["signature"].startswith("hmac-sha256:")
    assert printed["changes"] == document["changes"]


def test_an_invite_accepted_since_the_plan_refuses_the_whole_plan(planned, reconcile):
    server, env, _document = planned
    server.store.put(dict(server.store.get("inv_other"), status="accepted"))
    result = reconcile("apply", "--plan", "plan.json", env=env)
    assert result.code == 1
    assert "inv_other (invites/invites.yaml:" in result.stderr
    assert "is now accepted, not pending" in result.stderr
    assert server.stats.calls("PATCH") == [] and sum(server.store.resends.values()) == 0


def test_show_renders_a_saved_plan_without_the_api(planned, reconcile):
    server, env, document = planned
    requests_before = server.stats.total
    reviewer = {"TERM": "dumb"}  # no credentials at all
    text = reconcile("show", "plan.json", env=reviewer)
    assert text.code == 0
    assert 'email: "old@acme.example" -> "new@acme.example"' in text.stdout
    assert "Plan: 2 to update (1 invitation e-mailed again), 0 unchanged, 0 errors." in text.stdout
    assert "signature not checked" in text.stderr
    markdown = reconcile("show", "plan.json", "--format", "markdown", env=reviewer)
    assert markdown.stdout.startswith("### Invite plan: 2 to update")
    as_json = reconcile("show", "plan.json", "--format", "json", env=reviewer)
    assert json.loads(as_json.stdout) == document
    checked = reconcile("show", "plan.json", env=env)
    assert checked.code == 0 and "signature verified" in checked.stderr
    assert server.stats.total == requests_before


def test_show_says_when_apply_would_refuse_the_plan(planned, tmp_path, reconcile):
    _server, env, document = planned
    (tmp_path / "plan.json").write_text(json.dumps(_edit(document, "resend")), encoding="utf-8")
    tampered = reconcile("show", "plan.json", env=env)
    assert tampered.code == 1
    assert "altered, or made with another credential" in tampered.stderr
    assert "e-mails the invitation again" in tampered.stdout  # still shown, for the record
    del document["signature"]
    (tmp_path / "plan.json").write_text(json.dumps(document), encoding="utf-8")
    unsigned = reconcile("show", "plan.json", env={})
    assert unsigned.code == 1 and "not signed" in unsigned.stderr
    missing = reconcile("show", "nowhere.json", env={})
    assert missing.code == 1 and "nowhere.json: cannot read a plan file" in missing.stderr


def test_show_never_prints_the_client_secret_a_hand_edited_plan_holds(planned, tmp_path, reconcile):
    _server, env, document = planned
    secret = "hand-edited-into-the-plan-6b1f"  # registered by no earlier run of this process
    first = document["changes"][0]
    first["name"] = f"Acme {secret}"
    first["before"]["email"] = f"{secret}@acme.example"  # the server's value, as saved
    first["patch"]["email"] = first["after"]["email"] = f"new+{secret}@acme.example"
    (tmp_path / "plan.json").write_text(json.dumps(document), encoding="utf-8")
    # First, another setting wrong: the signature is not checked, and the secret still never shown.
    bad = {**env, "RECONCILER_CLIENT_SECRET": secret, "RECONCILER_TIMEOUT": "abc"}
    shown = reconcile("show", "plan.json", env=bad)
    assert "signature not checked (RECONCILER_TIMEOUT: 'abc'" in shown.stderr
    assert secret not in shown.stdout + shown.stderr and "redacted" in shown.stdout
    for output in ("text", "json", "markdown"):
        shown = reconcile(
            "show", "plan.json", "--format", output, env={**env, "RECONCILER_CLIENT_SECRET": secret}
        )
        assert shown.code == 1 and "altered, or made with another credential" in shown.stderr
        assert secret not in shown.stdout + shown.stderr and "redacted" in shown.stdout


def test_plan_and_apply_name_an_unwritable_or_unreadable_plan_file(planned, reconcile):
    server, env, _document = planned
    unwritable = reconcile("plan", "--out", "no/such/dir/plan.json", env=env)
    assert unwritable.code == 1
    assert "no/such/dir/plan.json: cannot write plan file" in unwritable.stderr
    unreadable = reconcile("apply", "--plan", "missing.json", env=env)
    assert unreadable.code == 1
    assert "missing.json: cannot read a plan file" in unreadable.stderr
    assert server.stats.calls("PATCH") == []


def test_plan_exits_1_when_apply_would_refuse_it_for_max_changes(planned, reconcile):
    _server, env, _document = planned
    result = reconcile("plan", "--max-changes", "1", "--detailed-exitcode", env=env)
    assert result.code == 1
    assert "~ inv_acme" in result.stdout  # the plan is still shown
    assert "error: apply will refuse this plan: the plan updates 2 invites" in result.stderr


def test_accepted_invites_that_differ_are_listed_apart_and_do_not_fail(
    start_sandbox, tmp_path, reconcile
):
    done = dict(ACME, id="inv_done", status="accepted")
    server = start_sandbox([ACME, done])
    entries = [desired_entry(ACME), desired_entry(done, email="b@acme.example")]
    path = write_invites(tmp_path / "invites", entries)
    env = sandbox_env(server)
    text = reconcile("plan", "--detailed-exitcode", env=env)
    assert text.code == 0, text.stdout + text.stderr
    assert "No longer updatable: accepted\n\n! inv_done" in text.stdout
    assert 'email: "old@acme.example" -> "b@acme.example"' in text.stdout
    fix = f"fix: remove it from invites/{path.name}:"
    assert fix in text.stdout and "`reconcile export inv_done`" in text.stdout
    assert "Plan: 0 to update, 1 unchanged, 0 errors, 1 no longer updatable." in text.stdout
    markdown = reconcile("plan", "--format", "markdown", env=env).stdout
    assert markdown.index("#### No longer updatable: <code>accepted</code>") < markdown.index(
        "inv_done"
    )
    as_json = json.loads(reconcile("plan", "--format", "json", env=env).stdout)
    assert [n["id"] for n in as_json["not_updatable"]] == ["inv_done"]
    assert as_json["changes"] == [] and as_json["errors"] == []
    applied = reconcile("apply", "--auto-approve", env=env)
    assert applied.code == 0, applied.stderr
    assert server.stats.calls("PATCH") == []


def test_a_markdown_heading_mentions_nobody_and_links_nothing(start_sandbox, tmp_path, reconcile):
    server = start_sandbox([ACME])
    name = "Northwind @octocat #1 <b>`x`</b>"
    write_invites(tmp_path / "invites", [desired_entry(ACME, name=name)])
    comment = reconcile("plan", "--format", "markdown", env=sandbox_env(server)).stdout
    (heading,) = [line for line in comment.splitlines() if line.startswith("#### ")]
    assert heading == (
        "#### `inv_acme` <code>Northwind &#64;octocat &#35;1 &lt;b&gt;&#96;x&#96;&lt;/b&gt;</code>"
    )
    assert "<b>" not in comment
    # Elsewhere the name appears only as a value in a table cell, inside <code>.
    mentioned = [line for line in comment.splitlines() if "@octocat" in line]
    assert mentioned and all(line.startswith("| name | <code>") for line in mentioned)


def test_a_saved_plan_applies_the_names_as_written_and_redacts_only_what_the_server_said(
    start_sandbox, tmp_path, reconcile
) -> None:
    # The server echoes the client secret in a name (a hostile or careless server); the
    # file wants a name with "Bearer" in it, which is no token and must be sent as written.
    from reconciler.sandbox import SANDBOX_CLIENT_SECRET

    server = start_sandbox([dict(ACME, name=f"Acme {SANDBOX_CLIENT_SECRET} Ltd")])
    wanted = "Standard Bearer Holdings Ltd"
    write_invites(tmp_path / "invites", [desired_entry(ACME, name=wanted)])
    env = sandbox_env(server)
    saved = reconcile("plan", "--out", "plan.json", env=env)
    assert saved.code == 0, saved.stderr

    text = (tmp_path / "plan.json").read_text(encoding="utf-8")
    assert SANDBOX_CLIENT_SECRET not in text and SANDBOX_CLIENT_SECRET not in saved.stdout
    (change,) = json.loads(text)["changes"]
    assert change["before"] == {"name": "Acme [redacted] Ltd"}
    assert change["after"] == change["patch"] == {"name": wanted}
    assert wanted in saved.stdout

    # The redacted `before` is what the server still holds: no false drift.
    applied = reconcile("apply", "--plan", "plan.json", env=env)
    assert applied.code == 0, applied.stderr
    assert server.store.snapshot()["inv_acme"]["name"] == wanted


def test_a_plan_too_large_to_read_back_is_not_saved(
    start_sandbox, tmp_path, reconcile, monkeypatch
) -> None:
    # What `apply --plan` and `show` refuse to read, `plan --out` refuses to write.
    import reconciler.plan.saved

    monkeypatch.setattr(reconciler.plan.saved, "MAX_PLAN_BYTES", 600)
    (tmp_path / "plan.json").write_text("the plan saved before", encoding="utf-8")
    server = start_sandbox([ACME, OTHER])
    entries = [desired_entry(ACME, email="new@acme.example"), desired_entry(OTHER, name="Other")]
    write_invites(tmp_path / "invites", entries)
    result = reconcile("plan", "--out", "plan.json", env=sandbox_env(server))
    assert result.code == 1
    assert "plan.json: plan not saved: it is over" in result.stderr
    assert "more than `apply --plan` and `show` read" in result.stderr
    assert (tmp_path / "plan.json").read_text(encoding="utf-8") == "the plan saved before"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["invites", "plan.json"]


def test_show_names_a_key_written_twice_without_the_client_secret_it_holds(
    planned, tmp_path, reconcile
):
    _server, env, document = planned
    secret = "twice-in-the-plan-9c4e"  # registered by no earlier run of this process
    text = json.dumps(document)[:-1] + f', "{secret}": 1, "{secret}": 2}}'
    (tmp_path / "plan.json").write_text(text, encoding="utf-8")
    shown = reconcile("show", "plan.json", env={**env, "RECONCILER_CLIENT_SECRET": secret})
    assert shown.code == 1
    assert 'not a plan file (top level: key "[redacted]" appears twice)' in shown.stderr
    assert secret not in shown.stdout + shown.stderr
