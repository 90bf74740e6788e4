"""Shell completion through click's own `_RECONCILE_COMPLETE`: the installed `reconcile`
in a child process, as a shell runs it (the variable is read only when the process's own
arguments are). The help (the workflow's order, whole summaries, an example in every
command's): in process, `unit/test_cli.py`."""

from __future__ import annotations

import pytest
from support.cli import run_cli_process
from support.helpers import clean_env

pytestmark = pytest.mark.e2e


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
