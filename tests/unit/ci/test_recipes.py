"""The CI recipes in examples/ci, the composite action and the pre-commit hook: valid,
pinned, every command one the CLI accepts, exit codes 0, 1 and 2 honoured.

The GitHub jobs run through tests/support/ci_runner.py (steps, expressions, the composite
action's own steps); GitLab scripts run with bash as the runner would. Here
`reconcile` is a stub that exits 0, 1 or 2; tests/e2e/test_ci_recipes_sandbox.py
runs the same jobs with the real tool against the sandbox.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from support import ci_recipes
from support.ci_recipes import (
    CI,
    EXAMPLE_INVITES,
    GITHUB,
    GITLAB,
    HOOKS,
    RECONCILE,
    REPO,
    action_steps,
    all_reconcile_commands,
    command_problems,
    github_steps,
    github_triggers,
    gitlab_job_script,
    gitlab_jobs,
    hooks,
    init_checkout,
    reconcile_commands,
    write_stub,
)
from support.ci_runner import ACTION, Runner, StepResult, base_env, load

from reconciler.sandbox import SANDBOX_CLIENT_SECRET

stub = ci_recipes.stub  # the fixture, shared with the other recipe tests

UNPINNED = re.compile(r"pip\s+install\s+(?:-\S+\s+)*[\"']?invite[-_]reconciler\b(?!\s*@)")


# --- the files parse; the jobs run when they should ----------------------------------------


@pytest.mark.parametrize("path", [GITHUB, GITLAB, HOOKS, ACTION], ids=lambda p: p.name)
def test_recipe_is_valid_yaml(path: Path) -> None:
    doc = load(path)
    assert isinstance(doc, list if path == HOOKS else dict) and doc


def test_github_workflow_runs_on_pull_requests_pushes_to_main_and_a_schedule() -> None:
    workflow = load(GITHUB)
    triggers = github_triggers(workflow)
    assert "pull_request" in triggers
    assert "main" in triggers["push"]["branches"]
    crons = [entry["cron"] for entry in triggers["schedule"]]
    assert crons and all(len(cron.split()) == 5 for cron in crons)
    assert triggers["workflow_dispatch"]["inputs"]["full_apply"]["default"] is False
    jobs = workflow["jobs"]
    assert "pull_request" in jobs["plan"]["if"]
    assert "push" in jobs["apply"]["if"] and "refs/heads/main" in jobs["apply"]["if"]
    assert "schedule" in jobs["drift"]["if"]
    assert "pull_request" not in jobs["apply"]["if"] and "pull_request" not in jobs["drift"]["if"]


@pytest.mark.parametrize(
    ("event", "ref", "full_apply", "expected"),
    [
        ("pull_request", "refs/pull/7/merge", False, {"plan"}),
        ("push", "refs/heads/main", False, {"apply", "record"}),
        ("push", "refs/heads/feature", False, set()),
        ("schedule", "refs/heads/main", False, {"drift"}),
        ("workflow_dispatch", "refs/heads/main", False, {"drift"}),
        ("workflow_dispatch", "refs/heads/main", True, {"apply", "record"}),
        ("workflow_dispatch", "refs/heads/feature", True, set()),
    ],
)
def test_github_jobs_run_on_the_right_events(
    event: str, ref: str, full_apply: bool, expected: set[str]
) -> None:
    from support.ci_runner import should_run

    ctx = {"github": {"event_name": event, "ref": ref}, "inputs": {"full_apply": full_apply}}
    jobs = load(GITHUB)["jobs"]

    def runs(name: str) -> bool:
        # A job that needs others runs after them, when they ran and succeeded.
        job = jobs[name]
        needs = job.get("needs", [])
        needs = [needs] if isinstance(needs, str) else needs
        return all(runs(n) for n in needs) and should_run(job.get("if"), ctx, False)

    assert {name for name in jobs if runs(name)} == expected


def test_github_permissions_are_least_privilege() -> None:
    workflow = load(GITHUB)
    top = workflow.get("permissions")
    assert top is not None, "set top-level permissions, or jobs get the repository default"
    assert not isinstance(top, str) and "write" not in top.values()
    writes = set()
    for name, job in workflow["jobs"].items():
        assert isinstance(job.get("permissions"), dict), f"job {name} has no permissions block"
        writes |= {(name, scope) for scope, level in job["permissions"].items() if level == "write"}
    # The PR comment; the record of the last successful apply; the drift job's adopt
    # branch and pull request.
    assert writes == {
        ("plan", "pull-requests"),
        ("record", "contents"),
        ("drift", "contents"),
        ("drift", "pull-requests"),
    }


def test_github_applies_never_overlap_and_are_never_cancelled() -> None:
    jobs = load(GITHUB)["jobs"]
    concurrency = jobs["apply"]["concurrency"]
    assert concurrency["group"] and concurrency["cancel-in-progress"] is False
    others = [
        name
        for name, job in jobs.items()
        if name != "apply" and (job.get("concurrency") or {}).get("group") == concurrency["group"]
    ]
    assert others == []


def test_github_run_scripts_hold_no_expressions() -> None:
    # `${{ }}` in a script is pasted in before bash runs (script injection); values go
    # through env: instead, which is also what lets these tests run the scripts.
    steps = [(job, step) for job, step in github_steps()]
    steps += [("action.yml", step) for step in action_steps()]
    for job, step in steps:
        assert "${{" not in step.get("run", ""), f"job {job}, step {step.get('name')}"


def test_github_uploads_the_plan_and_the_audit_log_even_after_a_failure() -> None:
    jobs = load(GITHUB)["jobs"]
    for job, wanted in (("plan", "steps.plan.outputs.plan-file"), ("apply", "audit.jsonl")):
        uploads = [
            s
            for s in jobs[job]["steps"]
            if s.get("uses", "").startswith("actions/upload-artifact@")
        ]
        assert any(wanted in s["with"]["path"] for s in uploads), job
        for step in uploads:
            assert "cancelled()" in step.get("if", "") or "always()" in step.get("if", ""), job


def test_github_posts_one_sticky_comment_through_the_action() -> None:
    # The comment is `reconcile comment`'s (unit/output/test_comment.py); the recipe asks.
    steps = load(GITHUB)["jobs"]["plan"]["steps"]
    assert [s["with"]["command"].split()[0] for s in steps if s.get("with", {}).get("comment")] == [
        "validate",
        "plan",
    ]
    assert not [s for _, s in github_steps() if "github-script" in s.get("uses", "")]


def test_the_recipes_are_short_with_short_scripts_and_no_inline_programs() -> None:
    for path in (GITHUB, GITLAB):
        text = path.read_text(encoding="utf-8")
        assert len(text.splitlines()) <= 200, path.name
        assert "python3 -" not in text and "<<'PY'" not in text and "require(" not in text
    for job, step in github_steps():
        assert len(step.get("run", "").splitlines()) <= 15, (job, step.get("name"))
    for job, value in load(GITLAB).items():
        if isinstance(value, dict):
            for key in ("before_script", "script"):
                lines = sum(len(str(x).splitlines()) for x in value.get(key) or [])
                assert lines <= 15, (job, key)


def test_gitlab_pipeline_has_the_four_jobs_with_the_right_rules() -> None:
    jobs = gitlab_jobs()

    def conditions(name: str) -> str:
        return " ".join(rule.get("if", "") for rule in jobs[name]["rules"])

    assert "merge_request_event" in conditions("validate")
    assert "merge_request_event" in conditions("plan")
    assert "CI_DEFAULT_BRANCH" in conditions("apply")
    assert "merge_request_event" not in conditions("apply")
    assert "schedule" not in conditions("apply")
    assert conditions("drift").strip() == '$CI_PIPELINE_SOURCE == "schedule"'
    assert jobs["apply"]["resource_group"], "applies must not overlap"
    assert jobs["apply"].get("interruptible") is not True
    assert "plan.json" in jobs["plan"]["artifacts"]["paths"]
    assert jobs["plan"]["artifacts"]["when"] == "always"
    assert "audit.jsonl" in jobs["apply"]["artifacts"]["paths"]
    assert jobs["apply"]["artifacts"]["when"] == "always"
    template = load(GITLAB)[".reconcile"]
    version = re.search(r"python:(\d+)\.(\d+)", template["image"])
    assert version and (int(version[1]), int(version[2])) >= (3, 11)
    assert "slim" not in template["image"], "--changed-since and the install need git"


def test_gitlab_validate_declares_its_code_quality_report() -> None:
    validate = gitlab_jobs()["validate"]
    (command,) = reconcile_commands("\n".join(validate["script"]))
    report = command[command.index("--codequality") + 1]
    assert validate["artifacts"]["reports"]["codequality"] == report
    assert validate["artifacts"]["when"] == "always"


# --- installed from a pinned source, never a name on a package index ------------------------


@pytest.mark.parametrize(
    "path", [GITHUB, GITLAB, HOOKS, ACTION, CI / "README.md", REPO / "README.md"], ids=str
)
def test_nothing_installs_an_unpinned_or_unpublished_name(path: Path) -> None:
    assert not UNPINNED.findall(path.read_text(encoding="utf-8"))


def test_the_unpinned_install_check_finds_what_it_must() -> None:
    assert UNPINNED.search("python -m pip install invite-reconciler")
    assert UNPINNED.search("pip install --quiet 'invite-reconciler==1.0'")
    assert not UNPINNED.search('pip install "git+https://x/invite-reconciler.git@v1"')
    assert not UNPINNED.search('pip install "$ACTION_PATH"')


def test_github_jobs_use_the_action_pinned_by_owner_and_tag() -> None:
    text = GITHUB.read_text(encoding="utf-8")
    assert "OWNER/invite-reconciler@TAG" in text.split("\nname:")[0], "say what to fill in"
    for name, job in load(GITHUB)["jobs"].items():
        steps = job["steps"]
        assert any(s.get("uses", "").startswith("actions/checkout@") for s in steps), name
        uses = [s["uses"] for s in steps if "invite-reconciler" in s.get("uses", "")]
        assert uses and set(uses) == {"OWNER/invite-reconciler@TAG"}, name
        assert not any("pip install" in s.get("run", "") for s in steps), name


@pytest.mark.parametrize("path", [GITHUB, ACTION], ids=lambda p: p.name)
def test_every_other_action_is_pinned_by_commit_with_its_tag_in_a_comment(path: Path) -> None:
    # A job that holds the client secret runs exactly the code reviewed: a tag can move.
    for line in path.read_text(encoding="utf-8").splitlines():
        found = re.search(r"uses: (\S+)@(\S+)(.*)", line)
        if not found or found[1] == "OWNER/invite-reconciler":  # the fill-in, said so
            continue
        assert re.fullmatch(r"[0-9a-f]{40}", found[2]), line
        assert re.fullmatch(r" # v\d+\.\d+\.\d+", found[3]), line


def test_the_action_installs_from_its_own_checkout_into_a_venv() -> None:
    action = load(ACTION)
    assert action["runs"]["using"] == "composite"
    assert set(action["outputs"]) == {"exitcode", "plan-file", "markdown"}
    (install,) = [s for s in action_steps() if "pip install" in s.get("run", "")]
    assert install["env"]["ACTION_PATH"] == "${{ github.action_path }}"
    assert "-m venv" in install["run"]
    assert HASHED_DEPENDENCIES in install["run"].replace('"$ACTION_PATH/', "")
    assert 'NO_INDEX "$ACTION_PATH"' in install["run"].replace(NO_INDEX_OPTIONS, "NO_INDEX")
    python = [s for s in action_steps() if s.get("uses", "").startswith("actions/setup-python@")]
    assert python and python[0]["with"]["update-environment"] is False


# Every dependency by hash from the file shipped in the repository; the tool itself from
# the checkout, with no index at all.
HASHED_DEPENDENCIES = '--require-hashes --only-binary=:all: -r requirements/install.txt"'
NO_INDEX_OPTIONS = "--no-deps --no-build-isolation --no-index"


def test_the_hashed_requirements_pin_every_dependency_and_the_build_backend() -> None:
    text = (REPO / "requirements" / "install.txt").read_text(encoding="utf-8")
    pinned = dict(re.findall(r"^([a-z0-9-]+)==(\S+) \\$", text, re.MULTILINE))
    for name in ("click", "requests", "urllib3", "pyyaml", "jsonschema", "hatchling"):
        assert name in pinned, name
    blocks = re.split(r"^(?=[a-z0-9-]+==)", text, flags=re.MULTILINE)[1:]
    assert all("--hash=sha256:" in block for block in blocks)
    # The runtime dependencies among them, and the CI README names every package it installs.
    for name in ("deepdiff", "email-validator", "fastjsonschema", "google-re2"):
        assert name in pinned, name
    readme = (REPO / "examples" / "ci" / "README.md").read_text(encoding="utf-8")
    installed = readme.split("**What is installed.**")[1].split("\n\n")[0]
    said = " ".join(installed.lower().split())
    assert [name for name in pinned if name not in said] == []


def test_gitlab_installs_from_the_repository_at_a_pinned_ref() -> None:
    doc = load(GITLAB)
    install = "\n".join(doc[".reconcile"]["before_script"])
    assert '"$INVITE_RECONCILER_REPO" "$INVITE_RECONCILER_REF"' in install
    assert HASHED_DEPENDENCIES in install.replace('"$src/', "")
    assert f'{NO_INDEX_OPTIONS} "$src"' in install
    assert doc["variables"]["INVITE_RECONCILER_REPO"].endswith("/OWNER/invite-reconciler.git")
    assert doc["variables"]["INVITE_RECONCILER_REF"] == "TAG"
    header = GITLAB.read_text(encoding="utf-8").split("\nworkflow:")[0]
    checklist = header.split("SETUP CHECKLIST", 1)[1]
    assert "INVITE_RECONCILER_REPO and INVITE_RECONCILER_REF" in checklist


def test_gitlab_recipe_says_copy_not_include_while_it_sets_pipeline_wide_keys() -> None:
    # `include:`d, its workflow: and stages: would change the including project's pipelines.
    doc = load(GITLAB)
    header = GITLAB.read_text(encoding="utf-8").split("\nworkflow:")[0]
    readme = (CI / "README.md").read_text(encoding="utf-8")
    if {"workflow", "stages"} & set(doc):
        assert "COPY this file" in header and "Do not `include:` it" in header
        assert "(or `include:` it)" not in readme + header
        assert "do not `include:` it" in readme


# --- every `reconcile` command line is one the CLI accepts ---------------------------------


def test_command_checker_rejects_what_the_cli_rejects() -> None:
    # Guards the test below against a checker that accepts anything.
    assert command_problems(["plan", "--format", "markdown", "--detailed-exitcode"]) == []
    assert command_problems(["apply", "--auto-approve", "--audit-log", "a.jsonl"]) == []
    assert command_problems(["plan", "--detailed-exit-code"])
    assert command_problems(["plan", "--format", "html"])
    assert command_problems(["plan", "--out"])
    assert command_problems(["validate", "--auto-approve"])
    assert command_problems(["diff"])
    assert command_problems(["applied", "show", "--format", "json"]) == []
    assert command_problems(["applied", "advance", "--remote", "x"]) == []
    assert command_problems(["applied"])  # a group: its subcommand is missing
    assert command_problems(["applied", "show", "--remote"])
    found = reconcile_commands(
        'rc=0\nreconcile plan --out p.json > p.md || rc=$?\necho "reconcile apply --nope"\n'
        "if true; then reconcile validate invites 2> err.txt; fi\n"
        "python3 - <<'PY'\nreconcile apply --nope\nPY\n"
    )
    assert found == [["plan", "--out", "p.json"], ["validate", "invites"]]


def test_every_reconcile_command_uses_real_subcommands_and_options() -> None:
    commands = all_reconcile_commands()
    problems = [
        f"{where}: {problem}" for where, cmd in commands for problem in command_problems(cmd)
    ]
    assert problems == []
    lines = {(where.split(":")[0], " ".join(cmd)) for where, cmd in commands}
    assert (GITHUB.name, "plan --detailed-exitcode --changed-since origin/main") in lines
    # A merge applies what changed since the last successful apply; the record job moves it.
    apply = "apply --auto-approve --audit-log audit.jsonl --changed-since-applied"
    assert (GITHUB.name, apply) in lines
    assert (GITHUB.name, "applied advance") in lines
    assert (GITHUB.name, "plan --detailed-exitcode") in lines  # the drift check: everything
    # adopt leaves alone what changed since the last successful apply
    assert (
        GITHUB.name,
        "adopt --summary /runner-temp/adopt-summary.md --changed-since-applied",
    ) in lines
    assert (GITHUB.name, "applied show") in lines
    assert (GITLAB.name, "adopt --summary $out/adopt-summary.md --changed-since-applied") in lines
    assert (GITLAB.name, "applied show") in lines
    remote = "${RECORD_REMOTE:-$CI_SERVER_URL/$CI_PROJECT_PATH.git}"
    assert (GITLAB.name, f"applied advance --remote {remote}") in lines
    assert (GITLAB.name, "validate --codequality gl-code-quality-report.json") in lines
    assert (
        GITLAB.name,
        "plan --format markdown --out plan.json --detailed-exitcode $scope",
    ) in lines
    assert (GITLAB.name, "apply --auto-approve --audit-log audit.jsonl $since") in lines
    assert (GITLAB.name, "plan --detailed-exitcode") in lines


# --- exit codes: 0 and 2 pass the PR plan, 1 fails it; drift fails on 2 --------------------


def stub_runner(
    tmp_path: Path, exit_codes: dict[str, int], stub_env: dict[str, str], **github: Any
) -> tuple[Runner, Path]:
    """A runner with a stub `reconcile` installed where the action installs it, exiting as
    ``exit_codes`` say per subcommand (0 else), and the log of its calls."""
    runner_temp = tmp_path / "runner"
    write_stub(runner_temp / "invite-reconciler" / "bin")
    work = tmp_path / "repo"
    if not work.exists():
        work.mkdir()
        init_checkout(work)
    log = tmp_path / "stub.log"
    log.write_text("", encoding="utf-8")
    env = base_env(tmp_path) | {"STUB_LOG": str(log), "STUB_EXIT": "0"}
    env |= {f"STUB_EXIT_{sub.upper()}": str(code) for sub, code in exit_codes.items()}
    return Runner(work, runner_temp, env | stub_env, github), log


def github_stub_job(
    tmp_path: Path,
    job: str,
    exit_codes: dict[str, int],
    stub_env: dict[str, str] | None = None,
    **github: Any,
) -> tuple[list[StepResult], list[str], Runner]:
    """Run a GitHub job with a stub `reconcile`: its steps' results, the calls, the runner."""
    context = {"event_name": "push", "ref": "refs/heads/main", "base_ref": "main"} | github
    runner, log = stub_runner(tmp_path, exit_codes, stub_env or {}, **context)
    results = runner.run_job(load(GITHUB), job)
    return results, log.read_text(encoding="utf-8").splitlines(), runner


def step(results: list[StepResult], name: str) -> StepResult:
    (found,) = [r for r in results if r.name.startswith(name)]
    return found


def job_failed(results: list[StepResult]) -> bool:
    return any(r.returncode for r in results)


@pytest.mark.parametrize(("plan_exit", "job_fails"), [(0, False), (2, False), (1, True)])
def test_github_pr_plan_passes_on_0_and_2_and_fails_on_1(
    tmp_path: Path, plan_exit: int, job_fails: bool
) -> None:
    results, calls, runner = github_stub_job(
        tmp_path, "plan", {"plan": plan_exit}, event_name="pull_request"
    )
    out = runner.runner_temp / "invite-reconciler-out"
    assert calls == [
        "validate",
        f"plan --format markdown --out {out}/plan.json --detailed-exitcode "
        "--changed-since origin/main",
        # The sticky comment, after a failed plan too.
        f"comment --markdown {out}/plan.md --exitcode {plan_exit}",
    ]
    assert job_failed(results) is job_fails
    plan = step(results, "Plan the invites")
    assert plan.outputs["exitcode"] == str(plan_exit)
    # The plan (stdout) went to the markdown file, progress (stderr) did not.
    markdown = Path(plan.outputs["markdown"]).read_text(encoding="utf-8")
    assert "stub plan for" in markdown and "progress" not in markdown
    # The upload runs after a failed plan too.
    assert step(results, "Upload the saved plan").foreign
    if job_fails:
        assert "::error title=reconcile plan failed::" in plan.stdout


def test_github_pr_plan_after_failed_validation_replaces_the_comment(tmp_path: Path) -> None:
    # A later push that breaks validation must not leave the earlier push's comment
    # ("will be applied when merged") standing: the comment step runs, told why.
    results, calls, _ = github_stub_job(
        tmp_path, "plan", {"validate": 1}, event_name="pull_request"
    )
    # The comment says so (its body: unit/output/test_comment.py).
    assert calls == ["validate", "comment --validate-failed"]
    assert step(results, "Plan the invites").returncode is None
    assert step(results, "Upload the saved plan").returncode is None  # no plan to upload


@pytest.mark.parametrize(
    ("plan_exit", "says"), [(0, "No drift"), (2, "Drift detected"), (1, "failed")]
)
def test_github_drift_check_fails_on_changes_and_on_errors(
    tmp_path: Path, plan_exit: int, says: str
) -> None:
    results, calls, runner = github_stub_job(
        tmp_path, "drift", {"plan": plan_exit}, event_name="schedule"
    )
    out = runner.runner_temp / "invite-reconciler-out"
    # drift: the platform's values proposed, never a change merged but not applied yet
    summary = f"{runner.runner_temp}/adopt-summary.md"
    adopted = [f"adopt --summary {summary} --changed-since-applied"] if plan_exit == 2 else []
    plan = f"plan --format markdown --out {out}/plan.json --detailed-exitcode"
    assert calls == ["applied show", plan, *adopted]
    assert job_failed(results) is (plan_exit != 0)
    assert says in "".join(r.stdout for r in results)
    proposed = step(results, "Propose the platform's values")
    assert proposed.foreign is (plan_exit == 2)


@pytest.mark.parametrize("adopt_exit", [0, 1])
def test_github_drift_proposes_what_adopt_wrote_even_when_it_left_values_alone(
    tmp_path: Path, adopt_exit: int
) -> None:
    results, calls, _ = github_stub_job(
        tmp_path, "drift", {"plan": 2, "adopt": adopt_exit}, event_name="schedule"
    )
    assert calls[-1].startswith("adopt --summary ")
    assert step(results, "Adopt what changed").outputs["exitcode"] == str(adopt_exit)
    assert step(results, "Propose the platform's values").foreign
    report = step(results, "Report drift")
    assert "Drift detected" in report.stdout and report.returncode == 1
    assert ("::error title=Adopt incomplete::" in report.stdout) is (adopt_exit == 1)


def test_github_drift_proposes_nothing_and_fails_when_adopt_stopped_before_its_summary(
    tmp_path: Path,
) -> None:
    """Issue 37 row 6: a failed write leaves a partial result; no pull request carries it."""
    results, calls, _ = github_stub_job(
        tmp_path,
        "drift",
        {"plan": 2, "adopt": 1},
        {"STUB_ADOPT_SUMMARY": "no"},
        event_name="schedule",
    )
    assert calls[-1].startswith("adopt --summary ")
    assert step(results, "Write the pull request's body").outputs["finished"] == "false"
    assert step(results, "Propose the platform's values").returncode is None  # skipped
    report = step(results, "Report drift")
    assert report.returncode == 1 and "::error title=Adopt failed::" in report.stdout
    assert job_failed(results)


def test_github_opens_the_adopt_pull_request_with_an_action_pinned_by_commit() -> None:
    (proposing,) = [s for _, s in github_steps() if "create-pull-request" in s.get("uses", "")]
    action, _, sha = proposing["uses"].partition("@")
    assert action == "peter-evans/create-pull-request"
    assert re.fullmatch(r"[0-9a-f]{40}", sha), "pin a third-party action by its commit SHA"
    line = next(x for x in GITHUB.read_text(encoding="utf-8").splitlines() if sha in x)
    assert re.search(r"# v\d+\.\d+\.\d+$", line), "say which tag the SHA is, for updates"
    assert proposing["with"]["branch"] and proposing["with"]["delete-branch"] is True


@pytest.mark.parametrize("apply_exit", [0, 1])
def test_github_apply_fails_exactly_when_apply_fails(tmp_path: Path, apply_exit: int) -> None:
    results, calls, _ = github_stub_job(
        tmp_path, "apply", {"apply": apply_exit}, event_name="push", event={"before": "0" * 40}
    )
    # After a failed apply the job says which revision is applied and what is pending.
    shown = ["applied show"] if apply_exit else []
    apply = "apply --auto-approve --audit-log audit.jsonl --changed-since-applied"
    assert calls == ["validate", apply, *shown]
    assert job_failed(results) is bool(apply_exit)
    assert (step(results, "Say which revision").returncode is None) is (apply_exit == 0)
    assert step(results, "Upload the audit log").foreign


def test_github_full_apply_by_hand_applies_every_invite(tmp_path: Path) -> None:
    results, calls, _ = github_stub_job(tmp_path, "apply", {}, event_name="workflow_dispatch")
    assert not job_failed(results)
    assert calls == ["validate", "apply --auto-approve --audit-log audit.jsonl"]


def test_github_records_after_apply_with_the_jobs_token_given_to_the_tool(
    tmp_path: Path,
) -> None:
    # The rules (only forward, compare-and-swap, never a record main never pointed at)
    # are the tool's: tests/unit/test_applied.py runs them in a real repository.
    results, calls, _ = github_stub_job(tmp_path, "record", {}, token="ghs_job-token")
    assert not job_failed(results)
    assert calls == ["applied advance (token: ghs_job-token)"]
    assert load(GITHUB)["jobs"]["record"]["needs"] == "apply"


WRITE_CLIENT = {
    "RECONCILER_WRITE_CLIENT_ID": "writer",
    "RECONCILER_WRITE_CLIENT_SECRET": "the-write-client-secret",
}


@pytest.mark.parametrize(("reconcile_exit", "step_exit"), [(0, 0), (2, 0), (1, 1)])
def test_gitlab_mr_plan_script_passes_on_0_and_2_fails_on_1(
    stub: Any, reconcile_exit: int, step_exit: int
) -> None:
    shell, script = gitlab_job_script("plan")
    result, calls = stub(shell, script, reconcile_exit)
    assert result.returncode == step_exit, result.stdout + result.stderr
    assert calls == ["plan --format markdown --out plan.json --detailed-exitcode"]
    assert "stub plan for" in (stub.work / "plan.md").read_text(encoding="utf-8")
    assert "PLAN_NOTE_TOKEN is not set" in result.stderr
    assert "every invite is planned" in result.stderr  # no base commit known here


@pytest.mark.parametrize(("reconcile_exit", "step_exit"), [(0, 0), (2, 1), (1, 1)])
def test_gitlab_drift_check_fails_on_changes_and_on_errors(
    stub: Any, reconcile_exit: int, step_exit: int
) -> None:
    result, calls = stub(*gitlab_job_script("drift"), reconcile_exit)
    assert result.returncode == step_exit, result.stdout + result.stderr
    assert calls[:2] == ["applied show", "plan --detailed-exitcode"]
    # drift: the platform's values proposed, never a change merged but not applied yet
    adopted = [c.split()[::3] for c in calls[2:]]
    assert adopted == ([["adopt", "--changed-since-applied"]] if reconcile_exit == 2 else [])
    says_drift = "drift detected" in (result.stdout + result.stderr).lower()
    assert says_drift == (reconcile_exit == 2)


@pytest.mark.parametrize("summary", ["yes", "no"])
def test_gitlab_drift_fails_when_adopt_fails_and_proposes_nothing_without_its_summary(
    stub: Any, summary: str
) -> None:
    """Issue 37 row 6: adopt exiting non-zero fails the job; with no summary (it stopped
    before the end, a file not written) nothing is proposed."""
    result, calls = stub(
        *gitlab_job_script("drift"),
        0,
        STUB_EXIT_PLAN="2",
        STUB_EXIT_ADOPT="1",
        STUB_ADOPT_SUMMARY=summary,
        ADOPT_TOKEN="t",
    )
    assert result.returncode == 1
    assert [c.split()[0] for c in calls] == ["applied", "plan", "adopt"]
    assert "Adopt failed: reconcile adopt exited 1" in result.stderr
    if summary == "no":
        assert "before it finished" in result.stderr and "nothing is proposed" in result.stderr
        assert "changed no file" not in result.stderr
    else:
        assert "left some values alone" in result.stderr
        assert "changed no file: no merge request" in result.stderr  # the stub wrote none


@pytest.mark.parametrize("reconcile_exit", [0, 1])
def test_gitlab_apply_fails_exactly_when_apply_fails(stub: Any, reconcile_exit: int) -> None:
    result, calls = stub(*gitlab_job_script("apply"), reconcile_exit, **WRITE_CLIENT)
    assert result.returncode == reconcile_exit
    # A failed apply is never recorded: the job says what is applied and pending instead.
    shown = ["applied show"] if reconcile_exit else []
    assert calls == ["apply --auto-approve --audit-log audit.jsonl --changed-since-applied", *shown]
    assert ("RECORD_TOKEN is not set" in result.stderr) is (reconcile_exit == 0)


def test_gitlab_records_a_successful_apply_with_the_record_token(stub: Any) -> None:
    ci = WRITE_CLIENT | {"RECORD_TOKEN": "glpat-record", "RECORD_REMOTE": "/forge/origin.git"}
    result, calls = stub(*gitlab_job_script("apply"), 0, **ci)
    assert result.returncode == 0, result.stderr
    advanced = "applied advance --remote /forge/origin.git (token: glpat-record)"
    assert calls == [
        "apply --auto-approve --audit-log audit.jsonl --changed-since-applied",
        advanced,
    ]


def test_gitlab_apply_needs_the_write_client(stub: Any) -> None:
    result, calls = stub(*gitlab_job_script("apply"), 0)
    assert result.returncode == 1 and calls == []
    assert "RECONCILER_WRITE_CLIENT_SECRET must be set" in result.stderr


def test_gitlab_full_apply_by_hand_ignores_the_push_scope(stub: Any) -> None:
    result, calls = stub(*gitlab_job_script("apply"), 0, FULL_APPLY="1", **WRITE_CLIENT)
    assert result.returncode == 0
    assert calls == ["apply --auto-approve --audit-log audit.jsonl"]


# --- no secret is written into the recipes --------------------------------------------------

SECRET_ASSIGNMENT = re.compile(
    r"(?<![{$])\b(?P<name>[A-Za-z0-9_]*(?:SECRET|TOKEN|PASSWORD)[A-Za-z0-9_]*)\s*[:=][ \t]*"
    r"(?P<value>[^\s#]+)"
)
LEAKED = re.compile(r"ghp_|gho_|github_pat_|glpat-|-----BEGIN|Bearer\s+[A-Za-z0-9]")


def literal_secrets(text: str) -> list[str]:
    """Secret-looking names given a value that is not a reference ($VAR, ${{ secrets.X }})."""
    found = [
        m[0]
        for m in SECRET_ASSIGNMENT.finditer(text)
        if not m["value"].lstrip("\"'").startswith("$")
    ]
    found += [m[0] for m in LEAKED.finditer(text)]
    if SANDBOX_CLIENT_SECRET in text:
        found.append(SANDBOX_CLIENT_SECRET)
    return found


def test_secret_checker_finds_literal_secrets() -> None:
    assert literal_secrets("RECONCILER_CLIENT_SECRET: hunter2\n")
    assert literal_secrets("export RECONCILER_CLIENT_SECRET='hunter2'\n")
    assert literal_secrets("PLAN_NOTE_TOKEN=glpat-abc\n")
    assert literal_secrets(f"x: {SANDBOX_CLIENT_SECRET}\n")
    assert not literal_secrets("RECONCILER_CLIENT_SECRET: ${{ secrets.RECONCILER_CLIENT_SECRET }}")
    assert not literal_secrets('[ -z "${PLAN_NOTE_TOKEN:-}" ]\nTOKEN=$PLAN_NOTE_TOKEN')


@pytest.mark.parametrize("path", [GITHUB, GITLAB, HOOKS, ACTION], ids=lambda p: p.name)
def test_no_secret_is_written_literally(path: Path) -> None:
    assert literal_secrets(path.read_text(encoding="utf-8")) == []


def test_github_credentials_come_from_secrets_and_variables() -> None:
    workflow = load(GITHUB)
    envs: list[dict[str, Any]] = [workflow.get("env") or {}]
    for job in workflow["jobs"].values():
        envs.append(job.get("env") or {})
        envs += [step.get("env") or {} for step in job["steps"]]
    merged: dict[str, set[str]] = {}
    for env in envs:
        for name, value in env.items():
            merged.setdefault(name, set()).add(str(value))
    secret = re.compile(r"\$\{\{ secrets\.RECONCILER_CLIENT_SECRET \}\}")
    assert merged["RECONCILER_CLIENT_SECRET"] and all(
        secret.fullmatch(v) for v in merged["RECONCILER_CLIENT_SECRET"]
    )
    for name in ("RECONCILER_BASE_URL", "RECONCILER_CLIENT_ID"):
        assert all(re.fullmatch(r"\$\{\{ (vars|secrets)\.\w+ \}\}", v) for v in merged[name])
    # The secret is only given to the steps that talk to the API.
    assert "RECONCILER_CLIENT_SECRET" not in (workflow.get("env") or {})
    for name, job in workflow["jobs"].items():
        assert "RECONCILER_CLIENT_SECRET" not in (job.get("env") or {}), name


def test_gitlab_defines_no_credentials_in_the_file() -> None:
    doc = load(GITLAB)
    blocks = [doc.get("variables") or {}]
    blocks += [job.get("variables") or {} for job in gitlab_jobs().values()]
    for block in blocks:
        for name in block:
            assert not re.search(r"SECRET|TOKEN|PASSWORD|CLIENT_ID|BASE_URL", name), name


# --- the pre-commit hook --------------------------------------------------------------------


def hook_command(hook_id: str) -> list[str]:
    entry = shlex.split(hooks()[hook_id]["entry"])
    assert entry[0] == "reconcile"
    return [str(RECONCILE), *entry[1:]]


def run_hook(hook_id: str, *files: str, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RECONCILER_")}
    return subprocess.run(
        [*hook_command(hook_id), *files],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_pre_commit_hook_declares_what_pre_commit_needs() -> None:
    hook = hooks()["reconcile-validate"]
    assert {"id", "name", "entry", "language"} <= hook.keys()
    assert hook["language"] == "python"
    assert hook["pass_filenames"] is True
    files = re.compile(hook["files"])
    for path in ("invites/emea.yaml", "invites/eu/emea.yml"):
        assert files.search(path), path
    for path in (
        "README.md",
        "invites/notes.txt",
        ".github/workflows/invites.yml",
        "x/invites.yaml",
    ):
        assert not files.search(path), path
    for other in hooks().values():
        assert {"id", "name", "entry", "language"} <= other.keys()


@pytest.mark.parametrize(
    ("files", "code", "said"),
    [
        ({}, 0, ""),
        ({"bad.yaml": "invites:\n  - name: No Id Ltd\n"}, 1, "bad.yaml"),
        # A duplicate id across the files it is given.
        (
            {"a.yaml": "invites:\n  - id: inv_same\n", "b.yaml": "invites:\n  - id: inv_same\n"},
            1,
            "inv_same",
        ),
    ],
    ids=["valid", "invalid", "duplicate-id"],
)
def test_pre_commit_hook_validates_the_files_it_is_given(
    tmp_path: Path, files: dict[str, str], code: int, said: str
) -> None:
    for name, text in files.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    given = ["examples/invites/emea.yaml", *(str(tmp_path / name) for name in files)]
    result = run_hook("reconcile-validate", *given)
    assert result.returncode == code, result.stderr
    assert said in result.stderr


def test_pre_commit_validate_all_hook_checks_the_whole_invites_directory(tmp_path: Path) -> None:
    assert hooks()["reconcile-validate-all"]["pass_filenames"] is False
    shutil.copytree(EXAMPLE_INVITES, tmp_path / "invites")
    (tmp_path / "invites" / "zz-copy.yaml").write_text(
        "invites:\n  - id: inv_8f2k1\n", encoding="utf-8"
    )
    result = run_hook("reconcile-validate-all", cwd=tmp_path)
    assert result.returncode == 1
    assert "inv_8f2k1" in result.stderr


# --- the action's `command:` input, on one line or several ----------------------------------


def run_action_command(tmp_path: Path, command: str) -> tuple[StepResult, list[str]]:
    """The action's own steps, with `command:` as given and a stub `reconcile`."""
    runner, log = stub_runner(tmp_path, {}, {}, event_name="push")
    step = {
        "name": "the action",
        "uses": "OWNER/invite-reconciler@TAG",
        "with": {"command": command},
    }
    runner.run_steps([step], runner.context({}, {}), {})
    (result,) = runner.results
    return result, log.read_text(encoding="utf-8").splitlines()


@pytest.mark.parametrize(
    "command",
    [
        "apply --auto-approve --max-changes 20",
        "apply\n  --auto-approve\n  --max-changes 20\n",  # `command: |`
        "apply --auto-approve \\\n  --max-changes 20",  # a shell continuation, copied
        "  apply\t--auto-approve\n\n--max-changes   20  ",
    ],
    ids=["one-line", "block", "backslash", "spacing"],
)
def test_the_action_takes_a_command_on_several_lines_whole(tmp_path: Path, command: str) -> None:
    result, calls = run_action_command(tmp_path, command)
    assert result.returncode == 0, result.stdout + result.stderr
    assert calls == ["apply --auto-approve --max-changes 20"]


def test_the_action_refuses_two_commands_in_one_input(tmp_path: Path) -> None:
    result, calls = run_action_command(tmp_path, "validate\nplan --detailed-exitcode\n")
    assert result.returncode == 1 and calls == []
    assert "::error title=invite-reconciler::line 2 of the command input starts another" in (
        result.stdout
    )


@pytest.mark.parametrize(
    "command",
    ['validate "$(touch pwned)"', "validate `touch pwned` ; touch pwned", "validate *"],
)
def test_the_actions_command_is_never_run_by_a_shell(tmp_path: Path, command: str) -> None:
    _, calls = run_action_command(tmp_path, command)
    assert not (tmp_path / "repo" / "pwned").exists()
    assert calls == [command.replace("\n", " ")]  # the words, as written, to reconcile


# --- each job's permissions and secrets, as examples/ci/README.md says ------------------------


def readme_table(platform: str, header: str) -> dict[str, list[str]]:
    """The rows of the README's table under **GitHub.** or **GitLab.**, by job."""
    text = (CI / "README.md").read_text(encoding="utf-8")
    section = text.split(f"**{platform}.**", 1)[1].split("\n**", 1)[0]
    table = section.split(header, 1)[1].split("\n\n", 1)[0]
    rows = {}
    for line in table.strip().splitlines()[1:]:  # the separator row first
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        rows[cells[0].strip("`")] = cells[1:]
    return rows


def secret_names(cell: str) -> set[str]:
    return set(re.findall(r"`([A-Z][A-Z0-9_]+)`", cell))


def environment_of(job: dict[str, Any]) -> str:
    environment = job.get("environment")
    if isinstance(environment, dict):
        environment = environment.get("name")
    return f"`{environment}`" if environment else "none"


def test_github_jobs_have_the_permissions_and_secrets_the_readme_says() -> None:
    import yaml

    table = readme_table("GitHub", "| job | permissions | secrets | environment |")
    jobs = load(GITHUB)["jobs"]
    assert set(table) == set(jobs)
    token_users = ("peter-evans/create-pull-request@",)
    for name, job in jobs.items():
        permissions, secrets, environment = table[name]
        granted = {f"{scope}: {level}" for scope, level in job["permissions"].items()}
        assert granted == set(re.findall(r"`([\w-]+: \w+)`", permissions)), name
        text = yaml.safe_dump(job)
        used = set(re.findall(r"secrets\.(\w+)", text))
        if "github.token" in text or any(
            s.get("uses", "").startswith(token_users) or (s.get("with") or {}).get("comment")
            for s in job["steps"]
        ):
            used.add("GITHUB_TOKEN")
        assert used == secret_names(secrets), name
        assert environment_of(job) == environment, name
    # The read-only client's jobs ask for reading only; apply for the default (write too).
    for name in ("plan", "drift"):
        assert jobs[name]["env"]["RECONCILER_SCOPE"] == "kyb:invites:read", name
    assert "RECONCILER_SCOPE" not in (jobs["apply"].get("env") or {})


def test_gitlab_jobs_use_the_secrets_the_readme_says() -> None:
    table = readme_table("GitLab", "| job | secrets | environment |")
    jobs = gitlab_jobs()
    assert set(table) == set(jobs)
    for name, job in jobs.items():
        secrets, environment = table[name]
        script = "\n".join(job["script"])
        used = set(re.findall(r"\$\{?([A-Z][A-Z0-9_]*(?:SECRET|TOKEN)[A-Z0-9_]*)", script))
        used.discard("CI_JOB_TOKEN")
        # The tool reads RECONCILER_CLIENT_SECRET itself: every job that talks to the API
        # uses it, unless it maps the write client's onto it.
        online = any(c and c[0] in {"plan", "apply", "adopt"} for c in reconcile_commands(script))
        if online and "RECONCILER_WRITE_CLIENT_SECRET" not in used:
            used.add("RECONCILER_CLIENT_SECRET")
        assert used == secret_names(secrets), name
        assert environment_of(job) == environment, name
    variables = {n: j.get("variables") or {} for n, j in jobs.items()}
    for name in ("plan", "drift"):
        assert variables[name].get("RECONCILER_SCOPE") == "kyb:invites:read", name
    assert "RECONCILER_SCOPE" not in variables["apply"]


HOSTILE_BRANCH = "main;touch${IFS}pwned-1$(touch pwned-2)`touch pwned-3`"


def test_a_branch_name_with_shell_metacharacters_is_never_run_github(tmp_path: Path) -> None:
    # A pull request may target any branch; its name reaches the plan's command words.
    results, calls, _ = github_stub_job(
        tmp_path, "plan", {"plan": 2}, event_name="pull_request", base_ref=HOSTILE_BRANCH
    )
    assert not job_failed(results)
    assert calls[-2].endswith(f"--changed-since origin/{HOSTILE_BRANCH}")
    assert sorted(p.name for p in tmp_path.rglob("pwned*")) == []


@pytest.mark.parametrize("job", ["plan", "apply", "drift"])
def test_a_branch_name_with_shell_metacharacters_is_never_run_gitlab(stub: Any, job: str) -> None:
    ci = WRITE_CLIENT | {"CI_DEFAULT_BRANCH": HOSTILE_BRANCH, "CI_MERGE_REQUEST_DIFF_BASE_SHA": ""}
    result, _ = stub(*gitlab_job_script(job), 2 if job == "drift" else 0, **ci)
    assert "Traceback" not in result.stderr
    assert sorted(p.name for p in stub.work.parent.rglob("pwned*")) == []


def test_the_action_knows_every_reconcile_command_a_later_line_may_start() -> None:
    # `resend` was missing: "apply\nresend inv_1" ran as one apply of the paths "resend"
    # and "inv_1", refused for them rather than for the second command.
    from reconciler.cli import COMMANDS

    action = ACTION.read_text(encoding="utf-8")
    listed = re.search(r"^ +(validate \|[^)]*)\)$", action, re.MULTILINE)
    assert listed is not None
    assert {w.strip() for w in listed.group(1).split("|")} == set(COMMANDS)


def test_the_action_refuses_a_resend_on_a_later_line(tmp_path: Path) -> None:
    result, calls = run_action_command(tmp_path, "apply --auto-approve\nresend inv_1\n")
    assert result.returncode == 1 and calls == []
    assert "line 2 of the command input starts another" in result.stdout
