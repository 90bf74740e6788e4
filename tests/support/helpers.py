"""Helpers shared by the tests and the benchmarks: where things are, and the CLI's environment.

No pytest here, so ``benchmarks/`` imports this module too, as ``support.helpers`` (the
name the tests use: ``benchmarks/__init__.py`` puts ``tests/`` on ``sys.path``).
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

from reconciler.sandbox import Sandbox

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


def clean_env(**extra: str) -> dict[str, str]:
    """This process's environment without any RECONCILER_* setting or NO_COLOR."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RECONCILER_")}
    env.pop("NO_COLOR", None)
    env.update(extra)
    return env


def sandbox_env(sandbox: Sandbox, **extra: str) -> dict[str, str]:
    """A clean environment that points the CLI at ``sandbox``."""
    return clean_env(**sandbox.client_env(), **extra)
