"""Run the installed `reconcile` as a child process and measure it: wall time, CPU time
(user + sys) and peak RSS, from ``os.wait4`` in a small launcher (see launcher.py). The
sandbox runs in this process and notes when each request arrives, which splits a run
into phases."""

from __future__ import annotations

import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

from support.helpers import RECONCILE, REPO, clean_env, sandbox_env

from reconciler.sandbox import Sandbox

RUN_TIMEOUT = 1800.0  # seconds for one CLI run before it is killed
_LAUNCHER = Path(__file__).with_name("launcher.py")


class RunFailed(Exception):
    """The CLI run itself went wrong: the figures would mean nothing."""


@dataclass
class Measured:
    args: list[str]
    returncode: int
    wall: float  # seconds, from just before the fork to the child's reaping
    cpu: float  # CPU seconds of the child, user + system
    maxrss_kib: int  # peak resident set size (Linux: KiB)
    stdout: str
    stderr: str
    server_cpu: float  # CPU seconds of this process (the sandbox) during the run
    load: float  # 1-minute load average at the start: others sharing the cores
    started: float  # time.monotonic() just before the fork, the sandbox's clock too
    first_request: float | None = None  # seconds from the start
    last_request: float | None = None

    @property
    def peak_mb(self) -> float:
        return self.maxrss_kib * 1024 / 1e6

    def phases(self) -> str:
        if self.first_request is None or self.last_request is None:
            return "no request reached the sandbox"
        return (
            f"{self.first_request:.2f}s before the first request, "
            f"{self.last_request - self.first_request:.2f}s of requests, "
            f"{self.wall - self.last_request:.2f}s after the last one"
        )


def code_version() -> str:
    """The commit measured, and whether reconciler/ has local changes."""

    def git(*args: str) -> str:
        return subprocess.run(
            ["git", "-C", str(REPO), *args], capture_output=True, text=True, check=True
        ).stdout.strip()

    try:
        dirty = git("status", "--porcelain", "--", "reconciler", "schemas")
        return git("rev-parse", "--short", "HEAD") + (" with local changes" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown (not a git checkout)"


@dataclass
class Runner:
    """Runs the CLI; with ``profile_dir`` under a profiler (figures then mean little)."""

    profile_dir: Path | None = None
    verbose: bool = False

    def command(self, label: str) -> list[str]:
        if self.profile_dir is None:
            return RECONCILE
        self.profile_dir.mkdir(parents=True, exist_ok=True)
        py_spy = shutil.which("py-spy", path=str(Path(sys.executable).parent)) or shutil.which(
            "py-spy"
        )
        if py_spy:
            # Samples whichever thread holds the GIL (cProfile sees only the main one),
            # without pausing it: a paused CLI's CPU stands still while its clock runs,
            # and the in-flight limit (api/capacity/probe.py) takes it for waiting.
            out = self.profile_dir / f"{label}.collapsed"
            spy = [py_spy, "record", "--format", "raw", "--rate", "200", "--gil", "--nonblocking"]
            return [*spy, "--function", "--threads", "--output", str(out), "--", *_module()]
        out = self.profile_dir / f"{label}.prof"
        return [sys.executable, "-m", "cProfile", "-o", str(out), "-m", "reconciler"]

    def run(
        self,
        label: str,
        args: list[str],
        sandbox: Sandbox | None,
        cwd: Path,
        expect: int = 0,
        via: str | None = None,
    ) -> Measured:
        """``via``: a URL in front of the sandbox (a gateway) the CLI is pointed at instead."""
        if self.verbose:
            print(f"  $ reconcile {' '.join(args)}", file=sys.stderr, flush=True)
        env = sandbox_env(sandbox) if sandbox is not None else clean_env()
        if via is not None:
            env["RECONCILER_BASE_URL"] = via
        measured = _measure([*self.command(label), *args], env, cwd)
        measured.args = args
        if sandbox is not None:
            arrivals = sandbox.stats.arrivals()
            if arrivals:
                measured.first_request = arrivals[0] - measured.started
                measured.last_request = arrivals[-1] - measured.started
        if measured.returncode != expect:
            tail = "\n".join(measured.stderr.strip().splitlines()[-15:])
            raise RunFailed(
                f"`reconcile {' '.join(args)}` exited {measured.returncode}, "
                f"expected {expect}; stderr ends with:\n{tail}"
            )
        return measured


def _module() -> list[str]:
    return [sys.executable, "-m", "reconciler"]


def _measure(command: list[str], env: dict[str, str], cwd: Path) -> Measured:
    with (
        tempfile.TemporaryFile() as out,
        tempfile.TemporaryFile() as err,
        tempfile.TemporaryDirectory() as scratch,
    ):
        figures_file = Path(scratch) / "figures.json"
        load = os.getloadavg()[0]
        before = resource.getrusage(resource.RUSAGE_SELF)
        child = subprocess.Popen(
            [sys.executable, "-S", str(_LAUNCHER), str(figures_file), *command],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=err,
            env=env,
            cwd=cwd,
            start_new_session=True,  # so a timeout kills the CLI with its launcher
        )
        timer = threading.Timer(RUN_TIMEOUT, os.killpg, (child.pid, signal.SIGKILL))
        timer.start()
        try:
            returncode = child.wait()
        except BaseException:  # e.g. Ctrl-C: do not leave the CLI running
            os.killpg(child.pid, signal.SIGKILL)
            child.wait()
            raise
        finally:
            timer.cancel()
        after = resource.getrusage(resource.RUSAGE_SELF)
        if not figures_file.exists():
            raise RunFailed(f"`{' '.join(command)}` was killed (after {RUN_TIMEOUT:.0f}s?)")
        figures = json.loads(figures_file.read_text(encoding="utf-8"))
        out.seek(0)
        err.seek(0)
        return Measured(
            args=command,
            returncode=returncode,
            wall=figures["wall"],
            cpu=figures["cpu"],
            maxrss_kib=figures["maxrss_kib"],
            stdout=out.read().decode("utf-8", "replace"),
            stderr=err.read().decode("utf-8", "replace"),
            server_cpu=(after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime),
            load=load,
            started=figures["started"],
        )
