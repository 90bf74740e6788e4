"""Shared fixtures: an in-process sandbox on a free loopback port, and the real CLI.

``run_cli`` runs the CLI in this process (see ``inprocess.py``): fast (no 0.3 s
interpreter start per call), and the same streams, exit code and environment a
child process would have.
``run_cli_process`` starts the installed `reconcile` script: use it only where
the process is the point (signals, exit of the script, terminals).
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import EXAMPLES, RECONCILE, REPO, clean_env, sandbox_env
from inprocess import CliResult, run_in_process

from reconciler.resources import invite_schema_path
from reconciler.sandbox import SANDBOX_CLIENT_ID, SANDBOX_CLIENT_SECRET, Sandbox, SandboxOptions
from reconciler.sandbox.state import load_state_file
from reconciler.schema import check as schema

__all__ = [
    "EXAMPLES",
    "RECONCILE",
    "REPO",
    "SANDBOX_CLIENT_ID",
    "SANDBOX_CLIENT_SECRET",
    "CliResult",
    "clean_env",
    "run_cli",
    "run_cli_process",
    "sandbox_env",
]


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


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """Workers for `-n auto`: two per core, since most tests wait rather than compute."""
    return 2 * (os.cpu_count() or 1)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Run the tests marked `slow` first, so no worker starts one near the end."""
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)


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


@pytest.fixture
def edit_invite_schema(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Callable[..., None]]:
    """Read invite files against the shipped schema with ``change`` made to its
    invite entry (or to the part of it at the keys ``at``), as a team may edit the file."""

    def edit(
        change: Callable[[dict[str, Any]], None], at: tuple[str, ...] = ("$defs", "invite")
    ) -> None:
        edited = json.loads(invite_schema_path().read_text(encoding="utf-8"))
        part = edited
        for key in at:
            part = part[key]
        change(part)
        path = tmp_path / "invites.schema.json"
        path.write_text(json.dumps(edited), encoding="utf-8")
        monkeypatch.setattr(schema, "invite_schema_path", lambda: path)
        schema.invite_validators.cache_clear()

    yield edit
    schema.invite_validators.cache_clear()  # before the path is put back
