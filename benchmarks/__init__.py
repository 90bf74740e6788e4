"""Benchmarks of the real `reconcile` CLI against the in-process sandbox.

Run ``python -m benchmarks`` (or ``python benchmarks/run.py``) from the repository
root with the project's environment; see README.md for the scenarios and figures.

The fixtures they share with the tests (realistic invites, the CLI's environment, real
nginx and HAProxy gateways) are the package ``support`` in ``tests/``, imported under the
one name the tests use: ``tests/`` goes on ``sys.path`` here, the one place, as pytest puts
it there for the tests (and mypy finds it through ``mypy_path``). No benchmark imports
``tests.``: ``tests/unit/benchmarks/test_main.py`` fails if one does.
"""

from __future__ import annotations

import sys
from pathlib import Path

_TESTS = str(Path(__file__).resolve().parent.parent / "tests")
if _TESTS not in sys.path:
    sys.path.insert(0, _TESTS)
