"""Run the `reconcile` CLI inside the test process, as if it were a child process.

Starting a Python process per CLI test costs about 0.3 s; calling
``reconciler.cli.run`` costs milliseconds. What a child process would give each
run for free is restored by hand: its own environment, working directory,
standard streams (not terminals), logging set-up, signal handlers and set of
registered secrets. An exception that escapes ``run`` is printed as a
traceback on stderr with exit code 1, as the interpreter would.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import signal
import sys
import traceback
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from reconciler import safetext
from reconciler.cli import run

_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGPIPE)


@dataclass
class CliResult:
    """What ``subprocess.run(..., capture_output=True, text=True)`` would return."""

    args: list[str]
    returncode: int
    stdout: str
    stderr: str


class _Stream(io.TextIOWrapper):
    """A text stream over bytes that is not a terminal, like a pipe."""

    def __init__(self, data: bytes = b"") -> None:
        super().__init__(io.BytesIO(data), encoding="utf-8", errors="strict", newline=None)

    def isatty(self) -> bool:
        return False

    def text(self) -> str:
        self.flush()
        buffer = self.buffer
        assert isinstance(buffer, io.BytesIO)
        return buffer.getvalue().decode("utf-8", "replace").replace("\r\n", "\n")


@contextlib.contextmanager
def _environment(env: Mapping[str, str]) -> Iterator[None]:
    saved = dict(os.environ)
    os.environ.clear()
    os.environ.update(env)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


@contextlib.contextmanager
def _working_directory(cwd: Path | str | None) -> Iterator[None]:
    saved = os.getcwd()
    if cwd is not None:
        os.chdir(cwd)
    try:
        yield
    finally:
        os.chdir(saved)


@contextlib.contextmanager
def _process_state() -> Iterator[None]:
    """Logging, signal handlers and known secrets as a new process has them, then as before.

    A fresh, empty set of secrets matters: one registered by an earlier test must not
    redact output that a real run would leak.
    """
    logger = logging.getLogger("reconciler")
    handlers, level = list(logger.handlers), logger.level
    signal_handlers = {signum: signal.getsignal(signum) for signum in _SIGNALS}
    secrets = safetext._REDACTOR._secrets
    logger.handlers.clear()
    logger.setLevel(logging.NOTSET)
    safetext._REDACTOR._secrets = ()
    try:
        yield
    finally:
        logger.handlers[:] = handlers
        logger.setLevel(level)
        for signum, handler in signal_handlers.items():
            if handler is not None:
                signal.signal(signum, handler)
        safetext._REDACTOR._secrets = secrets


@contextlib.contextmanager
def _streams(input: str | None) -> Iterator[tuple[_Stream, _Stream]]:
    saved = sys.stdin, sys.stdout, sys.stderr
    stdout, stderr = _Stream(), _Stream()
    sys.stdin = _Stream((input or "").encode("utf-8"))
    sys.stdout, sys.stderr = stdout, stderr
    try:
        yield stdout, stderr
    finally:
        sys.stdin, sys.stdout, sys.stderr = saved


def _exit_code(exc: SystemExit) -> int:
    if exc.code is None:
        return 0
    if isinstance(exc.code, int):
        return exc.code
    print(exc.code, file=sys.stderr)
    return 1


def run_in_process(
    args: list[str],
    env: Mapping[str, str],
    cwd: Path | str | None = None,
    input: str | None = None,
) -> CliResult:
    """Run ``reconcile ARGS`` in this process with the given environment and directory."""
    with (
        _process_state(),
        _environment(env),
        _working_directory(cwd),
        _streams(input) as (stdout, stderr),
    ):
        try:
            code = run(list(args))
        except SystemExit as exc:
            code = _exit_code(exc)
        except Exception:
            traceback.print_exc(file=sys.stderr)
            code = 1
        out, err = stdout.text(), stderr.text()
    return CliResult(["reconcile", *args], code, out, err)
