"""Output that cannot be written ends the run with a message, never a traceback.

A reader that stops early (`reconcile plan | head -1`) ends the run quietly: the real
`reconcile` process, its stdout a pipe closed after the first line, against a sandbox
whose plan is larger than a pipe holds: like git, the run ends without a traceback or a
second complaint at exit; the exit code is 1, as the output was cut short. A full disk
or a closed stdout (apply and resend: test_resends.py) likewise.
"""

from __future__ import annotations

import re
import shlex
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from support.cli import run_shell
from support.estate import make_dataset
from support.helpers import EXAMPLES, RECONCILE, sandbox_env

from reconciler.sandbox import Sandbox

pytestmark = pytest.mark.e2e


# 600 changes make some 100 KB of text, 300 some 150 KB of JSON: more than a pipe holds.
@pytest.mark.parametrize(("output_format", "count"), [("text", 600), ("json", 300)])
def test_a_closed_pipe_ends_the_plan_quietly(
    start_sandbox: Callable[..., Sandbox], tmp_path: Path, output_format: str, count: int
) -> None:
    data = make_dataset(tmp_path / "invites", count, count)
    server = start_sandbox(data.server)
    child = subprocess.Popen(
        [*RECONCILE, "plan", "--format", output_format, str(data.root)],
        env=sandbox_env(server),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert child.stdout is not None and child.stderr is not None
    first = child.stdout.readline()
    child.stdout.close()  # as `head -1` does
    errors = child.stderr.read().decode("utf-8")
    code = child.wait(timeout=120)
    assert first.startswith(b"~ inv_" if output_format == "text" else b"{")
    assert code == 1
    assert "Traceback" not in errors
    assert "BrokenPipe" not in errors and "Exception ignored" not in errors
    assert errors.splitlines()[-1].startswith(f"Reading invites: {count} of {count} done")


STOPPED = "Stopped: stdout could not be written (Broken pipe); no new writes were started."


def test_a_closed_pipe_during_apply_stops_new_writes_and_says_so_on_stderr(
    start_sandbox: Callable[..., Sandbox], tmp_path: Path
) -> None:
    data = make_dataset(tmp_path / "invites", 40, 40)
    server = start_sandbox(data.server, latency=0.02)
    child = subprocess.Popen(
        [*RECONCILE, "apply", "--auto-approve", "--parallelism", "1", str(data.root)],
        env=sandbox_env(server),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert child.stdout is not None and child.stderr is not None
    for line in iter(child.stdout.readline, b""):  # the plan, then the first write's line
        if line.startswith(b"updated"):
            break
    child.stdout.close()  # the reader goes away
    errors = child.stderr.read().decode("utf-8").splitlines()
    assert child.wait(timeout=120) == 1
    # Not a silent half-done change: stderr says what was written and what was not.
    assert STOPPED in errors
    summary = errors[errors.index(STOPPED) + 1]
    updated, not_started = (int(n) for n in re.findall(r"(\d+) (?:updated|not started)", summary))
    assert updated + not_started == 40 and not_started > 0
    assert len(server.stats.calls("PATCH")) == updated
    assert not any("Traceback" in line or "BrokenPipe" in line for line in errors)


def test_a_closed_pipe_during_resend_sends_no_further_e_mail_and_says_which_on_stderr(
    start_sandbox: Callable[..., Sandbox], tmp_path: Path
) -> None:
    data = make_dataset(tmp_path / "invites", 30, 0)
    server = start_sandbox(data.server, latency=0.02)
    ids = [invite["id"] for invite in data.desired]
    child = subprocess.Popen(
        [*RECONCILE, "resend", "--auto-approve", *ids],
        env={**sandbox_env(server), "RECONCILER_PARALLELISM": "1"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert child.stdout is not None and child.stderr is not None
    for line in iter(child.stdout.readline, b""):  # the list of e-mails, then the first
        if line.startswith(b"re-sent  inv_"):
            break
    child.stdout.close()
    errors = child.stderr.read().decode("utf-8").splitlines()
    assert child.wait(timeout=120) == 1
    stopped = "Stopped: stdout could not be written (Broken pipe); no further e-mail was sent."
    assert stopped in errors, errors
    sent = int(re.findall(r"Resend: (\d+) re-sent", "\n".join(errors))[0])
    # Every e-mail the platform sent is one the run reports; none after stdout went.
    assert sum(server.store.resends.values()) == sent < len(ids)
    not_sent = next(line for line in errors if line.startswith("Not sent: "))
    assert len(not_sent.split(". Send them with")[0].split()) - 2 == len(ids) - sent


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="no /dev/full here")
def test_a_full_disk_under_stdout_is_an_error_not_a_traceback() -> None:
    result = run_shell("reconcile schema >/dev/full")
    assert result.returncode == 1
    assert "error: cannot write the output: No space left on device" in result.stderr
    assert "Traceback" not in result.stderr


def test_a_closed_stdout_is_not_a_crash() -> None:
    # Started with stdout closed (`>&-`), Python has no sys.stdout at all.
    result = run_shell(f"reconcile validate {shlex.quote(str(EXAMPLES))} >&-")
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
