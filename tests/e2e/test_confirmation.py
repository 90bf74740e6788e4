"""apply and resend without --auto-approve and without a terminal: refused at once.

Nobody can answer the question, so the run refuses before it reads a file or sends a
request (at 20,000 invites under a rate limit, reading first costs minutes for nothing);
a closed stdin (`<&-`) is no terminal either, and never a traceback.
The installed `reconcile` in a child process, against the sandbox over HTTP, where stdin
or the terminal is the point; in this process (stdin a pipe's stand-in) elsewhere.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest
from support.cli import run_cli, run_cli_process, run_shell
from support.helpers import sandbox_env
from support.invites import ACME, desired_entry, write_invites
from support.terminal import run_at_terminal

from reconciler.sandbox import Sandbox

pytestmark = pytest.mark.e2e

COLOUR = re.compile(r"\x1b\[[0-9;]*m")  # SGR sequences


@pytest.fixture
def server(start_sandbox: Callable[..., Sandbox]) -> Sandbox:
    return start_sandbox([ACME])


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    write_invites(tmp_path / "invites", [desired_entry(ACME, email="new@acme.example")])
    return tmp_path


def test_apply_from_a_pipe_refuses_before_any_request(server: Sandbox, workdir: Path) -> None:
    result = run_cli_process("apply", cwd=workdir, env=sandbox_env(server), input="y\n")

    assert result.returncode == 1
    assert (
        "refusing to apply without confirmation: standard input is not a terminal; "
        "pass --auto-approve, or save the plan with `reconcile plan --out FILE`, read it "
        "(`reconcile show FILE`) and apply it with `reconcile apply --plan FILE`"
    ) in result.stderr
    assert server.stats.total == 0  # no token, no read: refused before anything was read
    assert result.stdout == ""  # no plan was printed, since none was made


def test_apply_refuses_before_reading_even_broken_files(server: Sandbox, workdir: Path) -> None:
    (workdir / "invites" / "broken.yaml").write_text("invites: [\n", encoding="utf-8")
    result = run_cli("apply", cwd=workdir, env=sandbox_env(server), input="")
    assert result.returncode == 1
    assert "standard input is not a terminal" in result.stderr
    assert "broken.yaml" not in result.stderr  # the files were never read


@pytest.mark.parametrize(
    ("args", "action"),
    [("apply", "apply"), ("resend inv_acme", "re-send")],
    ids=["apply", "resend"],
)
def test_a_closed_stdin_is_no_terminal_and_no_traceback(
    server: Sandbox, workdir: Path, args: str, action: str
) -> None:
    result = run_shell(f"reconcile {args} <&-", workdir, sandbox_env(server))

    assert result.returncode == 1
    assert f"refusing to {action} without confirmation: standard input is not a terminal" in (
        result.stderr
    )
    assert "Traceback" not in result.stderr
    assert "AttributeError" not in result.stderr
    assert server.stats.total == 0


def test_a_closed_stdin_with_auto_approve_applies(server: Sandbox, workdir: Path) -> None:
    result = run_shell("reconcile apply --auto-approve <&-", workdir, sandbox_env(server))
    assert result.returncode == 0, result.stderr
    assert "Apply: 1 updated, 0 failed." in result.stdout
    assert len(server.stats.calls("PATCH")) == 1


def test_resend_from_a_pipe_refuses_before_any_request(server: Sandbox, workdir: Path) -> None:
    result = run_cli("resend", "inv_acme", cwd=workdir, env=sandbox_env(server))
    assert result.returncode == 1
    assert "refusing to re-send without confirmation" in result.stderr
    assert server.stats.total == 0


def _apply_with_stdout_to_a_file(
    workdir: Path, env: dict[str, str], answer: str
) -> tuple[int, str, str]:
    """`reconcile apply > apply.txt` typed at a terminal: (exit code, what the terminal
    showed, what the file holds). ``answer`` is typed once the question is asked."""
    seen = run_at_terminal(["apply"], workdir, env, answer, stdout=workdir / "apply.txt")
    return seen.code, seen.terminal, (workdir / "apply.txt").read_text("utf-8")


def test_apply_with_stdout_to_a_file_shows_the_plan_on_the_terminal_then_asks(
    server: Sandbox, workdir: Path
) -> None:
    # Issue 39, row 5: the question is never about a plan that went unseen into the file.
    code, shown, written = _apply_with_stdout_to_a_file(workdir, sandbox_env(server), "y")
    assert code == 0, shown
    plan, _, after = shown.partition("Apply these changes? [y/N]")
    assert after, shown  # asked
    assert 'email: "old@acme.example" -> "new@acme.example"' in COLOUR.sub("", plan)
    assert COLOUR.search(plan), repr(
        plan
    )  # a terminal, NO_COLOR unset: coloured as stdout would be
    # The file holds the product as before: the plan and what was done, uncoloured.
    assert 'email: "old@acme.example" -> "new@acme.example"' in written
    assert "Apply: 1 updated" in written and not COLOUR.search(written)
    assert "Apply: 1 updated" in after  # and the terminal says how it ended
    assert len(server.stats.calls("PATCH")) == 1


def test_apply_with_stdout_to_a_file_under_no_color_shows_a_plain_plan(
    server: Sandbox, workdir: Path
) -> None:
    code, shown, _ = _apply_with_stdout_to_a_file(workdir, sandbox_env(server, NO_COLOR="1"), "n")
    assert code == 1
    assert 'email: "old@acme.example" -> "new@acme.example"' in shown
    assert not COLOUR.search(shown)
    assert server.stats.calls("PATCH") == []


def test_resend_with_stdout_to_a_file_lists_whom_it_e_mails_on_the_terminal_then_asks(
    server: Sandbox, tmp_path: Path
) -> None:
    env = sandbox_env(server, NO_COLOR="1")
    seen = run_at_terminal(
        ["resend", "inv_acme"], tmp_path, env, "n", stdout=tmp_path / "resend.txt"
    )
    assert seen.code == 1
    listed, _, _ = seen.terminal.partition("[y/N]")
    assert "inv_acme  'Acme Holdings Ltd'  <" in listed  # seen before the question
    assert "inv_acme" in (tmp_path / "resend.txt").read_text(encoding="utf-8")
    assert server.stats.calls("POST", "/public-api/v1/kyb/invites/") == []


@pytest.mark.parametrize("command", [["apply"], ["resend", "inv_acme"]], ids=["apply", "resend"])
def test_with_stderr_to_a_file_the_question_is_asked_on_the_terminal(
    server: Sandbox, workdir: Path, command: list[str]
) -> None:
    # `reconcile apply 2> errors.txt` at a terminal: the plan was shown, then the question
    # went into the file (input() writes its prompt to fd 2) and the run waited in silence.
    env = sandbox_env(server, NO_COLOR="1")
    seen = run_at_terminal(command, workdir, env, "n", stderr=workdir / "errors.txt", timeout=30)
    assert "[y/N]" in seen.terminal, seen.terminal
    assert seen.code == 1
    assert "[y/N]" not in (workdir / "errors.txt").read_text(encoding="utf-8")
    assert "cancelled; nothing was changed" in (workdir / "errors.txt").read_text("utf-8")
    assert server.stats.calls("PATCH") == []
    assert server.stats.calls("POST", "/public-api/v1/kyb/invites/") == []
