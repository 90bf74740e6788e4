"""A real server process (nginx, HAProxy) for tests and benchmarks: found on the
system, given a free port of 127.0.0.1, waited for until it listens, stopped gently
(no pytest here)."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Callable

START_TIMEOUT = 10.0  # seconds for a server to listen; they take a few milliseconds
STOP_TIMEOUT = 5.0


def system_binary(name: str) -> str | None:
    """The ``name`` to run (PATH, then the sbin directories a user's PATH may lack), or
    None when it is not installed."""
    found = shutil.which(name)
    if found:
        return found
    for directory in ("/usr/sbin", "/usr/local/sbin"):
        candidate = os.path.join(directory, name)
        if os.access(candidate, os.X_OK):
            return candidate
    return None


def free_port() -> int:
    """A port of 127.0.0.1 free now. Another process may take it before the server
    binds it (rare): the server then fails to start, saying so in its error log."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def wait_listening(
    process: subprocess.Popen[bytes], port: int, name: str, error_log: Callable[[], str]
) -> None:
    """Return once ``process`` accepts connections on ``port``; raise with what it
    said when it exits first or does not listen within START_TIMEOUT."""
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{name} exited at start: {error_log()}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.01)
    raise RuntimeError(f"{name} did not listen within {START_TIMEOUT:g}s: {error_log()}")


def stop_gently(process: subprocess.Popen[bytes] | None, gently: signal.Signals) -> None:
    """Send ``gently`` (the server's own "finish the answers, then exit"), and kill it
    after STOP_TIMEOUT."""
    if process is None or process.poll() is not None:
        return
    process.send_signal(gently)
    try:
        process.wait(STOP_TIMEOUT)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
