"""`reconcile --help` in the workflow's order with whole summaries, an example in every
command's help, and shell completion through click's own `_RECONCILE_COMPLETE`.
The installed `reconcile` in a child process, as a shell runs it."""

from __future__ import annotations

import re

import pytest
from support.cli import run_cli_process
from support.helpers import clean_env

from reconciler.cli import COMMANDS

pytestmark = pytest.mark.e2e


def test_help_lists_the_commands_in_workflow_order_with_whole_summaries() -> None:
    result = run_cli_process("--help")
    assert result.returncode == 0, result.stderr
    listed = re.findall(r"^  ([a-z]+)  ", result.stdout.split("Commands:")[1], re.MULTILINE)
    assert listed == list(COMMANDS)
    assert listed[:3] == ["validate", "plan", "apply"]
    assert "..." not in result.stdout.split("Commands:")[1]  # no summary cut short
    assert "sending only the fields that\n            differ." in result.stdout
    assert "never creates,\n  deletes or revokes one" in result.stdout


@pytest.mark.parametrize("command", COMMANDS)
def test_each_command_shows_an_example(command: str) -> None:
    result = run_cli_process(command, "--help")
    assert result.returncode == 0, result.stderr
    assert re.search(rf"Examples?:\n    reconcile {command}\b", result.stdout), result.stdout


def test_bash_completion_script_comes_from_clicks_hook() -> None:
    result = run_cli_process(env=clean_env(_RECONCILE_COMPLETE="bash_source"))
    assert result.returncode == 0, result.stderr
    assert "_reconcile_completion()" in result.stdout
    assert "complete -o nosort -F _reconcile_completion reconcile" in result.stdout
    assert "Usage:" not in result.stdout


def test_completion_completes_commands_and_options() -> None:
    commands = run_cli_process(
        env=clean_env(
            _RECONCILE_COMPLETE="bash_complete", COMP_WORDS="reconcile pl", COMP_CWORD="1"
        )
    )
    assert commands.returncode == 0, commands.stderr
    assert commands.stdout.split() == ["plain,plan"]
    options = run_cli_process(
        env=clean_env(
            _RECONCILE_COMPLETE="zsh_complete",
            COMP_WORDS="reconcile apply --auto",
            COMP_CWORD="2",
        )
    )
    assert options.returncode == 0, options.stderr
    assert "--auto-approve" in options.stdout
