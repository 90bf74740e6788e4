"""Imported at start-up by Python processes that tests start during a mutation run.

Only on PYTHONPATH then (tests/mutation/plugin.py puts it there), so a `reconcile`
started by a test runs mutmut's copy under mutants/:
- while mutmut maps tests to functions (MUTANT_UNDER_TEST=stats), all of it, and the
  names of the functions this process reached go to a file the parent test collects;
- while a mutant is tried, only the mutated module comes from mutants/ (the rest is the
  installed code, the same text without trampolines): importing every mutated module
  costs a second of CPU per process start.
"""

from __future__ import annotations

import contextlib
import importlib.abc
import importlib.util
import os
import sys
from collections.abc import Sequence
from importlib.machinery import ModuleSpec
from types import ModuleType


def _record_hits(hits_dir: str | None) -> None:
    import atexit

    from mutmut.mutation import trampoline

    hits: set[str] = set()

    def record(name: str, caller: str | None = None) -> None:
        hits.add(name)

    def save() -> None:
        # A child whose environment lost the directory, or that outlived the test run
        # that made it, still ends quietly (tests read its stderr); its hits are lost.
        if hits and hits_dir:
            path = os.path.join(hits_dir, f"{os.getpid()}.hits")
            with contextlib.suppress(OSError), open(path, "w", encoding="utf-8") as out:
                out.write("\n".join(sorted(hits)))

    # mutmut's own recorder reads pyproject.toml from the working directory,
    # which a child started in a temporary directory does not have.
    trampoline.record_trampoline_hit = record
    atexit.register(save)


class _MutatedModuleFinder(importlib.abc.MetaPathFinder):
    """Finds the one module under mutation in mutants/, leaving the rest alone."""

    def __init__(self, module: str, path: str) -> None:
        self.module = module
        self.path = path

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        if fullname != self.module:
            return None
        return importlib.util.spec_from_file_location(fullname, self.path)


def _start() -> None:
    phase = os.environ.get("MUTANT_UNDER_TEST", "")
    root = os.environ.get("MUTMUT_MUTANTS_ROOT")
    if not root:
        return
    if phase == "stats":
        sys.path.insert(0, root)
        # A Python without mutmut (not the project's venv) has no trampolines to record.
        with contextlib.suppress(ImportError):
            _record_hits(os.environ.get("MUTMUT_CHILD_HITS_DIR"))
        return
    module = phase.rpartition(".")[0]
    path = os.path.join(root, *module.split(".")) + ".py"
    if "__mutmut_" in phase and os.path.isfile(path):
        sys.meta_path.insert(0, _MutatedModuleFinder(module, path))


_start()
