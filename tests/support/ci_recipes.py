"""Reading the CI recipes: their `reconcile` command lines, checked against the real CLI."""

from __future__ import annotations

import functools
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .ci_runner import ACTION, OWN_ACTION, interpolate, load
from .cli import run_cli
from .helpers import clean_env

REPO = Path(__file__).resolve().parents[2]
CI = REPO / "examples" / "ci"
GITHUB = CI / "github-actions.yml"
GITLAB = CI / "gitlab-ci.yml"
HOOKS = REPO / ".pre-commit-hooks.yaml"
EXAMPLE_INVITES = REPO / "examples" / "invites"
RECONCILE = Path(sys.executable).parent / "reconcile"
GITLAB_BASH = ["bash", "-eo", "pipefail"]
# Stands in for expressions when a recipe's command lines are read, not run.
PLACEHOLDERS = {
    "github": {"base_ref": "main", "event_name": "push", "event": {"before": "0" * 40}},
    "runner": {"temp": "/runner-temp"},
}


def github_triggers(workflow: dict[Any, Any]) -> dict[str, Any]:
    # YAML 1.1 reads the bare key `on` as the boolean True.
    triggers = workflow.get("on", workflow.get(True))
    assert isinstance(triggers, dict), "the workflow has no `on:` mapping"
    return triggers


def github_steps() -> Iterator[tuple[str, dict[str, Any]]]:
    for name, job in load(GITHUB)["jobs"].items():
        for step in job.get("steps", []):
            yield name, step


def action_steps() -> list[dict[str, Any]]:
    return load(ACTION)["runs"]["steps"]


def github_reconcile_commands(job: str | None = None) -> list[tuple[str, list[str]]]:
    """Each `reconcile ...` a job runs: the action's `command`, and any in run scripts."""
    found = []
    for name, step in github_steps():
        if job not in (None, name):
            continue
        if OWN_ACTION.match(step.get("uses", "")):
            command = interpolate(step["with"]["command"], PLACEHOLDERS)
            found.append((name, command.split()))
        for cmd in reconcile_commands(step.get("run", "")):
            found.append((name, cmd))
    return found


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


def gitlab_job_script(job_name: str) -> tuple[list[str], str]:
    """The job's own script (before_script only installs the package), after the
    pipeline's and the job's `variables:` as the runner sets them (a variable of the
    project's settings, here the environment given, wins over the file's)."""
    variables = dict(load(GITLAB).get("variables") or {})
    variables |= gitlab_jobs()[job_name].get("variables") or {}
    exports = [
        f'[ -n "${{{name}+set}}" ] || export {name}={shlex.quote(str(value))}'
        for name, value in variables.items()
    ]
    return GITLAB_BASH, "\n".join([*exports, *gitlab_jobs()[job_name]["script"]])


def hooks() -> dict[str, dict[str, Any]]:
    return {hook["id"]: hook for hook in load(HOOKS)}


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
    for job, cmd in github_reconcile_commands():
        found.append((f"{GITHUB.name}:{job}", cmd))
    for where, script in gitlab_scripts():
        for cmd in reconcile_commands(script):
            found.append((f"{GITLAB.name}:{where}", cmd))
    for step in action_steps():
        script = step.get("run", "").replace('"$VENV/bin/reconcile"', "reconcile")
        for cmd in reconcile_commands(script):
            # `reconcile --version`, and `reconcile "${words[@]}"` (the input) are not recipes.
            if cmd[0] != "--version" and not cmd[0].startswith("$"):
                found.append((f"{ACTION.name}:{step.get('name')}", cmd))
    for hook_id, hook in hooks().items():
        entry = shlex.split(hook["entry"])
        assert entry[0] == "reconcile", f"hook {hook_id} does not run reconcile: {entry}"
        found.append((f"{HOOKS.name}:{hook_id}", entry[1:]))
    return found


# --- what the installed CLI really accepts ------------------------------------------------


@functools.cache
def cli_help(*subcommand: str) -> str:
    """What `reconcile SUBCOMMAND --help` prints, in process (milliseconds, not the half
    second of a start), at the width a pipe gets."""
    result = run_cli(*subcommand, "--help", env=clean_env(COLUMNS="80"))
    assert result.returncode == 0, result.stderr
    return result.stdout


@functools.cache
def subcommands(*group: str) -> frozenset[str]:
    """The subcommands of `reconcile` (or of one of its groups: `applied`); none for a
    command that is no group."""
    if "Commands:" not in cli_help(*group):
        return frozenset()
    section = cli_help(*group).split("Commands:", 1)[1]
    return frozenset(re.findall(r"^  ([a-z][\w-]*)", section, re.MULTILINE))


@functools.cache
def options(*command: str) -> dict[str, tuple[bool, tuple[str, ...] | None]]:
    """Each option of a subcommand: (takes a value, its choices if it has a fixed set)."""
    section = cli_help(*command).split("Options:", 1)[1]
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
    command = [sub]
    if subcommands(sub):  # a group: one of its own subcommands comes next
        if not rest or rest[0] not in subcommands(sub):
            return [f"`reconcile {sub}` needs one of {sorted(subcommands(sub))}"]
        command.append(rest.pop(0))
        sub = " ".join(command)
    known = options(*command)
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


# --- running a recipe's shell against a stub `reconcile` ------------------------------------

STUB = """#!/usr/bin/env bash
[ "$1" = --version ] && { echo "reconcile, version stub"; exit 0; }
printf '%s\\n' "$*${RECONCILER_GIT_TOKEN:+ (token: $RECONCILER_GIT_TOKEN)}" >> "$STUB_LOG"
echo "### stub plan for: $*"
echo "stub reconcile: progress on stderr" >&2
code="STUB_EXIT_${1^^}"  # e.g. STUB_EXIT_PLAN; else STUB_EXIT
# adopt writes its --summary last, as the real one does, unless told it stopped before
if [ "$1" = adopt ] && [ "${STUB_ADOPT_SUMMARY:-yes}" = yes ]; then
  while [ $# -gt 0 ]; do
    [ "$1" = --summary ] && { echo "stub summary" > "$2"; break; }
    shift
  done
  set -- adopt
fi
exit "${!code:-$STUB_EXIT}"
"""


def write_stub(bin_dir: Path) -> Path:
    bin_dir.mkdir(parents=True, exist_ok=True)
    script = bin_dir / "reconcile"
    script.write_text(STUB, encoding="utf-8")
    script.chmod(0o755)
    return script


def init_checkout(work: Path) -> str:
    """``work`` as a checkout of a repository of one commit, on main; that commit."""
    git = ["git", "-c", "user.name=T", "-c", "user.email=t@example.com"]
    subprocess.run([*git, "init", "-q", "-b", "main"], cwd=work, check=True)
    subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", "first"], cwd=work, check=True)
    head = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=work, capture_output=True, text=True, check=True
    )
    return head.stdout.strip()


def shell_env(tmp_path: Path, *path_dirs: Path) -> dict[str, str]:
    """A small, clean environment: no RECONCILER_* or proxy settings from outside."""
    return {
        "PATH": ":".join([*map(str, path_dirs), "/usr/bin", "/bin"]),
        "HOME": str(tmp_path),
        "LANG": "C.UTF-8",
        "CI_DEFAULT_BRANCH": "main",
    }


def run_shell(
    shell: list[str], script: str, cwd: Path, env: dict[str, str]
) -> subprocess.CompletedProcess[str]:
    path = cwd.parent / f"step-{abs(hash(script))}.sh"
    path.write_text(script, encoding="utf-8")
    return subprocess.run(
        [*shell, str(path)], cwd=cwd, env=env, capture_output=True, text=True, timeout=120
    )


@pytest.fixture
def stub(tmp_path: Path) -> Any:
    """Run a GitLab script with a `reconcile` on PATH that exits with the given code, in a
    git repository of one commit (the runner's checkout)."""
    bin_dir = tmp_path / "stub-bin"
    write_stub(bin_dir)
    work = tmp_path / "repo"
    work.mkdir()
    init_checkout(work)

    def run(
        shell: list[str], step: str, exit_code: int, **extra: str
    ) -> tuple[subprocess.CompletedProcess[str], list[str]]:
        log = tmp_path / "stub.log"
        log.write_text("", encoding="utf-8")
        env = shell_env(tmp_path, bin_dir) | {"STUB_LOG": str(log), "STUB_EXIT": str(exit_code)}
        result = run_shell(shell, step, work, env | extra)
        return result, log.read_text(encoding="utf-8").splitlines()

    run.work = work  # type: ignore[attr-defined]
    return run
