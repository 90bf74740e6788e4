"""The CI recipes in examples/ci and the pre-commit hook: valid, runnable, exit codes honoured.

The shell steps are taken out of the recipes and run with bash, the way the CI
runner would, against a stub `reconcile` that exits 0, 1 or 2, and against the
real CLI talking to the sandbox.
"""

from __future__ import annotations

import functools
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml

from reconciler.sandbox import SANDBOX_CLIENT_ID, SANDBOX_CLIENT_SECRET, Sandbox

REPO = Path(__file__).resolve().parents[2]
CI = REPO / "examples" / "ci"
GITHUB = CI / "github-actions.yml"
GITLAB = CI / "gitlab-ci.yml"
HOOKS = REPO / ".pre-commit-hooks.yaml"
EXAMPLE_INVITES = REPO / "examples" / "invites"
RECONCILE = Path(sys.executable).parent / "reconcile"
NODE = shutil.which("node")

# How the runners start a script: GitHub's `shell: bash` is
# `bash --noprofile --norc -eo pipefail {0}` (no shell given: `bash -e {0}`);
# GitLab runs the job's script lines in one bash with errexit and pipefail.
GITHUB_BASH = ["bash", "--noprofile", "--norc", "-eo", "pipefail"]
GITHUB_DEFAULT_BASH = ["bash", "-e"]
GITLAB_BASH = ["bash", "-eo", "pipefail"]

STUB = """#!/usr/bin/env bash
printf '%s\\n' "$*" >> "$STUB_LOG"
echo "### stub plan for: $*"
echo "stub reconcile: progress on stderr" >&2
exit "$STUB_EXIT"
"""


# --- reading the recipes -----------------------------------------------------------------


def load(path: Path) -> Any:
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def github_triggers(workflow: dict[Any, Any]) -> dict[str, Any]:
    # YAML 1.1 reads the bare key `on` as the boolean True.
    triggers = workflow.get("on", workflow.get(True))
    assert isinstance(triggers, dict), "the workflow has no `on:` mapping"
    return triggers


def github_steps() -> Iterator[tuple[str, dict[str, Any]]]:
    for name, job in load(GITHUB)["jobs"].items():
        for step in job.get("steps", []):
            yield name, step


def gitlab_jobs() -> dict[str, dict[str, Any]]:
    doc = load(GITLAB)
    return {
        k: v for k, v in doc.items() if isinstance(v, dict) and ("script" in v or "extends" in v)
    }


def gitlab_scripts() -> Iterator[tuple[str, str]]:
    doc = load(GITLAB)
    for name, value in doc.items():
        if not isinstance(value, dict):
            continue
        for key in ("before_script", "script", "after_script"):
            lines = value.get(key) or []
            yield f"{name}.{key}", "\n".join(lines)


def hooks() -> dict[str, dict[str, Any]]:
    return {hook["id"]: hook for hook in load(HOOKS)}


def github_job_step(job_name: str, subcommand: str) -> tuple[list[str], str]:
    """The bash command line and the script of the one step of a job that runs `reconcile SUB`."""
    workflow = load(GITHUB)
    job = workflow["jobs"][job_name]
    found = [
        step
        for step in job["steps"]
        if any(cmd[:1] == [subcommand] for cmd in reconcile_commands(step.get("run", "")))
    ]
    assert len(found) == 1, f"job {job_name}: {len(found)} steps run `reconcile {subcommand}`"
    step = found[0]
    shell = (
        step.get("shell")
        or job.get("defaults", {}).get("run", {}).get("shell")
        or workflow.get("defaults", {}).get("run", {}).get("shell")
    )
    if shell is None:
        return GITHUB_DEFAULT_BASH, step["run"]
    assert shell == "bash", f"unexpected shell {shell!r}"
    return GITHUB_BASH, step["run"]


def gitlab_job_script(job_name: str) -> tuple[list[str], str]:
    """The job's own script (before_script only installs the package)."""
    return GITLAB_BASH, "\n".join(gitlab_jobs()[job_name]["script"])


# --- finding `reconcile ...` command lines in shell text ----------------------------------

OPERATORS = {";", ";;", "&", "&&", "|", "||", "|&", "(", ")", "!", ">", ">>", "<", "<<", ">&"}
COMMAND_STARTERS = OPERATORS | {"then", "do", "else", "elif", "if", "while", "until", "time"}
REDIRECTS = {">", ">>", "<", "<<", ">&"}


def reconcile_commands(script: str) -> list[list[str]]:
    """Each `reconcile ...` invocation in a shell script, as its arguments (sub, options...)."""
    commands: list[list[str]] = []
    heredoc_end: str | None = None
    for line in script.replace("\\\n", " ").splitlines():
        if heredoc_end is not None:
            if line.strip() == heredoc_end:
                heredoc_end = None
            continue
        heredoc = re.search(r"<<-?\s*['\"]?(\w+)['\"]?", line)
        if heredoc:
            heredoc_end = heredoc.group(1)
        lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        tokens = list(lexer)
        for i, token in enumerate(tokens):
            if token != "reconcile":
                continue
            before = tokens[i - 1] if i else None
            at_command = (
                before is None or before in COMMAND_STARTERS or re.fullmatch(r"\w+=\S*", before)
            )
            if not at_command:
                continue
            args: list[str] = []
            for j, arg in enumerate(tokens[i + 1 :], start=i + 1):
                following = tokens[j + 1] if j + 1 < len(tokens) else None
                if arg in OPERATORS or (arg.isdigit() and following in REDIRECTS):
                    break
                args.append(arg)
            commands.append(args)
    return commands


def all_reconcile_commands() -> list[tuple[str, list[str]]]:
    found: list[tuple[str, list[str]]] = []
    for job, step in github_steps():
        for cmd in reconcile_commands(step.get("run", "")):
            found.append((f"{GITHUB.name}:{job}", cmd))
    for where, script in gitlab_scripts():
        for cmd in reconcile_commands(script):
            found.append((f"{GITLAB.name}:{where}", cmd))
    for hook_id, hook in hooks().items():
        entry = shlex.split(hook["entry"])
        assert entry[0] == "reconcile", f"hook {hook_id} does not run reconcile: {entry}"
        found.append((f"{HOOKS.name}:{hook_id}", entry[1:]))
    return found


# --- what the installed CLI really accepts ------------------------------------------------


@functools.cache
def cli_help(*subcommand: str) -> str:
    result = subprocess.run(
        [str(RECONCILE), *subcommand, "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def load_help_in_parallel() -> None:
    """Fill the cache of cli_help at once: each start of the CLI takes about half a second."""
    with ThreadPoolExecutor(max_workers=4) as pool:
        list(pool.map(lambda sub: cli_help(*sub), [(), ("validate",), ("plan",), ("apply",)]))


@functools.cache
def subcommands() -> frozenset[str]:
    section = cli_help().split("Commands:", 1)[1]
    return frozenset(re.findall(r"^  ([a-z][\w-]*)", section, re.MULTILINE))


@functools.cache
def options(subcommand: str) -> dict[str, tuple[bool, tuple[str, ...] | None]]:
    """Each option of a subcommand: (takes a value, its choices if it has a fixed set)."""
    section = cli_help(subcommand).split("Options:", 1)[1]
    found: dict[str, tuple[bool, tuple[str, ...] | None]] = {}
    # A metavar follows one space; the description follows two or more.
    for match in re.finditer(r"^  (?:(-\w), )?(--[\w-]+)(?: (\S+))?", section, re.MULTILINE):
        short, long, metavar = match.groups()
        choices = None
        if metavar and metavar.startswith("[") and "|" in metavar:
            choices = tuple(metavar.strip("[]").split("|"))
        for name in filter(None, (short, long)):
            found[name] = (metavar is not None, choices)
    return found


def command_problems(args: list[str]) -> list[str]:
    if not args:
        return ["`reconcile` without a subcommand"]
    sub, *rest = args
    if sub not in subcommands():
        return [f"no subcommand {sub!r} (have: {sorted(subcommands())})"]
    known = options(sub)
    problems: list[str] = []
    i = 0
    while i < len(rest):
        arg = rest[i]
        i += 1
        if not arg.startswith("-") or arg == "-":
            continue
        name, has_equals, value = arg.partition("=")
        if name not in known:
            problems.append(f"`reconcile {sub}` has no option {name}")
            continue
        takes_value, choices = known[name]
        if takes_value and not has_equals:
            if i >= len(rest):
                problems.append(f"`reconcile {sub} {name}` is missing its value")
                continue
            value = rest[i]
            i += 1
        if choices is not None and value not in choices:
            problems.append(f"`reconcile {sub} {name} {value}`: not one of {choices}")
    return problems


# --- running a step ----------------------------------------------------------------------


def run_step(
    shell: list[str], script: str, cwd: Path, env: dict[str, str]
) -> subprocess.CompletedProcess[str]:
    path = cwd.parent / f"step-{os.getpid()}-{abs(hash(script))}.sh"
    path.write_text(script, encoding="utf-8")
    return subprocess.run(
        [*shell, str(path)],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def base_env(tmp_path: Path, *path_dirs: Path) -> dict[str, str]:
    """A small, clean environment: no RECONCILER_* or proxy settings from outside."""
    (tmp_path / "github_output").touch()
    (tmp_path / "step_summary").touch()
    return {
        "PATH": os.pathsep.join([*map(str, path_dirs), str(RECONCILE.parent), "/usr/bin", "/bin"]),
        "HOME": str(tmp_path),
        "LANG": "C.UTF-8",
        "GITHUB_OUTPUT": str(tmp_path / "github_output"),
        "GITHUB_STEP_SUMMARY": str(tmp_path / "step_summary"),
        "CI_DEFAULT_BRANCH": "main",
    }


@pytest.fixture
def stub(tmp_path: Path) -> Any:
    """Run a recipe step with a `reconcile` on PATH that exits with the given code."""
    bin_dir = tmp_path / "stub-bin"
    bin_dir.mkdir()
    script = bin_dir / "reconcile"
    script.write_text(STUB, encoding="utf-8")
    script.chmod(0o755)
    work = tmp_path / "repo"
    work.mkdir()

    def run(
        shell: list[str], step: str, exit_code: int, **extra: str
    ) -> tuple[subprocess.CompletedProcess[str], list[str]]:
        log = tmp_path / "stub.log"
        log.write_text("", encoding="utf-8")
        env = base_env(tmp_path, bin_dir)
        env.update(STUB_LOG=str(log), STUB_EXIT=str(exit_code), **extra)
        result = run_step(shell, step, work, env)
        return result, log.read_text(encoding="utf-8").splitlines()

    run.work = work  # type: ignore[attr-defined]
    return run


def github_output(tmp_path: Path) -> dict[str, str]:
    text = (tmp_path / "github_output").read_text(encoding="utf-8")
    return dict(line.split("=", 1) for line in text.splitlines() if "=" in line)


# --- the files parse ---------------------------------------------------------------------


@pytest.mark.parametrize("path", [GITHUB, GITLAB, HOOKS], ids=lambda p: p.name)
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
    jobs = workflow["jobs"]
    assert "pull_request" in jobs["plan"]["if"]
    assert "push" in jobs["apply"]["if"] and "refs/heads/main" in jobs["apply"]["if"]
    assert "schedule" in jobs["drift"]["if"]
    assert "pull_request" not in jobs["apply"]["if"] and "pull_request" not in jobs["drift"]["if"]


def test_github_permissions_are_least_privilege() -> None:
    workflow = load(GITHUB)
    top = workflow.get("permissions")
    assert top is not None, "set top-level permissions, or jobs get the repository default"
    assert not isinstance(top, str) and "write" not in top.values()
    writes = set()
    for name, job in workflow["jobs"].items():
        assert isinstance(job.get("permissions"), dict), f"job {name} has no permissions block"
        writes |= {(name, scope) for scope, level in job["permissions"].items() if level == "write"}
    assert writes == {("plan", "pull-requests")}


def test_github_applies_never_overlap_and_are_never_cancelled() -> None:
    jobs = load(GITHUB)["jobs"]
    concurrency = jobs["apply"]["concurrency"]
    assert concurrency["group"] and concurrency["cancel-in-progress"] is False
    # A job sharing the group could push a waiting apply out of the queue.
    others = [
        name
        for name, job in jobs.items()
        if name != "apply" and (job.get("concurrency") or {}).get("group") == concurrency["group"]
    ]
    assert others == []


def test_github_jobs_install_python_3_11_or_newer_and_the_package() -> None:
    for name, job in load(GITHUB)["jobs"].items():
        steps = job["steps"]
        assert any(s.get("uses", "").startswith("actions/checkout@") for s in steps), name
        versions = [
            str(s["with"]["python-version"])
            for s in steps
            if s.get("uses", "").startswith("actions/setup-python@")
        ]
        assert versions, f"job {name} does not set up Python"
        for version in versions:
            assert tuple(map(int, version.split(".")[:2])) >= (3, 11), (name, version)
        assert any("pip install invite-reconciler" in s.get("run", "") for s in steps), name


def test_github_run_scripts_hold_no_expressions() -> None:
    # `${{ }}` in a script is pasted in before bash runs (script injection); values go
    # through env: instead, which is also what lets these tests run the scripts.
    for job, step in github_steps():
        assert "${{" not in step.get("run", ""), f"job {job}, step {step.get('name')}"


def test_github_uploads_the_plan_and_the_audit_log_even_after_a_failure() -> None:
    jobs = load(GITHUB)["jobs"]
    for job, wanted in (("plan", "plan.json"), ("apply", "audit.jsonl")):
        uploads = [
            s
            for s in jobs[job]["steps"]
            if s.get("uses", "").startswith("actions/upload-artifact@")
        ]
        assert any(wanted in s["with"]["path"] for s in uploads), job
        for step in uploads:
            assert "cancelled()" in step.get("if", "") or "always()" in step.get("if", ""), job


def test_github_posts_one_sticky_comment_with_github_script() -> None:
    steps = load(GITHUB)["jobs"]["plan"]["steps"]
    scripts = [s for s in steps if s.get("uses", "").startswith("actions/github-script@")]
    assert len(scripts) == 1
    assert "updateComment" in scripts[0]["with"]["script"]
    assert "exitcode" in scripts[0]["if"], "the comment step must run after a failed plan too"


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
    assert any("pip install invite-reconciler" in line for line in template["before_script"])


# --- every `reconcile` command line is one the CLI accepts ---------------------------------


def test_command_checker_rejects_what_the_cli_rejects() -> None:
    # Guards the test below against a checker that accepts anything.
    load_help_in_parallel()
    assert command_problems(["plan", "--format", "markdown", "--detailed-exitcode"]) == []
    assert command_problems(["apply", "--auto-approve", "--audit-log", "a.jsonl"]) == []
    assert command_problems(["plan", "--detailed-exit-code"])
    assert command_problems(["plan", "--format", "html"])
    assert command_problems(["plan", "--out"])
    assert command_problems(["validate", "--auto-approve"])
    assert command_problems(["diff"])
    found = reconcile_commands(
        'rc=0\nreconcile plan --out p.json > p.md || rc=$?\necho "reconcile apply --nope"\n'
        "if true; then reconcile validate invites 2> err.txt; fi\n"
        "python3 - <<'PY'\nreconcile apply --nope\nPY\n"
    )
    assert found == [["plan", "--out", "p.json"], ["validate", "invites"]]


def test_every_reconcile_command_uses_real_subcommands_and_options() -> None:
    load_help_in_parallel()
    commands = all_reconcile_commands()
    problems = [
        f"{where}: {problem}" for where, cmd in commands for problem in command_problems(cmd)
    ]
    assert problems == []
    by_file: dict[str, set[str]] = {}
    for where, cmd in commands:
        by_file.setdefault(where.split(":")[0], set()).add(" ".join(cmd))
    for recipe in (GITHUB.name, GITLAB.name):
        lines = by_file[recipe]
        assert "validate" in lines
        assert "plan --format markdown --out plan.json --detailed-exitcode" in lines
        assert "apply --auto-approve --audit-log audit.jsonl" in lines
        assert any(line.startswith("plan --detailed-exitcode") for line in lines), recipe


# --- exit codes: 0 and 2 pass the PR plan, 1 fails it; drift fails on 2 --------------------


@pytest.mark.parametrize(("reconcile_exit", "step_exit"), [(0, 0), (2, 0), (1, 1)])
def test_github_pr_plan_step_passes_on_0_and_2_fails_on_1(
    stub: Any, tmp_path: Path, reconcile_exit: int, step_exit: int
) -> None:
    shell, script = github_job_step("plan", "plan")
    result, calls = stub(shell, script, reconcile_exit)
    assert result.returncode == step_exit, result.stdout + result.stderr
    assert calls == ["plan --format markdown --out plan.json --detailed-exitcode"]
    # The plan (stdout) went to plan.md, progress (stderr) did not.
    plan_md = (stub.work / "plan.md").read_text(encoding="utf-8")
    assert "stub plan for" in plan_md and "progress" not in plan_md
    # The comment step reads the code from the step's output.
    assert github_output(tmp_path)["exitcode"] == str(reconcile_exit)
    if step_exit:
        assert "::error" in result.stdout


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


@pytest.mark.parametrize("platform", ["github", "gitlab"])
@pytest.mark.parametrize(("reconcile_exit", "step_exit"), [(0, 0), (2, 1), (1, 1)])
def test_drift_check_fails_on_changes_and_on_errors(
    stub: Any, platform: str, reconcile_exit: int, step_exit: int
) -> None:
    if platform == "github":
        shell, script = github_job_step("drift", "plan")
    else:
        shell, script = gitlab_job_script("drift")
    result, calls = stub(shell, script, reconcile_exit)
    assert result.returncode == step_exit, result.stdout + result.stderr
    assert len(calls) == 1 and calls[0].startswith("plan --detailed-exitcode")
    says_drift = "drift detected" in (result.stdout + result.stderr).lower()
    assert says_drift == (reconcile_exit == 2)


@pytest.mark.parametrize("platform", ["github", "gitlab"])
@pytest.mark.parametrize("reconcile_exit", [0, 1])
def test_apply_step_fails_exactly_when_apply_fails(
    stub: Any, platform: str, reconcile_exit: int
) -> None:
    if platform == "github":
        shell, script = github_job_step("apply", "apply")
    else:
        shell, script = gitlab_job_script("apply")
    result, calls = stub(shell, script, reconcile_exit)
    assert result.returncode == reconcile_exit
    assert calls == ["apply --auto-approve --audit-log audit.jsonl"]


# --- the recipes against the real CLI and the sandbox --------------------------------------


def sandbox_repo(tmp_path: Path, sandbox: Sandbox) -> tuple[Path, dict[str, str]]:
    work = tmp_path / "repo"
    shutil.copytree(EXAMPLE_INVITES, work / "invites")
    env = base_env(tmp_path)
    env.update(
        RECONCILER_BASE_URL=sandbox.url,
        RECONCILER_CLIENT_ID=SANDBOX_CLIENT_ID,
        RECONCILER_CLIENT_SECRET=SANDBOX_CLIENT_SECRET,
        NO_COLOR="1",
    )
    return work, env


@pytest.mark.e2e
def test_github_recipe_plans_applies_and_checks_drift_against_the_sandbox(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    work, env = sandbox_repo(tmp_path, sandbox)
    plan = run_step(*github_job_step("plan", "plan"), work, env)
    assert plan.returncode == 0, plan.stderr
    assert github_output(tmp_path)["exitcode"] == "2"
    assert "Invite plan" in (work / "plan.md").read_text(encoding="utf-8")
    assert json.loads((work / "plan.json").read_text(encoding="utf-8"))["changes"]

    drift = run_step(*github_job_step("drift", "plan"), work, env)
    assert drift.returncode == 1 and "Drift detected" in drift.stdout
    assert "Invite plan" in (tmp_path / "step_summary").read_text(encoding="utf-8")

    apply = run_step(*github_job_step("apply", "apply"), work, env)
    assert apply.returncode == 0, apply.stderr
    audit = [json.loads(line) for line in (work / "audit.jsonl").read_text().splitlines()]
    outcomes = [entry for entry in audit if entry["record"] == "outcome"]
    assert outcomes and all(entry["outcome"] == "ok" for entry in outcomes)


@pytest.mark.e2e
def test_gitlab_recipe_plans_applies_and_checks_drift_against_the_sandbox(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    work, env = sandbox_repo(tmp_path, sandbox)
    plan = run_step(*gitlab_job_script("plan"), work, env)
    assert plan.returncode == 0, plan.stderr
    assert "Changes pending" in plan.stdout
    assert json.loads((work / "plan.json").read_text(encoding="utf-8"))["changes"]

    drift = run_step(*gitlab_job_script("drift"), work, env)
    assert drift.returncode == 1 and "DRIFT DETECTED" in drift.stderr

    apply = run_step(*gitlab_job_script("apply"), work, env)
    assert apply.returncode == 0, apply.stderr
    assert (work / "audit.jsonl").read_text(encoding="utf-8").strip()


# --- the sticky comment / note -------------------------------------------------------------

NODE_HARNESS = """
const fs = require('fs');
const script = fs.readFileSync(process.argv[2], 'utf8');
const existing = JSON.parse(process.env.EXISTING_COMMENTS);
const calls = [];
const github = {
  paginate: async (method, args) => { calls.push(['list', args]); return existing; },
  rest: { issues: {
    listComments: 'listComments',
    createComment: async (args) => { calls.push(['create', args]); },
    updateComment: async (args) => { calls.push(['update', args]); },
  } },
};
const context = {
  repo: { owner: 'org', repo: 'invites' }, issue: { number: 7 }, runId: 42, sha: 'f00dfeed',
  serverUrl: 'https://github.com', payload: { pull_request: { head: { sha: '0123456789abcdef' } } },
};
const AsyncFunction = Object.getPrototypeOf(async function () {}).constructor;
new AsyncFunction('github', 'context', 'core', 'require', script)(github, context, {}, require)
  .then(() => console.log(JSON.stringify(calls)), (e) => { console.error(e); process.exit(1); });
"""


def github_comment_script() -> tuple[str, str]:
    steps = load(GITHUB)["jobs"]["plan"]["steps"]
    script = next(s for s in steps if s.get("uses", "").startswith("actions/github-script@"))
    marker = re.search(r"'(<!--.*?-->)'", script["with"]["script"])
    assert marker, "the comment script has no HTML-comment marker to find its comment by"
    return script["with"]["script"], marker[1]


def run_comment_script(
    tmp_path: Path, plan_md: str, exitcode: str, existing: list[dict[str, Any]]
) -> list[list[Any]]:
    script, _ = github_comment_script()
    (tmp_path / "script.js").write_text(script, encoding="utf-8")
    (tmp_path / "harness.js").write_text(NODE_HARNESS, encoding="utf-8")
    (tmp_path / "plan.md").write_text(plan_md, encoding="utf-8")
    env = {
        **base_env(tmp_path),
        "PLAN_EXITCODE": exitcode,
        "EXISTING_COMMENTS": json.dumps(existing),
    }
    result = subprocess.run(
        [str(NODE), "harness.js", "script.js"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return [call for call in json.loads(result.stdout) if call[0] != "list"]


@pytest.mark.skipif(NODE is None, reason="node is not installed")
def test_github_comment_is_created_once_then_edited(tmp_path: Path) -> None:
    _, marker = github_comment_script()
    calls = run_comment_script(tmp_path, "### Invite plan: 1 to update", "2", [])
    assert [call[0] for call in calls] == ["create"]
    assert calls[0][1]["issue_number"] == 7
    body = calls[0][1]["body"]
    assert marker in body and "### Invite plan: 1 to update" in body

    existing = [
        {"id": 5, "user": {"type": "User"}, "body": f"quoting the bot: {marker}"},
        {"id": 9, "user": {"type": "Bot"}, "body": f"{marker}\nold plan"},
    ]
    calls = run_comment_script(tmp_path, "### Invite plan: 0 to update", "0", existing)
    assert [(call[0], call[1]["comment_id"]) for call in calls] == [("update", 9)]
    assert "0 to update" in calls[0][1]["body"]


@pytest.mark.skipif(NODE is None, reason="node is not installed")
def test_github_comment_reports_a_failed_plan_and_fits_a_long_one(tmp_path: Path) -> None:
    calls = run_comment_script(tmp_path, "x" * 200_000, "1", [])
    body = calls[0][1]["body"]
    assert "failed" in body and "exit 1" in body
    assert len(body) <= 65536


class FakeGitLab(ThreadingHTTPServer):
    """Just enough of the GitLab notes API, with one human note already on the MR."""

    def __init__(self, marker: str) -> None:
        super().__init__(("127.0.0.1", 0), FakeGitLabHandler)
        self.notes: list[dict[str, Any]] = [
            {"id": 1, "author": {"id": 5}, "body": f"quoting the bot: {marker}"}
        ]
        self.requests: list[tuple[str, str, str | None]] = []


class FakeGitLabHandler(BaseHTTPRequestHandler):
    server: FakeGitLab
    notes_path = "/api/v4/projects/11/merge_requests/3/notes"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def answer(self, status: int, body: Any) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("X-Next-Page", "")
        self.end_headers()
        self.wfile.write(data)

    def record(self) -> tuple[str, dict[str, Any]]:
        path = self.path.split("?")[0]
        self.server.requests.append((self.command, path, self.headers.get("PRIVATE-TOKEN")))
        length = int(self.headers.get("Content-Length") or 0)
        return path, json.loads(self.rfile.read(length) or b"{}")

    def do_GET(self) -> None:
        path, _ = self.record()
        if path == "/api/v4/user":
            self.answer(200, {"id": 99})
        elif path == self.notes_path:
            self.answer(200, self.server.notes)
        else:
            self.answer(404, {"message": "404 Not Found"})

    def do_POST(self) -> None:
        path, body = self.record()
        note = {"id": 100 + len(self.server.notes), "author": {"id": 99}, "body": body["body"]}
        self.server.notes.append(note)
        self.answer(201 if path == self.notes_path else 404, note)

    def do_PUT(self) -> None:
        path, body = self.record()
        note_id = int(path.rsplit("/", 1)[1])
        note = next(n for n in self.server.notes if n["id"] == note_id)
        note["body"] = body["body"]
        self.answer(200, note)


@pytest.fixture
def fake_gitlab() -> Iterator[FakeGitLab]:
    _, marker = github_comment_script()
    server = FakeGitLab(marker)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def test_gitlab_plan_note_is_posted_once_then_edited(stub: Any, fake_gitlab: FakeGitLab) -> None:
    shell, script = gitlab_job_script("plan")
    ci = {
        "PLAN_NOTE_TOKEN": "token-for-the-fake-api",
        "CI_API_V4_URL": f"http://127.0.0.1:{fake_gitlab.server_port}/api/v4",
        "CI_PROJECT_ID": "11",
        "CI_MERGE_REQUEST_IID": "3",
        "CI_JOB_URL": "https://gitlab.example/job/1",
        "CI_COMMIT_SHORT_SHA": "f00dfeed",
    }
    result, _ = stub(shell, script, 2, **ci)
    assert result.returncode == 0, result.stderr
    human, *mine = fake_gitlab.notes
    assert len(mine) == 1 and "stub plan for" in mine[0]["body"]

    result, _ = stub(shell, script, 1, **ci)
    assert result.returncode == 1
    assert len(fake_gitlab.notes) == 2, "a second note was added instead of editing the first"
    assert "failed (exit 1)" in fake_gitlab.notes[1]["body"]
    assert human["body"].startswith("quoting the bot")
    assert ("PUT", f"{FakeGitLabHandler.notes_path}/{mine[0]['id']}") in [
        r[:2] for r in fake_gitlab.requests
    ]
    assert {r[2] for r in fake_gitlab.requests} == {"token-for-the-fake-api"}


def test_gitlab_plan_job_fails_clearly_when_the_note_cannot_be_posted(stub: Any) -> None:
    shell, script = gitlab_job_script("plan")
    result, _ = stub(
        shell,
        script,
        0,
        PLAN_NOTE_TOKEN="token-for-the-fake-api",
        CI_API_V4_URL="http://127.0.0.1:9/api/v4",
        CI_PROJECT_ID="11",
        CI_MERGE_REQUEST_IID="3",
    )
    assert result.returncode == 1
    assert "could not post the plan" in result.stderr
    assert "Traceback" not in result.stderr


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


@pytest.mark.parametrize("path", [GITHUB, GITLAB, HOOKS], ids=lambda p: p.name)
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


def test_pre_commit_hook_passes_a_valid_file(tmp_path: Path) -> None:
    result = run_hook("reconcile-validate", "examples/invites/emea.yaml")
    assert result.returncode == 0, result.stderr


def test_pre_commit_hook_fails_an_invalid_file(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("invites:\n  - name: No Id Ltd\n", encoding="utf-8")
    result = run_hook("reconcile-validate", "examples/invites/emea.yaml", str(bad))
    assert result.returncode == 1
    assert "bad.yaml" in result.stderr


def test_pre_commit_hook_sees_a_duplicate_id_across_the_files_it_is_given(tmp_path: Path) -> None:
    for name in ("a.yaml", "b.yaml"):
        (tmp_path / name).write_text("invites:\n  - id: inv_same\n", encoding="utf-8")
    result = run_hook("reconcile-validate", str(tmp_path / "a.yaml"), str(tmp_path / "b.yaml"))
    assert result.returncode == 1
    assert "inv_same" in result.stderr


def test_pre_commit_validate_all_hook_checks_the_whole_invites_directory(tmp_path: Path) -> None:
    assert hooks()["reconcile-validate-all"]["pass_filenames"] is False
    shutil.copytree(EXAMPLE_INVITES, tmp_path / "invites")
    (tmp_path / "invites" / "zz-copy.yaml").write_text(
        "invites:\n  - id: inv_8f2k1\n", encoding="utf-8"
    )
    result = run_hook("reconcile-validate-all", cwd=tmp_path)
    assert result.returncode == 1
    assert "inv_8f2k1" in result.stderr
