"""The real CLI, as a test runs it.

``run_cli`` runs the CLI in this process (see ``inprocess.py``): fast (no 0.3 s
interpreter start per call), and the same streams, exit code and environment a
child process would have.
``run_cli_process`` starts the installed `reconcile` script: use it only where
the process is the point (signals, exit of the script, terminals).
"""

from __future__ import annotations

import shlex
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TypeAlias

from .helpers import RECONCILE, clean_env
from .inprocess import CliResult, run_in_process

__all__ = [
    "CliResult",
    "CliRun",
    "last_error",
    "run_cli",
    "run_cli_process",
    "run_shell",
    "serving_sandbox",
]

# What a test gets from either runner: both have args, returncode, stdout and stderr.
CliRun: TypeAlias = CliResult | subprocess.CompletedProcess[str]


def last_error(result: CliRun) -> str:
    """The last line of a run's stderr: where a failed run says why (cli.md)."""
    return result.stderr.strip().splitlines()[-1]


def run_cli(
    *args: str,
    env: dict[str, str] | None = None,
    cwd: Path | str | None = None,
    input: str | None = None,
    timeout: float = 120,
) -> CliResult:
    """Run `reconcile ARGS` in this process as a user would, capturing its streams.

    ``timeout`` is kept for the signature's sake: an in-process run cannot be killed.
    """
    return run_in_process(list(args), env if env is not None else clean_env(), cwd, input)


def run_cli_process(
    *args: str,
    env: dict[str, str] | None = None,
    cwd: Path | str | None = None,
    input: str | None = None,
    timeout: float = 120,
) -> subprocess.CompletedProcess[str]:
    """Run the installed `reconcile` command as a child process, capturing its streams."""
    return subprocess.run(
        [*RECONCILE, *args],
        env=env if env is not None else clean_env(),
        cwd=cwd,
        input=input,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def run_shell(
    command: str, cwd: Path | str | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``reconcile ...`` run by bash, so that a test can close or redirect its streams
    (``>&-``, ``>/dev/full``, ``<&-``): the first word "reconcile" is the installed one."""
    reconcile = " ".join(shlex.quote(part) for part in RECONCILE)
    return subprocess.run(
        ["bash", "-c", command.replace("reconcile", reconcile, 1)],
        cwd=cwd,
        env=env if env is not None else clean_env(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@contextmanager
def serving_sandbox(*args: str) -> Iterator[list[str]]:
    """A `reconcile sandbox` child process, serving while in the block: its banner's lines."""
    with subprocess.Popen(
        [*RECONCILE, "sandbox", "--port", "0", *args],
        env=clean_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    ) as server:
        assert server.stderr is not None
        lines: list[str] = []
        try:
            while not lines or not lines[-1].startswith("Press Ctrl-C"):
                line = server.stderr.readline()
                assert line, f"the sandbox ended: {lines}"
                lines.append(line.rstrip("\n"))
            yield lines
        finally:
            server.terminate()
