"""The recipes for real: the composite action installs the tool from this checkout, and
the GitHub jobs and GitLab scripts run it against the sandbox for exit codes 0, 1 and 2.
"""

from __future__ import annotations

import fcntl
import json
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from support.ci_recipes import EXAMPLE_INVITES, GITHUB, gitlab_job_script, run_shell, shell_env
from support.ci_runner import Runner, StepResult, base_env, load

from reconciler.sandbox import SANDBOX_CLIENT_ID, SANDBOX_CLIENT_SECRET, Sandbox

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed"),
]
PYTHON_BIN = Path(sys.executable).parent  # a python3 of 3.11 or newer, for the action's venv


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-c", "user.name=T", "-c", "user.email=t@example.com", *args],
        cwd=repo,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()


def run_install_step(runner_temp: Path) -> subprocess.CompletedProcess[str]:
    """The action's install step, run for real with RUNNER_TEMP=runner_temp."""
    runner = Runner(
        runner_temp, runner_temp, base_env(runner_temp, PYTHON_BIN), {"event_name": "push"}
    )
    steps = [s for s in load(Path(GITHUB).parents[2] / "action.yml")["runs"]["steps"]]
    (install,) = [s for s in steps if "pip install" in s.get("run", "")]
    ctx = runner.context({}, {})
    ctx["github"] = {"action_path": str(Path(GITHUB).parents[2])}
    return runner.run_script(
        "install",
        install,
        ctx,
        {
            "PYTHON": "",
            "ACTION_PATH": str(Path(GITHUB).parents[2]),
            "VENV": str(runner_temp / "invite-reconciler"),
        },
    )


@pytest.fixture(scope="session")
def installed(tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> Path:
    """RUNNER_TEMP after the action's install step ran for real.

    The install takes a while, so it happens once per test run: the first worker
    installs under a lock in the run's shared temporary directory; each worker
    then runs the step again in its own RUNNER_TEMP, which finds the tool there.
    """
    basetemp = tmp_path_factory.getbasetemp()
    shared = basetemp if worker_id == "master" else basetemp.parent
    first = shared / "ci-recipes-install"
    with (shared / "ci-recipes-install.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (first / "invite-reconciler" / "bin" / "reconcile").exists():
            first.mkdir(exist_ok=True)
            result = run_install_step(first)
            assert result.returncode == 0, result.stdout + result.stderr
    temp = tmp_path_factory.mktemp("runner")
    (temp / "invite-reconciler").symlink_to(first / "invite-reconciler")
    result = run_install_step(temp)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "reconcile, version" in result.stdout
    return temp


class Repo:
    """A repository of invites (the examples) with its history, and a sandbox to plan against."""

    def __init__(self, root: Path, server: Sandbox) -> None:
        self.work = root / "repo"
        self.server = server
        shutil.copytree(EXAMPLE_INVITES, self.work / "invites")
        git(self.work, "init", "-q", "-b", "main")
        self.first = self.commit("the example invites")

    def commit(self, message: str) -> str:
        git(self.work, "add", "-A")
        git(self.work, "commit", "-q", "--allow-empty", "-m", message)
        return git(self.work, "rev-parse", "HEAD")

    def edit(self, old: str, new: str, name: str = "emea.yaml") -> None:
        path = self.work / "invites" / name
        text = path.read_text(encoding="utf-8")
        assert old in text
        path.write_text(text.replace(old, new, 1), encoding="utf-8")

    def add_unknown_invite(self) -> None:
        path = self.work / "invites" / "zz-new.yaml"
        path.write_text("invites:\n  - id: inv_not_on_the_platform\n", encoding="utf-8")

    def reads(self) -> list[str]:
        return sorted(r.path.rsplit("/", 1)[1] for r in self.server.stats.calls("GET"))


@pytest.fixture
def repo(tmp_path: Path, start_sandbox: Callable[..., Sandbox]) -> Repo:
    return Repo(tmp_path, start_sandbox())


def github_job(repo: Repo, installed: Path, job: str, **github: Any) -> list[StepResult]:
    env = base_env(repo.work.parent, PYTHON_BIN)
    context = {"ref": "refs/heads/main", "base_ref": "main"} | github
    runner = Runner(
        repo.work,
        installed,
        env,
        context,
        vars={"RECONCILER_BASE_URL": repo.server.url, "RECONCILER_CLIENT_ID": SANDBOX_CLIENT_ID},
        secrets={"RECONCILER_CLIENT_SECRET": SANDBOX_CLIENT_SECRET},
        inputs=github.pop("inputs", {}),
    )
    return runner.run_job(load(GITHUB), job)


def outcome(results: list[StepResult]) -> tuple[bool, str]:
    """(the job failed, everything it printed)."""
    text = "".join(r.stdout + r.stderr for r in results)
    return any(r.returncode for r in results), text


def step_outputs(results: list[StepResult], name: str) -> dict[str, str]:
    (found,) = [r for r in results if r.name.startswith(name)]
    return found.outputs


EMEA_EMAIL = "email: compliance@acme.example"
# A field the platform holds as the files do: a pull request changing it is an ordinary
# change. (The examples' e-mail differs on the sandbox: changing it is a conflict.)
EMEA_NAME = "name: Acme Holdings Ltd"


@pytest.mark.slow  # first, alone: it waits for the install while other workers go on
def test_github_pr_plan_reads_only_what_the_pr_changed(repo: Repo, installed: Path) -> None:
    git(repo.work, "update-ref", "refs/remotes/origin/main", "HEAD")
    # exit 0: a comment changed, no entry did.
    repo.edit("invites:", "# reviewed\ninvites:")
    failed, text = outcome(github_job(repo, installed, "plan", event_name="pull_request"))
    assert not failed, text
    assert repo.reads() == []
    # exit 2: one invite changed; one read, and the plan is posted and saved.
    repo.edit(EMEA_NAME, "name: Acme Holdings plc")
    results = github_job(repo, installed, "plan", event_name="pull_request")
    failed, text = outcome(results)
    assert not failed, text
    outputs = step_outputs(results, "Plan the invites")
    assert outputs["exitcode"] == "2"
    assert repo.reads() == ["inv_8f2k1"]
    assert "Acme Holdings plc" in Path(outputs["markdown"]).read_text(encoding="utf-8")
    assert json.loads(Path(outputs["plan-file"]).read_text(encoding="utf-8"))["changes"]
    # exit 1: an invite the platform does not know; the job fails, with an annotation.
    repo.add_unknown_invite()
    results = github_job(repo, installed, "plan", event_name="pull_request")
    failed, text = outcome(results)
    assert failed and step_outputs(results, "Plan the invites")["exitcode"] == "1"
    # Annotated at the entry, on the pull request's line.
    assert "::error file=invites/zz-new.yaml,line=2,title=inv_not_on_the_platform::" in text
    # The action showed the plan fenced: stop-commands with a token, then the token.
    fence = re.search(r"^::stop-commands::([0-9a-f]{32})$", text, re.MULTILINE)
    assert fence and f"\n::{fence[1]}::\n" in text


def test_github_validation_errors_are_annotated_on_their_lines(repo: Repo, installed: Path) -> None:
    repo.edit(EMEA_EMAIL, "email: 42")
    failed, text = outcome(github_job(repo, installed, "plan", event_name="pull_request"))
    assert failed
    assert "::error file=invites/emea.yaml,line=" in text
    assert repo.server.stats.total == 0


def test_github_merge_applies_what_it_changed_then_drift_and_full_apply(
    repo: Repo, installed: Path
) -> None:
    summary = repo.work.parent / "step_summary"
    # The drift check of the examples against the sandbox: they differ (exit 2).
    failed, text = outcome(github_job(repo, installed, "drift", event_name="schedule"))
    assert failed and "Drift detected" in text
    assert "Invite plan" in summary.read_text(encoding="utf-8")
    # On drift, adopt wrote the platform's values into the checkout, for the pull request.
    assert "invites/emea.yaml" in git(repo.work, "status", "--porcelain")
    assert "Adopted" in text
    git(repo.work, "checkout", "--", ".")  # the next job has a fresh checkout
    # A push that changes one invite applies that one (exit 0), nothing else.
    repo.edit(EMEA_NAME, "name: Acme Merged plc")
    repo.commit("one invite changed")
    results = github_job(repo, installed, "apply", event_name="push", event={"before": repo.first})
    failed, text = outcome(results)
    assert not failed, text
    patched = [r.path.rsplit("/", 1)[1] for r in repo.server.stats.calls("PATCH")]
    assert patched == ["inv_8f2k1"]
    audit = (repo.work / "audit.jsonl").read_text(encoding="utf-8").splitlines()
    entries = [json.loads(line) for line in audit]
    assert {e["invite_id"] for e in entries} == {"inv_8f2k1"}
    assert entries[-1]["outcome"] == "ok"
    # A full apply, by hand, then drift finds nothing (exit 0).
    failed, text = outcome(
        github_job(
            repo, installed, "apply", event_name="workflow_dispatch", inputs={"full_apply": True}
        )
    )
    assert not failed, text
    assert "Manual full apply" in text
    failed, text = outcome(github_job(repo, installed, "drift", event_name="schedule"))
    assert not failed and "No drift" in text
    # An apply that fails (exit 1): an id the platform does not know.
    repo.add_unknown_invite()
    before = git(repo.work, "rev-parse", "HEAD")
    repo.commit("an unknown invite")
    results = github_job(repo, installed, "apply", event_name="push", event={"before": before})
    failed, text = outcome(results)
    assert failed and "inv_not_on_the_platform" in text
    failed, text = outcome(github_job(repo, installed, "drift", event_name="schedule"))
    assert failed and "Drift check failed" in text


def gitlab(repo: Repo, installed: Path, job: str, **ci: str) -> subprocess.CompletedProcess[str]:
    env = shell_env(repo.work.parent, installed / "invite-reconciler" / "bin")
    env |= {
        "RECONCILER_BASE_URL": repo.server.url,
        "RECONCILER_CLIENT_ID": SANDBOX_CLIENT_ID,
        "RECONCILER_CLIENT_SECRET": SANDBOX_CLIENT_SECRET,
        "NO_COLOR": "1",
        **ci,
    }
    return run_shell(*gitlab_job_script(job), repo.work, env)


def test_gitlab_recipe_plans_applies_and_checks_drift(repo: Repo, installed: Path) -> None:
    repo.edit(EMEA_NAME, "name: Acme Merged plc")
    plan = gitlab(repo, installed, "plan", CI_MERGE_REQUEST_DIFF_BASE_SHA=repo.first)
    assert plan.returncode == 0 and "Changes pending" in plan.stdout, plan.stderr
    assert repo.reads() == ["inv_8f2k1"]
    assert json.loads((repo.work / "plan.json").read_text(encoding="utf-8"))["changes"]

    drift = gitlab(repo, installed, "drift")
    assert drift.returncode == 1 and "DRIFT DETECTED" in drift.stderr
    # On drift, adopt wrote the platform's values; without ADOPT_TOKEN, only reported.
    assert "ADOPT_TOKEN is not set" in drift.stderr
    assert git(repo.work, "status", "--porcelain", "--untracked-files=no")
    git(repo.work, "checkout", "--", ".")  # the next job has a fresh checkout, with the edit
    repo.edit(EMEA_NAME, "name: Acme Merged plc")

    repo.commit("one invite changed")
    apply = gitlab(repo, installed, "apply", CI_COMMIT_BEFORE_SHA=repo.first)
    assert apply.returncode == 0, apply.stderr
    assert [r.path.rsplit("/", 1)[1] for r in repo.server.stats.calls("PATCH")] == ["inv_8f2k1"]
    full = gitlab(repo, installed, "apply", FULL_APPLY="1")
    assert full.returncode == 0, full.stderr
    assert gitlab(repo, installed, "drift").returncode == 0

    repo.add_unknown_invite()
    plan = gitlab(repo, installed, "plan", CI_MERGE_REQUEST_DIFF_BASE_SHA=repo.first)
    assert plan.returncode == 1
    assert gitlab(repo, installed, "drift").returncode == 1
    validate = gitlab(repo, installed, "validate")
    assert validate.returncode == 0
    assert json.loads((repo.work / "gl-code-quality-report.json").read_text()) == []
