"""The benchmarks stay runnable: they import the tests' fixtures, `support`, by one name."""

from __future__ import annotations

import ast
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


def test_no_benchmark_imports_the_test_tree_by_path():
    # The shared fixtures are one package under one name, `support` (tests/ on sys.path,
    # from benchmarks/__init__.py): `tests.support.x` would be the same files a second time.
    found = []
    for path in sorted((REPO / "benchmarks").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            found += [
                f"{path.relative_to(REPO)}:{node.lineno}: {name}"
                for name in names
                if name == "tests" or name.startswith("tests.")
            ]
    assert found == []
