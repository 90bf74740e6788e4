"""Under GitHub Actions the runner reads every line of output for workflow commands.

A line that starts with `::` (after spaces) is one, and so is a line with `##[` anywhere
in it. File names, values and server messages come from a pull request or a server, so
none of them may start a line or carry `##[` through whole: only the tool's own
annotations speak to the runner. The real `reconcile` in a child process (stdout and
stderr are pipes, as on a runner), against the sandbox over HTTP.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from support.cli import run_cli_process
from support.helpers import RECONCILE, clean_env, sandbox_env
from support.invites import ACME, desired_entry, write_invites

from reconciler.sandbox import Sandbox

pytestmark = [pytest.mark.e2e, pytest.mark.real]

STOP = "::stop-commands::zz.yaml"
FORGED = "::warning title=Security review::Approved by security team.yaml"


def commands_in(output: str) -> list[str]:
    """Every line the runner would take for a workflow command."""
    return [
        line
        for line in output.splitlines()
        if line.lstrip().startswith("::") or "##[" in line  # the two forms the runner reads
    ]


def test_file_names_that_are_workflow_commands_never_start_a_line(tmp_path: Path) -> None:
    for number, name in enumerate((STOP, FORGED)):
        (tmp_path / name).write_text(f"invites:\n  - id: inv_{number}\n    emial: x@y.example\n")
    result = run_cli_process("validate", ".", cwd=tmp_path, env=clean_env(GITHUB_ACTIONS="true"))

    assert result.returncode == 1
    commands = commands_in(result.stdout + result.stderr)
    # The only commands are the tool's own annotations, one per problem, at its file and line.
    assert len(commands) == 2, result.stderr
    assert all(line.startswith("::error file=") for line in commands)
    assert any(
        line.startswith("::error file=%3A%3Astop-commands%3A%3Azz.yaml,line=3,")
        for line in commands
    )
    assert any(
        line.startswith("::error file=%3A%3Awarning title=Security review%3A%3AApproved")
        for line in commands
    )
    # The problems are still shown, each on a line that does not start with the name.
    assert "| ::stop-commands::zz.yaml:3:5: unknown field `emial`" in result.stderr


def test_values_with_legacy_commands_reach_the_log_escaped(
    start_sandbox: Callable[..., Sandbox], tmp_path: Path
) -> None:
    server = start_sandbox([ACME])
    forged = "##[set-output name=exitcode;]0"
    write_invites(tmp_path / "invites", [desired_entry(ACME, name=forged)])

    result = run_cli_process("plan", cwd=tmp_path, env=sandbox_env(server, GITHUB_ACTIONS="true"))

    assert result.returncode == 0, result.stderr
    assert commands_in(result.stdout + result.stderr) == []
    assert '"#\\u0023[set-output name=exitcode;]0"' in result.stdout  # shown, escaped


def test_a_json_plan_piped_under_github_keeps_its_values(
    start_sandbox: Callable[..., Sandbox], tmp_path: Path
) -> None:
    server = start_sandbox([ACME])
    forged = "##[warning]Approved"
    write_invites(tmp_path / "invites", [desired_entry(ACME, name=forged)])

    result = run_cli_process(
        "plan", "--format", "json", cwd=tmp_path, env=sandbox_env(server, GITHUB_ACTIONS="true")
    )

    assert commands_in(result.stdout) == []
    (change,) = json.loads(result.stdout)["changes"]
    assert change["after"]["name"] == forged  # the same value once parsed


def test_the_plan_written_to_a_file_is_the_product_unchanged(
    start_sandbox: Callable[..., Sandbox], tmp_path: Path
) -> None:
    server = start_sandbox([ACME])
    forged = "##[warning]Approved"
    write_invites(tmp_path / "invites", [desired_entry(ACME, name=forged)])
    out = tmp_path / "plan.md"
    env = sandbox_env(server, GITHUB_ACTIONS="true")
    with out.open("w", encoding="utf-8") as stdout:
        subprocess.run(
            [*RECONCILE, "plan", "--format", "markdown"],
            cwd=tmp_path,
            env=env,
            stdout=stdout,
            check=False,
            timeout=60,
        )
    # A file is not the runner's log (the action fences it when it shows it): the guard
    # leaves it alone, and the Markdown escapes the brackets itself.
    text = out.read_text(encoding="utf-8")
    assert "##&#91;warning&#93;Approved" in text
    assert "#\\u0023[" not in text
