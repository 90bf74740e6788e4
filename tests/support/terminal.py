"""The real CLI with a pseudo-terminal in place of a person's: what they see, and an
answer typed when `[y/N]` is asked. Each of stdin, stdout and stderr is the terminal
unless a test sends it elsewhere (a file, a pipe, /dev/null)."""

from __future__ import annotations

import contextlib
import os
import pty
import select
import subprocess
import time
from pathlib import Path
from typing import Any, NamedTuple

from support.helpers import RECONCILE

QUESTION = b"[y/N]"
PIPE = "pipe"  # stdout read through a pipe, as `reconcile apply | less` would


class Seen(NamedTuple):
    code: int
    terminal: str  # everything the terminal showed, colours included
    piped: str  # stdout, when it went to a pipe


def run_at_terminal(
    args: list[str],
    cwd: Path,
    env: dict[str, str],
    answer: str | None = None,
    *,
    stdin_terminal: bool = True,
    stdout: Path | str | None = None,
    stderr: Path | None = None,
    timeout: float = 60,
) -> Seen:
    """``reconcile ARGS``; ``answer`` (and a newline) is typed once the question shows, or
    at the end of ``timeout`` if it never does, so a run asking elsewhere still ends. A
    piped stdout is read at the end: for outputs smaller than a pipe holds."""
    leader, follower = pty.openpty()
    with contextlib.ExitStack() as files:  # the child keeps its own copies

        def where(target: Path | str | None) -> Any:
            if target is None:
                return follower
            if target == PIPE:
                return subprocess.PIPE
            return files.enter_context(Path(target).open("wb"))

        proc = subprocess.Popen(
            [*RECONCILE, *args],
            cwd=cwd,
            env=env,
            stdin=follower if stdin_terminal else subprocess.DEVNULL,
            stdout=where(stdout),
            stderr=where(stderr),
        )
    os.close(follower)
    shown, answered = b"", answer is None
    deadline = time.monotonic() + timeout
    try:
        while True:
            if not answered and (QUESTION in shown or time.monotonic() > deadline):
                os.write(leader, answer.encode() + b"\n")  # type: ignore[union-attr]
                answered = True
            ready, _, _ = select.select([leader], [], [], 0.5)
            if not ready:
                if proc.poll() is not None and answered:
                    break
                continue
            try:
                chunk = os.read(leader, 4096)
            except OSError:  # EIO: the process closed the terminal's last descriptor
                break
            if not chunk:
                break
            shown += chunk
        piped = proc.stdout.read().decode("utf-8", "replace") if proc.stdout else ""
        code = proc.wait(timeout=timeout)
    finally:
        os.close(leader)
        if proc.stdout:
            proc.stdout.close()
    return Seen(code, shown.decode("utf-8", "replace"), piped)
