"""Helpers shared by the tests and the benchmarks: where things are, and the CLI's environment.

No pytest here, so ``benchmarks/`` imports this module too, as ``support.helpers`` (the
name the tests use: ``benchmarks/__init__.py`` puts ``tests/`` on ``sys.path``).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any

from reconciler.sandbox import Sandbox

from .hostile_server import HostileServer

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples" / "invites"


def _reconcile_command() -> list[str]:
    # The console script installed beside this interpreter: the CLI a user runs.
    script = Path(sys.executable).parent / "reconcile"
    if script.exists():
        return [str(script)]
    found = shutil.which("reconcile")
    return [found] if found else [sys.executable, "-m", "reconciler"]


RECONCILE = _reconcile_command()


# The CA bundle variables the tool reads (requests does): the machine's are no part of a
# test, which talks to 127.0.0.1 over http or trusts a CA it names itself.
CA_BUNDLE_VARIABLES = ("REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE")


def clean_env(**extra: str) -> dict[str, str]:
    """This process's environment without any RECONCILER_* setting, NO_COLOR or CA
    bundle variable (``CA_BUNDLE_VARIABLES``)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RECONCILER_")}
    for name in ("NO_COLOR", *CA_BUNDLE_VARIABLES):
        env.pop(name, None)
    env.update(extra)
    return env


def sandbox_env(sandbox: Sandbox | HostileServer, **extra: str) -> dict[str, str]:
    """A clean environment that points the CLI at ``sandbox`` (or a hostile server)."""
    return clean_env(**sandbox.client_env(), **extra)


def audit_log(path: Path) -> list[dict[str, Any]]:
    """The records of the audit log at ``path``, one a line (none when it was never written)."""
    if not path.exists():
        return []
    lines = path.read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def audit_outcomes(path: Path) -> list[tuple[str, str, str]]:
    """(operation, invite id, outcome) of each outcome record of the audit log at ``path``."""
    outcomes = [r for r in audit_log(path) if r["record"] == "outcome"]
    return [(r["operation"], r["invite_id"], r["outcome"]) for r in outcomes]
