"""What the ansible-playbook end-to-end tests share: the tools' place and a play's result."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ANSIBLE_BIN = Path(sys.executable).parent


def require_ansible() -> None:
    """Skip without ansible-core, except under CI, which installs it."""
    if (ANSIBLE_BIN / "ansible-playbook").exists():
        return
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail("ansible-playbook is not installed, and CI=true: .ci/run installs it")
    pytest.skip('ansible-core is not installed (pip install ".[ansible]"); CI runs these')


class Played:
    """One ansible-playbook run: its exit code, output, and the result the play saved."""

    def __init__(self, process: subprocess.CompletedProcess[str], folder: Path) -> None:
        self.code = process.returncode
        self.stdout = process.stdout
        self.stderr = process.stderr
        saved = folder / "result.json"
        self.result: dict[str, Any] = json.loads(saved.read_text()) if saved.exists() else {}
        saved.unlink(missing_ok=True)

    @property
    def output(self) -> str:
        return self.stdout + self.stderr

    def recap(self, **counts: int) -> bool:
        line = next(x for x in self.stdout.splitlines() if x.startswith("localhost "))
        return all(f"{name}={count} " in line + " " for name, count in counts.items())
