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
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from support.ci_recipes import EXAMPLE_INVITES, GITHUB, gitlab_job_script, run_shell, shell_env
from support.ci_runner import Runner, StepResult, base_env, load
from support.fake_forge import FakeForge, fake_forge
from support.git import git

from reconciler.sandbox import SANDBOX_CLIENT_ID, SANDBOX_CLIENT_SECRET, Sandbox

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.real,
    pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed"),
]
PYTHON_BIN = Path(sys.executable).parent  # a python3 of 3.11 or newer, for the action's venv
# Two clients, as the recipes' setup asks: the read-only one (pull requests, drift) is the
# repository's; the write one is the `production` environment's (apply), and overrides it.
READ_ID, READ_SECRET = "ci-read-only-client", "ci-read-only-secret"
JOB_TOKEN = "ghs_the-jobs-token"


def clients(job: str, base_url: str) -> tuple[dict[str, str], dict[str, str]]:
    """The vars and secrets a GitHub job sees: the environment's over the repository's."""
    production = load(GITHUB)["jobs"][job].get("environment") == "production"
    client_id, secret = (
        (SANDBOX_CLIENT_ID, SANDBOX_CLIENT_SECRET) if production else (READ_ID, READ_SECRET)
    )
    return (
        {"RECONCILER_BASE_URL": base_url, "RECONCILER_CLIENT_ID": client_id},
        {"RECONCILER_CLIENT_SECRET": secret},
    )


def run_install_step(runner_temp: Path) -> StepResult:
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

    def __init__(self, root: Path, server: Sandbox, forge: FakeForge) -> None:
        self.work = root / "repo"
        self.server = server
        self.forge = forge  # GitHub's and GitLab's API, for the plan comment
        self.patches_seen = 0  # the server's PATCHes that patched() has returned
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
def repo(tmp_path: Path, start_sandbox: Callable[..., Sandbox]) -> Iterator[Repo]:
    with fake_forge() as forge:
        yield Repo(tmp_path, start_sandbox(read_only_clients=((READ_ID, READ_SECRET),)), forge)


def github_job(
    repo: Repo,
    runner_temp: Path,
    job: str,
    base_url: str | None = None,
    work: Path | None = None,
    **github: Any,
) -> list[StepResult]:
    """The GitHub job run in ``work`` (the repository's checkout), its summary fresh."""
    work = work or repo.work
    env = base_env(work.parent, PYTHON_BIN) | repo.forge.github_env(work.parent)
    (work.parent / "step_summary").write_text("", encoding="utf-8")
    variables, secrets = clients(job, base_url or repo.server.url)
    context = {"ref": "refs/heads/main", "base_ref": "main", "token": JOB_TOKEN}
    runner = Runner(
        work, runner_temp, env, context | {"sha": git(work, "rev-parse", "HEAD")} | github,
        vars=variables, secrets=secrets, inputs=github.pop("inputs", {}),
    )  # fmt: skip
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
    # ONE sticky comment, posted by the real CLI to the fake GitHub API, edited since.
    (mine,) = repo.forge.mine()
    assert "failed (exit 1)" in mine["body"] and "actions/runs/42" in mine["body"]
    assert {r[2] for r in repo.forge.requests} == {f"Bearer {JOB_TOKEN}"}
    assert ("PATCH", f"/repos/org/invites/issues/comments/{mine['id']}") in [
        r[:2] for r in repo.forge.requests
    ]
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
    (mine,) = repo.forge.mine()
    assert "Validation failed: no plan was made" in mine["body"]


def test_github_merge_applies_what_it_changed_then_drift_and_full_apply(
    repo: Repo, installed: Path
) -> None:
    Loop(repo, installed)  # the repository on a forge: no record of an apply yet
    summary = repo.work.parent / "step_summary"
    # The drift check of the examples against the sandbox: they differ (exit 2).
    failed, text = outcome(github_job(repo, installed, "drift", event_name="schedule"))
    assert failed and "Drift detected" in text
    assert "Invite plan" in summary.read_text(encoding="utf-8")
    # On drift, adopt wrote the platform's values into the checkout, for the pull request.
    assert "invites/emea.yaml" in git(repo.work, "status", "--porcelain")
    assert "Adopted" in text
    git(repo.work, "checkout", "--", ".")  # the next job has a fresh checkout
    # The first commit is the last successful apply.
    git(repo.work, "push", "-q", "origin", f"{repo.first}:{APPLIED}")
    # A push that changes one invite applies that one (exit 0), nothing else.
    repo.edit(EMEA_NAME, "name: Acme Merged plc")
    repo.commit("one invite changed")
    git(repo.work, "push", "-q", "origin", "main")
    results = github_job(repo, installed, "apply", event_name="push")
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
    assert "--changed-since-applied" not in text  # every invite, whatever the record says
    failed, text = outcome(github_job(repo, installed, "drift", event_name="schedule"))
    assert not failed and "No drift" in text
    # An apply that fails (exit 1): an id the platform does not know.
    repo.add_unknown_invite()
    before = git(repo.work, "rev-parse", "HEAD")
    repo.commit("an unknown invite")
    git(repo.work, "push", "-q", "origin", "main", f"{before}:{APPLIED}")
    results = github_job(repo, installed, "apply", event_name="push")
    failed, text = outcome(results)
    assert failed and "inv_not_on_the_platform" in text
    assert f"Applied: {before[:12]} (reconcile/applied of origin); pending: " in text
    failed, text = outcome(github_job(repo, installed, "drift", event_name="schedule"))
    assert failed and "Drift check failed" in text


def gitlab(repo: Repo, installed: Path, job: str, **ci: str) -> subprocess.CompletedProcess[str]:
    env = shell_env(repo.work.parent, installed / "invite-reconciler" / "bin")
    env |= {
        "RECONCILER_BASE_URL": repo.server.url,
        "RECONCILER_CLIENT_ID": READ_ID,
        "RECONCILER_CLIENT_SECRET": READ_SECRET,
        "RECONCILER_WRITE_CLIENT_ID": SANDBOX_CLIENT_ID,
        "RECONCILER_WRITE_CLIENT_SECRET": SANDBOX_CLIENT_SECRET,
        "NO_COLOR": "1",
        **ci,
    }
    return run_shell(*gitlab_job_script(job), repo.work, env)


def test_gitlab_recipe_plans_applies_and_checks_drift(repo: Repo, installed: Path) -> None:
    Loop(repo, installed)  # the repository on a forge: no record of an apply yet
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
    # The first commit is the last successful apply.
    git(repo.work, "push", "-q", "origin", "main", f"{repo.first}:{APPLIED}")
    apply = gitlab(repo, installed, "apply")
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


# --- the loop: apply remembers its last success, drift never undoes a pending change ----------

APPLIED = "refs/heads/reconcile/applied"
DOWN = "http://127.0.0.1:9"  # nothing listens: the platform is down


class Loop:
    """The repository on the forge (a bare origin that logs every move of its refs), the
    checkout CI jobs run in, and the platform (a sandbox)."""

    def __init__(self, repo: Repo, installed: Path) -> None:
        self.repo, self.installed = repo, installed
        self.origin = repo.work.parent / "origin.git"
        git(repo.work.parent, "init", "-q", "--bare", "-b", "main", str(self.origin))
        git(self.origin, "config", "core.logAllRefUpdates", "always")
        git(self.origin, "config", "receive.advertisePushOptions", "true")  # as GitLab does
        git(repo.work, "remote", "add", "origin", str(self.origin))
        git(repo.work, "push", "-q", "origin", "main")
        # What a job leaves in its checkout is never committed by the merges here.
        (repo.work / ".git" / "info" / "exclude").write_text("audit.jsonl\n", encoding="utf-8")

    def merge(self, old: str, new: str, name: str = "emea.yaml") -> str:
        self.repo.edit(old, new, name)
        sha = self.repo.commit(f"{new}")
        git(self.repo.work, "push", "-q", "origin", "main")
        return sha

    def applied(self) -> str | None:
        found = subprocess.run(
            ["git", "rev-parse", "--verify", "--quiet", APPLIED],
            cwd=self.origin, capture_output=True, text=True, check=False,
        )  # fmt: skip
        return found.stdout.strip() or None

    def checkout(self, sha: str | None = None) -> Path:
        """The job's checkout (fetch-depth: 0): every branch of origin, at ``sha``."""
        work = self.repo.work
        git(work, "fetch", "-q", "--prune", "origin")
        git(work, "checkout", "-q", "--force", sha or "main")
        git(work, "clean", "-qfdx", "-e", "audit.jsonl")
        return work

    def github(
        self, job: str, base_url: str | None = None, work: Path | None = None, **github: Any
    ) -> list[StepResult]:
        work = work or self.checkout()
        runner_temp = self.installed if work == self.repo.work else self._runner_temp(work)
        return github_job(self.repo, runner_temp, job, base_url, work, **github)

    def _runner_temp(self, work: Path) -> Path:
        """Another runner's temporary directory, the tool installed there already."""
        temp = work.parent / "runner"
        if not temp.exists():
            temp.mkdir()
            (temp / "invite-reconciler").symlink_to(self.installed / "invite-reconciler")
        return temp

    def summary(self, work: Path | None = None) -> str:
        return ((work or self.repo.work).parent / "step_summary").read_text(encoding="utf-8")

    def moves(self) -> list[tuple[str, str]]:
        """Every move of the record on the forge, (old, new), oldest first."""
        log = (self.origin / "logs" / APPLIED).read_text(encoding="utf-8").splitlines()
        return [tuple(line.split()[:2]) for line in log]  # type: ignore[misc]


def forward_only(loop: Loop) -> None:
    """The record only ever moved to a descendant of where it was."""
    for old, new in loop.moves():
        if set(old) != {"0"}:
            git(loop.origin, "merge-base", "--is-ancestor", old, new)  # raises if not


def patched(repo: Repo) -> list[str]:
    """The invites PATCHed since the last call, by id."""
    # Kept on the repository, not by id(): a later test's repository may get a freed id.
    calls = repo.server.stats.calls("PATCH")
    new, repo.patches_seen = calls[repo.patches_seen :], len(calls)
    return sorted(r.path.rsplit("/", 1)[1] for r in new)


def test_github_loop_retries_a_failed_apply_and_drift_leaves_the_pending_change_alone(
    repo: Repo, installed: Path
) -> None:
    loop = Loop(repo, installed)
    # The first run: nothing recorded, every invite applied, then recorded.
    first = repo.first
    failed, text = outcome(loop.github("apply", event_name="push"))
    assert not failed and "no successful apply recorded yet" in text, text
    failed, text = outcome(loop.github("record", event_name="push"))
    assert not failed, text
    assert loop.applied() == first
    assert f"Recorded: reconcile/applied (new) -> {first}" in loop.summary()
    patched(repo)

    # Merge A; its apply fails: the platform is down. Nothing is recorded (the record job
    # needs apply to succeed), and the job summary says what is pending.
    a = loop.merge(EMEA_NAME, "name: Acme Merged plc")
    failed, text = outcome(loop.github("apply", base_url=DOWN, event_name="push"))
    assert failed
    assert loop.applied() == first
    pending = f"Applied: {first[:12]} (reconcile/applied of origin); pending: {first[:12]}.."
    assert f"{pending}{a[:12]} (1 commit)." in loop.summary()

    # The nightly drift check: a real edit on the platform, and A's change not applied.
    repo.server.store.update("inv_9k4r2", {"name": "Northwind Edited On The Platform"})
    loop.checkout()
    failed, text = outcome(loop.github("drift", event_name="schedule"))
    assert failed and "Drift detected" in text
    assert f"{pending}{a[:12]} (1 commit)." in loop.summary()
    diff = git(repo.work, "diff", "-U0", "--no-color")
    assert "+    name: Northwind Edited On The Platform" in diff  # the drift, adopted
    assert "Acme" not in diff  # A's change is pending: never proposed for reversal
    body = (installed / "adopt-body.md").read_text(encoding="utf-8")
    adopted, pending = body.split("### Pending apply (1)")
    assert "inv&#95;9k4r2" in adopted and "inv&#95;8f2k1" not in adopted
    assert "inv&#95;8f2k1" in pending.split("### Conflicts (0)")[0]
    # Nobody merges the adopt pull request: the platform's edit stays as drift.

    # Merge B, the platform up again: its apply applies A's change and B's, then records B.
    b = loop.merge("name: São Paulo Pagamentos Ltda.", "name: SP Pagamentos Ltda.", "americas.yaml")
    failed, text = outcome(loop.github("apply", event_name="push"))
    assert not failed, text
    assert f"--changed-since {first}" in text or "since the last successful apply" in text
    assert patched(repo) == ["inv_4t8y6", "inv_8f2k1"]  # both; not the drift, not reviewed
    assert not outcome(loop.github("record", event_name="push"))[0]
    assert loop.applied() == b
    forward_only(loop)


def test_github_merge_whose_pull_request_pushed_its_head_as_the_record_applies_the_change(
    repo: Repo, installed: Path
) -> None:
    """Issue 51 row 6: any branch may be pushed by whoever may push one. A pull request's
    author pushes its head to reconcile/applied before the merge; after it, the head is in
    main's history (the merge's second parent). Trusted as an ancestor, the apply ran
    --changed-since the head: the reviewed change "not read", exit 0, and the record moved
    past it. main never pointed at the head: every invite is planned, with a warning."""
    loop = Loop(repo, installed)
    git(repo.work, "push", "-q", "origin", f"{repo.first}:{APPLIED}")  # applied, trusted
    git(repo.work, "checkout", "-q", "-b", "pr")
    repo.edit(EMEA_NAME, "name: Acme Reviewed plc")
    head = repo.commit("the reviewed change")
    git(repo.work, "push", "-q", "--force", "origin", f"{head}:{APPLIED}")  # the forgery
    git(repo.work, "checkout", "-q", "main")
    git(repo.work, "merge", "-q", "--no-ff", "-m", "Merge the pull request", "pr")
    git(repo.work, "push", "-q", "origin", "main")
    results = loop.github("apply", event_name="push")
    failed, text = outcome(results)
    assert not failed and step_outputs(results, "Apply what changed")["exitcode"] == "0", text
    warned = f"reconcile/applied of origin is at {head}, not on main's first-parent history"
    assert f"::warning title=Last successful apply::{warned}" in text
    assert "inv_8f2k1" in patched(repo)  # the reviewed change, written
    assert repo.server.store.get("inv_8f2k1")["name"] == "Acme Reviewed plc"
    # The record job refuses to move a record main never pointed at; the job fails, loud.
    failed, text = outcome(loop.github("record", event_name="push"))
    assert failed and "never moved backwards or sideways" in text
    assert loop.applied() == head


def test_github_concurrent_records_never_move_the_ref_backwards(
    repo: Repo, installed: Path
) -> None:
    import threading

    loop = Loop(repo, installed)
    assert not outcome(loop.github("record", event_name="push"))[0]
    c = loop.merge(EMEA_NAME, "name: Acme C plc")
    d = loop.merge("name: Acme C plc", "name: Acme D plc")
    # Two checkouts, as two runners have: the merges' record jobs race.
    works = {}
    for name, sha in (("c", c), ("d", d)):
        work = repo.work.parent / f"job-{name}" / "repo"
        work.parent.mkdir()
        git(repo.work.parent, "clone", "-q", str(loop.origin), str(work))
        git(work, "checkout", "-q", sha)
        works[name] = work
    results: dict[str, list[StepResult]] = {}

    def record(name: str) -> None:
        results[name] = loop.github("record", work=works[name], event_name="push")

    threads = [threading.Thread(target=record, args=(n,)) for n in ("d", "c")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not any(outcome(r)[0] for r in results.values())
    assert loop.applied() == d
    # A re-run of C's record, or of C's apply, later: neither moves anything back.
    assert not outcome(loop.github("record", work=works["c"], event_name="push"))[0]
    assert loop.applied() == d
    git(works["c"], "fetch", "-q", "origin")  # a new run's checkout: the branches as now
    failed, text = outcome(loop.github("apply", work=works["c"], event_name="push"))
    assert not failed and f"{d}, a later commit of main, is applied already" in text
    assert patched(repo) == []
    # Sideways: a record off main's history is refused, never moved.
    git(repo.work, "checkout", "-q", "--orphan", "rewritten")
    sideways = repo.commit("a rewritten history")
    failed, text = outcome(loop.github("record", work=repo.work, event_name="push"))
    assert failed and "reconcile/applied is not moved" in text
    assert loop.applied() == d and sideways != d
    forward_only(loop)


def test_gitlab_loop_retries_a_failed_apply_and_records_only_success(
    repo: Repo, installed: Path
) -> None:
    loop = Loop(repo, installed)
    write = {
        "RECONCILER_WRITE_CLIENT_ID": SANDBOX_CLIENT_ID,
        "RECONCILER_WRITE_CLIENT_SECRET": SANDBOX_CLIENT_SECRET,
        "RECORD_TOKEN": "a-project-access-token",
        "RECORD_REMOTE": str(loop.origin),
    }
    first = gitlab(repo, installed, "apply", **write)
    assert first.returncode == 0, first.stderr
    assert loop.applied() == repo.first
    patched(repo)
    a = loop.merge(EMEA_NAME, "name: Acme Merged plc")
    loop.checkout()
    down = gitlab(repo, installed, "apply", **write, RECONCILER_BASE_URL=DOWN)
    assert down.returncode == 1
    assert f"pending: {repo.first[:12]}..{a[:12]}" in down.stdout
    assert loop.applied() == repo.first
    # The drift check leaves A's change alone.
    drift = gitlab(repo, installed, "drift")
    assert drift.returncode == 1 and "not applied yet" in drift.stdout
    assert git(repo.work, "status", "--porcelain", "--untracked-files=no") == ""
    b = loop.merge("name: São Paulo Pagamentos Ltda.", "name: SP Pagamentos Ltda.", "americas.yaml")
    loop.checkout()
    second = gitlab(repo, installed, "apply", **write)
    assert second.returncode == 0, second.stderr
    assert patched(repo) == ["inv_4t8y6", "inv_8f2k1"]
    assert loop.applied() == b
    forward_only(loop)
