"""A real server process (nginx, HAProxy, Apache) for tests and benchmarks: found on the
system, given a free port of 127.0.0.1, waited for until it listens, stopped gently
(no pytest here); ``RealServer`` is the lifecycle they share."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Self
from urllib.parse import urlsplit

from reconciler.sandbox import Sandbox

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


class RealServer:
    """One real server in front of ``upstream`` (a sandbox's URL), in a temporary
    directory of its own (its config, pid and logs), on a free port of 127.0.0.1: started
    on ``start()`` or ``with``, stopped gently. A subclass says what to run: ``NAME``,
    ``STOP_SIGNAL`` (its "finish the answers, then exit"), ``config()``, ``popen()``,
    ``error_log()``, and ``parse()`` for one line of ``access.log`` (``requests()``)."""

    NAME = ""
    STOP_SIGNAL = signal.SIGTERM

    def __init__(self, upstream: str, binary: str) -> None:
        self.binary = binary
        self.upstream = urlsplit(upstream).netloc
        self.port = 0
        self.prefix: Path | None = None
        self._process: subprocess.Popen[bytes] | None = None
        self._log: list[Any] = []  # what was read of the access log before it went

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def client_env(self, sandbox: Sandbox) -> dict[str, str]:
        """The RECONCILER_* variables that point the CLI at the sandbox through it."""
        return {**sandbox.client_env(), "RECONCILER_BASE_URL": self.url}

    def config(self) -> None:
        """Write the config into ``self.prefix`` (``self.port`` is chosen)."""
        raise NotImplementedError

    def popen(self) -> subprocess.Popen[bytes]:
        raise NotImplementedError

    def error_log(self) -> str:
        raise NotImplementedError

    @staticmethod
    def parse(line: str) -> Any:
        """One request of ``access.log``, or None for another line."""
        return None

    def start(self) -> Self:
        self.prefix = Path(tempfile.mkdtemp(prefix=f"reconcile-{self.NAME}-"))
        self.port = free_port()
        self.config()
        self._process = self.popen()
        try:
            wait_listening(self._process, self.port, self.NAME, self.error_log)
        except BaseException:
            self.stop()
            raise
        return self

    def requests(self) -> list[Any]:
        """Every request it answered so far, in the order it had them."""
        if self.prefix is None:
            return list(self._log)
        path = self.prefix / "access.log"
        if not path.exists():
            return []
        with open(path, encoding="utf-8", errors="replace") as log:
            logged = [entry for line in log if (entry := self.parse(line)) is not None]
        return sorted(logged, key=lambda entry: entry.at)

    def stop(self) -> None:
        process, self._process = self._process, None
        stop_gently(process, self.STOP_SIGNAL)
        if process is not None and process.stderr:
            process.stderr.close()
        if self.prefix is not None:
            self._log = self.requests()
            shutil.rmtree(self.prefix, ignore_errors=True)
            self.prefix = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
