"""What a new user's review found: errors last on stderr, local checks before the network."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import run_cli, sandbox_env
from test_plan_apply import ACME, desired_entry, write_invites


def _last_line(text: str) -> str:
    return text.rstrip("\n").splitlines()[-1]


def test_plan_ends_stderr_with_an_error_per_invite_not_found(start_sandbox, tmp_path):
    server = start_sandbox([ACME])
    ghost = desired_entry(ACME, id="inv_ghost", email="ghost@acme.example")
    write_invites(tmp_path / "invites", [desired_entry(ACME), ghost])
    result = run_cli("plan", cwd=tmp_path, env=sandbox_env(server))
    assert result.returncode == 1
    assert "inv_ghost" in result.stdout  # the plan itself is unchanged
    last = _last_line(result.stderr)
    assert last.startswith("error: inv_ghost: HTTP 404")
    assert "requestId" in last
    assert "check the id, or remove the entry at invites/invites.yaml:" in last


def test_plan_bounds_the_error_lines(start_sandbox, tmp_path):
    server = start_sandbox([ACME])
    ghosts = [desired_entry(ACME, id=f"inv_ghost_{n:02}") for n in range(13)]
    write_invites(tmp_path / "invites", ghosts)
    result = run_cli("plan", cwd=tmp_path, env=sandbox_env(server))
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 11
    assert _last_line(result.stderr) == "error: and 3 more failed invites (listed above)"


def test_apply_and_resend_end_stderr_with_the_failures(start_sandbox, tmp_path):
    server = start_sandbox([ACME])
    ghost = desired_entry(ACME, id="inv_ghost")
    write_invites(tmp_path / "invites", [desired_entry(ACME, email="new@acme.example"), ghost])
    env = sandbox_env(server)
    apply = run_cli("apply", "--auto-approve", cwd=tmp_path, env=env)
    assert apply.returncode == 1
    assert "Apply: 1 updated, 0 failed." in apply.stdout
    assert _last_line(apply.stderr).startswith("error: inv_ghost: HTTP 404")
    resend = run_cli("resend", "--auto-approve", "inv_acme", "inv_ghost", cwd=tmp_path, env=env)
    assert resend.returncode == 1
    assert "Resend: 1 re-sent, 1 failed." in resend.stdout
    assert _last_line(resend.stderr).startswith("error: inv_ghost: HTTP 404")


@pytest.mark.parametrize(
    "args",
    [
        ("apply", "--auto-approve", "--audit-log", "nowhere/dir/a.jsonl"),
        ("plan", "--out", "nowhere/p.json"),
        ("export", "inv_acme", "--out", "nowhere/dir/x.yaml"),
    ],
)
def test_an_unwritable_output_is_refused_before_any_request(start_sandbox, tmp_path, args):
    server = start_sandbox([ACME])
    write_invites(tmp_path / "invites", [desired_entry(ACME, email="new@acme.example")])
    result = run_cli(*args, cwd=tmp_path, env=sandbox_env(server))
    assert result.returncode == 1
    assert "nowhere" in _last_line(result.stderr)
    assert "No such file or directory (no directory" in result.stderr
    assert server.stats.calls("GET") == []
    assert "Plan:" not in result.stdout


@pytest.mark.parametrize(
    "args",
    [
        ("export", "inv_acme", "../etc"),
        ("resend", "--auto-approve", "inv acme"),
        ("plan", "--target", ".."),
        ("plan", "--exclude", "inv_acme\n"),
    ],
)
def test_an_id_no_invite_can_have_is_refused_before_any_request(start_sandbox, tmp_path, args):
    server = start_sandbox([ACME])
    write_invites(tmp_path / "invites", [desired_entry(ACME)])
    result = run_cli(*args, cwd=tmp_path, env=sandbox_env(server))
    assert result.returncode == 1
    assert "not a valid invite id (1 to 128 letters" in result.stderr
    assert server.stats.calls("GET") == [] and server.stats.calls("POST") == []


def test_a_valid_id_passes_the_id_check(tmp_path: Path, start_sandbox):
    server = start_sandbox([ACME])
    result = run_cli("export", "inv_acme", cwd=tmp_path, env=sandbox_env(server))
    assert result.returncode == 0, result.stderr
    assert "id: inv_acme" in result.stdout


def test_the_not_updatable_advice_works(start_sandbox, tmp_path):
    server = start_sandbox([{**ACME, "status": "accepted"}])
    write_invites(tmp_path / "invites", [desired_entry(ACME, email="new@acme.example")])
    env = sandbox_env(server)
    plan = run_cli("plan", cwd=tmp_path, env=env)
    assert "bring the file in line with `reconcile export inv_acme`" in plan.stdout
    exported = run_cli("export", "inv_acme", cwd=tmp_path, env=env)
    assert exported.returncode == 0, exported.stderr
    assert "email: old@acme.example" in exported.stdout
    assert "note: inv_acme is already defined at invites/invites.yaml:" in exported.stderr
    assert "with this" in exported.stderr
    (tmp_path / "invites" / "invites.yaml").write_text(exported.stdout, encoding="utf-8")
    replanned = run_cli("plan", "--detailed-exitcode", cwd=tmp_path, env=env)
    assert replanned.returncode == 0, replanned.stdout
    assert "No changes." in replanned.stdout


def test_export_to_a_file_still_refuses_an_id_defined_in_git(start_sandbox, tmp_path):
    server = start_sandbox([ACME])
    write_invites(tmp_path / "invites", [desired_entry(ACME)])
    result = run_cli(
        "export", "inv_acme", "--out", "more.yaml", cwd=tmp_path, env=sandbox_env(server)
    )
    assert result.returncode == 1
    assert (
        "already defined in your invite files: inv_acme (at invites/invites.yaml:" in result.stderr
    )
    assert not (tmp_path / "more.yaml").exists()


def test_a_saved_plans_limit_is_named_when_it_refuses(start_sandbox, tmp_path):
    beta = {**ACME, "id": "inv_beta", "name": "Beta GmbH"}
    server = start_sandbox([ACME, beta])
    entries = [desired_entry(i, email="new@x.example") for i in (ACME, beta)]
    write_invites(tmp_path / "invites", entries)
    env = sandbox_env(server)
    plan = run_cli("plan", "--max-changes", "1", "--out", "p.json", cwd=tmp_path, env=env)
    assert plan.returncode == 1
    assert "Split the change or raise the limit" in plan.stderr  # the run's own limit
    apply = run_cli("apply", "--plan", "p.json", "--max-changes", "5", cwd=tmp_path, env=env)
    assert apply.returncode == 1
    assert _last_line(apply.stderr).endswith(
        "more than max_changes (1). This plan was made with --max-changes 1; "
        "make a new plan with a higher limit."
    )
    assert server.stats.calls("PATCH") == []
