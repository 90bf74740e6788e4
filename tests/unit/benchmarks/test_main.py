"""The benchmarks stay runnable: they import test helpers, which move with the tests."""

from __future__ import annotations

import subprocess
import sys

from support.helpers import REPO


def test_every_scenario_imports_and_is_listed():
    # --help imports every scenario module, and names each one.
    result = subprocess.run(
        [sys.executable, "-m", "benchmarks", "--help"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    for name in ("startup (0)", "validate-large (v)", "plan-large (m)", "plan-cpu (c)"):
        assert name in result.stdout
