"""Output that cannot be written ends the run with a message, never a traceback."""

from __future__ import annotations

import shlex
import subprocess
from pathlib import Path

import pytest
from support.helpers import EXAMPLES, RECONCILE, clean_env

pytestmark = pytest.mark.e2e


def run_shell(command: str) -> subprocess.CompletedProcess[str]:
    reconcile = " ".join(shlex.quote(part) for part in RECONCILE)
    return subprocess.run(
        ["bash", "-c", command.replace("reconcile", reconcile, 1)],
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


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
