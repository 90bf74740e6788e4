"""Shared fixtures: an in-process sandbox on a free loopback port, and the real CLI."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from reconciler.sandbox import SANDBOX_CLIENT_ID, SANDBOX_CLIENT_SECRET, Sandbox, SandboxOptions
from reconciler.sandbox.state import load_state_file

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "examples" / "invites"


def _reconcile_command() -> list[str]:
    # The console script installed beside this interpreter: the CLI a user runs.
    script = Path(sys.executable).parent / "reconcile"
    if script.exists():
        return [str(script)]
    found = shutil.which("reconcile")
    return [found] if found else [sys.executable, "-m", "reconciler"]


RECONCILE = _reconcile_command()


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RECONCILER_")}
    env.pop("NO_COLOR", None)
    env.update(extra)
    return env


def sandbox_env(sandbox: Sandbox, **extra: str) -> dict[str, str]:
    return clean_env(
        RECONCILER_BASE_URL=sandbox.url,
        RECONCILER_CLIENT_ID=SANDBOX_CLIENT_ID,
        RECONCILER_CLIENT_SECRET=SANDBOX_CLIENT_SECRET,
        **extra,
    )


def run_cli(
    *args: str,
    env: dict[str, str] | None = None,
    cwd: Path | str | None = None,
    input: str | None = None,
    timeout: float = 120,
) -> subprocess.CompletedProcess[str]:
    """Run the installed `reconcile` command as a user would, capturing its streams."""
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


@pytest.fixture
def example_state() -> list[dict[str, Any]]:
    """The bundled sandbox state (a fresh copy each time)."""
    return load_state_file(None)


@pytest.fixture
def start_sandbox() -> Iterator[Callable[..., Sandbox]]:
    """Start sandboxes with given invites and knobs; all are stopped after the test."""
    started: list[Sandbox] = []

    def start(invites: list[dict[str, Any]] | None = None, **knobs: Any) -> Sandbox:
        server = Sandbox(invites, options=SandboxOptions(**knobs)).start()
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


@pytest.fixture
def sandbox(start_sandbox: Callable[..., Sandbox]) -> Sandbox:
    """A sandbox serving the bundled example state."""
    return start_sandbox()


@pytest.fixture
def write_yaml(tmp_path: Path) -> Callable[[str, str], Path]:
    """Write a YAML file exactly as given (hand-written style) and return its path."""

    def write(name: str, text: str) -> Path:
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        return path

    return write
