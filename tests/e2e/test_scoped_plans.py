"""Plans scoped to a change (`--changed-since REF`), field by field, in a real git repository.

For each field the change touched: the platform holds REF's value -> a change; the new
value -> nothing; anything else -> a conflict. Fields it did not touch are listed, never
written.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from support.cli import run_cli
from support.git import commit_repository, git
from support.helpers import sandbox_env

from reconciler.sandbox import Sandbox

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")

BASE = """\
invites:
  - id: inv_a
    name: Alpha Ltd
    email: a@alpha.example
  - id: inv_b
    name: Beta Ltd
    email: b@beta.example
  - id: inv_c
    name: Gamma Ltd
    email: c@gamma.example
  - id: inv_d
    name: Delta Ltd
    email: d@delta.example
"""

# The pull request: one e-mail changed in each of a, b and c; d untouched.
CHANGED = (
    BASE.replace("a@alpha.example", "new@alpha.example")
    .replace("b@beta.example", "new@beta.example")
    .replace("c@gamma.example", "new@gamma.example")
)


def invite(invite_id: str, name: str, email: str) -> dict[str, Any]:
    return {"id": invite_id, "status": "pending", "name": name, "email": email}


PLATFORM = [
    # email at REF's value: an ordinary change; its name renamed on the platform (drift).
    invite("inv_a", "Alpha Group Ltd", "a@alpha.example"),
    # email already the new value: nothing to do.
    invite("inv_b", "Beta Ltd", "new@beta.example"),
    # email changed on the platform since REF to a third value: a conflict.
    invite("inv_c", "Gamma Ltd", "support@gamma.example"),
    invite("inv_d", "Delta Ltd", "other@delta.example"),  # drift, but untouched: not read
]


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    commit_repository(tmp_path, {"invites/all.yaml": BASE}, "base")
    git(tmp_path, "checkout", "-q", "-b", "change")
    (tmp_path / "invites" / "all.yaml").write_text(CHANGED, encoding="utf-8")
    git(tmp_path, "commit", "-qam", "three e-mails")
    return tmp_path


@pytest.fixture
def server(start_sandbox: Callable[..., Sandbox]) -> Sandbox:
    return start_sandbox([dict(i) for i in PLATFORM])


def patches(server: Sandbox) -> dict[str, Any]:
    return {r.path.rsplit("/", 1)[1]: r.body for r in server.stats.calls("PATCH")}


def test_plan_shows_the_change_the_conflict_and_the_drift_it_leaves_alone(
    repo: Path, server: Sandbox
) -> None:
    result = run_cli("plan", "--changed-since", "main", cwd=repo, env=sandbox_env(server))
    assert result.returncode == 1  # a conflict fails the plan
    out = result.stdout
    assert "~ inv_a" in out and 'email: "a@alpha.example" -> "new@alpha.example"' in out
    assert "inv_b" not in out  # the platform already holds the new value
    assert "! inv_c" in out
    assert (
        'email: conflict: at main "c@gamma.example", on the platform "support@gamma.example", '
        'wanted "new@gamma.example"' in out
    )
    assert "Differs on the platform, not part of this change:" in out
    assert 'name: "Alpha Group Ltd" -> "Alpha Ltd"' in out
    assert "inv_d" not in out
    assert (
        "Plan: 1 to update, 1 conflict (not written), 1 unchanged, 0 errors, 1 invite "
        "differing outside the change, 1 invite not read (not changed since main)." in out
    )
    assert "0 unchanged" not in out
    assert "error: 1 invite in conflict" in result.stderr
    assert sorted(r.path.rsplit("/", 1)[1] for r in server.stats.calls("GET")) == [
        "inv_a",
        "inv_b",
        "inv_c",
    ]


def test_json_and_markdown_plans_carry_the_scope(repo: Path, server: Sandbox) -> None:
    env = sandbox_env(server)
    result = run_cli("plan", "--changed-since", "main", "--format", "json", cwd=repo, env=env)
    document = json.loads(result.stdout)
    assert document["changed_since"] == "main" and document["not_read"] == 1
    by_id = {c["id"]: c for c in document["changes"]}
    assert by_id["inv_a"]["patch"] == {"email": "new@alpha.example"}  # not the name
    assert by_id["inv_c"]["conflicts"] == {"email": "c@gamma.example"}
    assert "conflicts" not in by_id["inv_a"]
    assert document["out_of_scope"] == [
        {
            "id": "inv_a",
            "name": "Alpha Ltd",
            "source": "invites/all.yaml:2",
            "before": {"name": "Alpha Group Ltd"},
            "after": {"name": "Alpha Ltd"},
        }
    ]
    assert document["summary"] == {
        "update": 1,
        "unchanged": 1,
        "error": 0,
        "resend": 0,
        "conflict": 1,
        "out_of_scope": 1,
        "not_read": 1,
    }
    markdown = run_cli("plan", "--changed-since", "main", "--format", "markdown", cwd=repo, env=env)
    assert "**Conflict**" in markdown.stdout
    assert (
        '| email | <code>"c@gamma.example"</code> | <code>"support@gamma.example"</code> | '
        '<code>"new@gamma.example"</code> |' in markdown.stdout
    )
    assert "Differs on the platform, not part of this change" in markdown.stdout
    assert "1 invite not read (not changed since main)" in markdown.stdout


def test_apply_writes_the_change_leaves_the_conflict_and_the_drift_alone(
    repo: Path, server: Sandbox
) -> None:
    env = sandbox_env(server)
    result = run_cli("apply", "--auto-approve", "--changed-since", "main", cwd=repo, env=env)
    assert result.returncode == 1
    assert patches(server) == {"inv_a": {"email": "new@alpha.example"}}
    assert server.store.get("inv_a")["name"] == "Alpha Group Ltd"  # drift never written
    assert server.store.get("inv_c")["email"] == "support@gamma.example"
    # A conflict is never counted as an update (issue 34.3).
    assert "Apply: 1 updated, 1 conflict (not written), 0 failed." in result.stdout
    assert result.stderr.rstrip().splitlines()[-1].startswith("error: 1 invite in conflict")


def test_force_conflicts_writes_the_conflict_too(repo: Path, server: Sandbox) -> None:
    env = sandbox_env(server)
    args = ("apply", "--auto-approve", "--changed-since", "main", "--force-conflicts")
    result = run_cli(*args, cwd=repo, env=env)
    assert result.returncode == 0, result.stderr
    assert patches(server) == {
        "inv_a": {"email": "new@alpha.example"},
        "inv_c": {"email": "new@gamma.example"},
    }
    assert server.store.get("inv_a")["name"] == "Alpha Group Ltd"


@pytest.mark.parametrize("force", [False, True])
def test_a_saved_scoped_plan_is_applied_as_shown(repo: Path, server: Sandbox, force: bool) -> None:
    env = sandbox_env(server)
    plan = run_cli("plan", "--changed-since", "main", "--out", "plan.json", cwd=repo, env=env)
    assert plan.returncode == 1 and (repo / "plan.json").exists()
    shown = run_cli("show", "plan.json", cwd=repo, env=env)
    assert "conflict: at main" in shown.stdout and "1 invite not read" in shown.stdout
    args = ["apply", "--plan", "plan.json", *(["--force-conflicts"] if force else [])]
    result = run_cli(*args, cwd=repo, env=env)
    written = {"inv_a": {"email": "new@alpha.example"}}
    if force:
        written["inv_c"] = {"email": "new@gamma.example"}
    assert patches(server) == written
    assert result.returncode == (0 if force else 1), result.stderr


def test_a_new_entry_is_planned_in_every_field(repo: Path, server: Sandbox) -> None:
    text = CHANGED + "  - id: inv_e\n    name: Epsilon Ltd\n    email: e@epsilon.example\n"
    (repo / "invites" / "all.yaml").write_text(text, encoding="utf-8")
    server.store.put(invite("inv_e", "Old Epsilon", "old@epsilon.example"))
    result = run_cli("plan", "--changed-since", "main", cwd=repo, env=sandbox_env(server))
    assert 'name: "Old Epsilon" -> "Epsilon Ltd"' in result.stdout
    assert 'email: "old@epsilon.example" -> "e@epsilon.example"' in result.stdout
