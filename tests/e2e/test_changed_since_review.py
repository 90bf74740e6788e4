"""--changed-since as a new user meets it: a first push, reordered sets, a filtered --target."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from conftest import run_cli, sandbox_env
from test_changed_since import git
from test_plan_apply import ACME

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")

ZERO = "0" * 40
BETA = {**ACME, "id": "inv_beta", "name": "Bêta Société SA", "email": "ops@beta.example"}

FILE = """\
invites:
  - id: inv_acme
    name: Acme Holdings Ltd
    email: {acme_email}
    groups: [{groups}]
  - id: inv_beta
    name: "Bêta Société SA"
    email: ops@beta.example
    groups: [emea, enterprise]
"""


def commit(repo: Path, groups: str = "emea, enterprise", acme_email: str = "a@acme.example"):
    (repo / "invites").mkdir(parents=True, exist_ok=True)
    text = FILE.format(groups=groups, acme_email=acme_email)
    (repo / "invites" / "invites.yaml").write_text(text, encoding="utf-8")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "invites")
    return git(repo, "rev-parse", "HEAD")


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    git(tmp_path, "init", "-q")
    return tmp_path


def test_the_all_zero_sha_plans_every_invite(repo, start_sandbox):
    commit(repo)
    server = start_sandbox([ACME, BETA])
    result = run_cli("plan", "--changed-since", ZERO, cwd=repo, env=sandbox_env(server))
    assert result.returncode == 0, result.stderr
    assert "Plan: 1 to update, 1 unchanged, 0 errors." in result.stdout
    assert result.stderr.count("no base commit") == 1
    assert "planning every invite" in result.stderr


def test_an_unknown_commit_is_still_an_error(repo, start_sandbox):
    commit(repo)
    server = start_sandbox([ACME, BETA])
    result = run_cli("plan", "--changed-since", "1" * 40, cwd=repo, env=sandbox_env(server))
    assert result.returncode == 1
    assert "no such commit in this repository" in result.stderr


def test_reordering_a_set_field_is_no_change(repo, start_sandbox):
    base = commit(repo)
    commit(repo, groups="enterprise, emea")
    server = start_sandbox([ACME, BETA])
    result = run_cli("plan", "--changed-since", base, cwd=repo, env=sandbox_env(server))
    assert result.returncode == 0, result.stderr
    assert "0 invites of 2 added or changed" in result.stderr
    assert server.stats.calls("GET") == []  # no invite read


def test_a_target_left_out_by_changed_since_is_named(repo, start_sandbox):
    base = commit(repo)
    commit(repo, acme_email="new@acme.example")
    server = start_sandbox([ACME, BETA])
    env = sandbox_env(server)
    args = ("plan", "--changed-since", base, "--target", "inv_beta", "--target", "inv_acme")
    result = run_cli(*args, cwd=repo, env=env)
    assert f"--target inv_beta: unchanged since {base}; nothing to plan for it" in result.stderr
    assert "--target inv_acme:" not in result.stderr
    assert "Plan: 1 to update" in result.stdout
