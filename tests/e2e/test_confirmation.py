"""apply and resend without --auto-approve and without a terminal: refused at once.

Nobody can answer the question, so the run refuses before it reads a file or sends a
request (at 20,000 invites under a rate limit, reading first costs minutes for nothing);
a closed stdin (`<&-`) is no terminal either, and never a traceback.
The installed `reconcile` in a child process, against the sandbox over HTTP.
"""

from __future__ import annotations

import shlex
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from support.cli import run_cli_process
from support.helpers import RECONCILE, sandbox_env
from support.invites import ACME, desired_entry, write_invites

from reconciler.sandbox import Sandbox

pytestmark = pytest.mark.e2e


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
        "pass --auto-approve, or apply a reviewed plan with `apply --plan FILE`"
    ) in result.stderr
    assert server.stats.total == 0  # no token, no read: refused before anything was read
    assert result.stdout == ""  # no plan was printed, since none was made


def test_apply_refuses_before_reading_even_broken_files(server: Sandbox, workdir: Path) -> None:
    (workdir / "invites" / "broken.yaml").write_text("invites: [\n", encoding="utf-8")
    result = run_cli_process("apply", cwd=workdir, env=sandbox_env(server), input="")
    assert result.returncode == 1
    assert "standard input is not a terminal" in result.stderr
    assert "broken.yaml" not in result.stderr  # the files were never read


def run_with_stdin_closed(
    args: list[str], cwd: Path, env: dict[str, str]
) -> subprocess.CompletedProcess[str]:
    command = " ".join(shlex.quote(part) for part in [*RECONCILE, *args]) + " <&-"
    return subprocess.run(
        ["bash", "-c", command],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.mark.parametrize(
    ("args", "action"),
    [(["apply"], "apply"), (["resend", "inv_acme"], "re-send")],
    ids=["apply", "resend"],
)
def test_a_closed_stdin_is_no_terminal_and_no_traceback(
    server: Sandbox, workdir: Path, args: list[str], action: str
) -> None:
    result = run_with_stdin_closed(args, workdir, sandbox_env(server))

    assert result.returncode == 1
    assert f"refusing to {action} without confirmation: standard input is not a terminal" in (
        result.stderr
    )
    assert "Traceback" not in result.stderr
    assert "AttributeError" not in result.stderr
    assert server.stats.total == 0


def test_a_closed_stdin_with_auto_approve_applies(server: Sandbox, workdir: Path) -> None:
    result = run_with_stdin_closed(["apply", "--auto-approve"], workdir, sandbox_env(server))
    assert result.returncode == 0, result.stderr
    assert "Apply: 1 updated, 0 failed." in result.stdout
    assert len(server.stats.calls("PATCH")) == 1


def test_resend_from_a_pipe_refuses_before_any_request(server: Sandbox, workdir: Path) -> None:
    result = run_cli_process("resend", "inv_acme", cwd=workdir, env=sandbox_env(server))
    assert result.returncode == 1
    assert "refusing to re-send without confirmation" in result.stderr
    assert server.stats.total == 0
