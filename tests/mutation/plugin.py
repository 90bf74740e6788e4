"""pytest plugin loaded only by mutation runs (see [tool.mutmut] in pyproject.toml).

mutmut runs the tests in-process against its copy of the code under mutants/.
Tests that start a real `reconcile` process would otherwise import the original
code from the editable install and could never kill a mutant, nor be chosen to
try one. So child processes start with subprocess_hook/ on PYTHONPATH: its
sitecustomize makes them import the mutated code (the active mutant travels in
MUTANT_UNDER_TEST, which they inherit), and while mutmut maps tests to functions,
the functions a child process reached are added to the test that started it.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

HOOK_DIR = Path(__file__).resolve().parent / "subprocess_hook"
HITS_VARIABLE = "MUTMUT_CHILD_HITS_DIR"
# Set by .ci/mutation: the end-to-end test files a mutant of the modules under
# test may run ("all" for every one). Unit tests always run.
E2E_VARIABLE = "MUTATION_E2E_TESTS"
# mutmut's phases that must see every test: mapping tests to functions, listing them.
WHOLE_SUITE_PHASES = ("stats", "list_all_tests", "mutant_generation")


def _mutants_root() -> Path:
    import reconciler

    return Path(reconciler.__file__).resolve().parent.parent


def pytest_configure(config: pytest.Config) -> None:
    if "MUTANT_UNDER_TEST" not in os.environ:
        return
    root = _mutants_root()
    if root.name != "mutants":
        raise pytest.UsageError(f"mutation run imports reconciler from {root}, not mutants/")
    inherited = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join([str(HOOK_DIR), *([inherited] if inherited else [])])
    os.environ["MUTMUT_MUTANTS_ROOT"] = str(root)
    _clear_caches()  # this process may be a fork of one that filled them
    # mutmut runs several pytest sessions in one process (collection, then the
    # mapping), and each session's end removes the directory: make a new one.
    if not os.path.isdir(os.environ.get(HITS_VARIABLE, "")):
        os.environ[HITS_VARIABLE] = tempfile.mkdtemp(prefix="mutation-hits-")
    _quiet_hypothesis()


def _clear_caches() -> None:
    """Forget what reconciler's functools caches and memo dicts hold.

    A value cached before the mutant was chosen (in mutmut's parent process, or
    by an earlier test while tests are mapped to functions) was made by the
    original code: the schema's checks compiled by ``schema_fast``, say. Their
    mutants would never run, and only the first test to compile would be mapped.
    """
    for name, module in list(sys.modules.items()):
        if name.partition(".")[0] != "reconciler" or module is None:
            continue
        for value in list(vars(module).values()):
            clear = getattr(value, "cache_clear", None)
            if callable(clear):
                clear()
        for memo in _MEMOS.get(name, ()):
            getattr(module, memo).clear()


# Module-level dicts that values fill as they are made, by module. The parent process
# met every test's contacts while mapping, so a mutant that stops filling one (every
# contact's names then None, unless the parent had already kept them) went unseen.
_MEMOS = {"reconciler.model.invite": ("_SHARED_NAMES",)}


def pytest_runtest_setup(item: pytest.Item) -> None:
    if os.environ.get("MUTANT_UNDER_TEST") == "stats":
        _clear_caches()  # every test that compiles the schema is mapped to the compiler


# Marks whose stored test ids this session has already reset (see below).
_IDS_RESET: set[int] = set()


def pytest_sessionstart(session: pytest.Session) -> None:
    _IDS_RESET.clear()


@pytest.hookimpl(tryfirst=True)
def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    # pytest keeps the ids it made for a parametrize mark with `ids=` on the mark, and
    # a later session in the same process (mutmut's clean run, after its mapping) takes
    # them as given and escapes them again: `a\nb` becomes `a\\nb`, no test has that id,
    # and pytest exits 4 ("not found"; pytest-dev/pytest#11149). Made afresh once a session.
    for mark in metafunc.definition.iter_markers("parametrize"):
        source = mark._param_ids_from
        if source is not None and id(source) not in _IDS_RESET:
            _IDS_RESET.add(id(source))
            object.__setattr__(source, "_param_ids_generated", None)


def _quiet_hypothesis() -> None:
    # The same examples on every run, and no deadline: the trampolines make every
    # call slower, and a DeadlineExceeded would count as a killed mutant.
    from hypothesis import settings

    settings.register_profile("mutation", deadline=None, derandomize=True, database=None)
    settings.load_profile("mutation")


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    phase = os.environ.get("MUTANT_UNDER_TEST")
    if phase is None or phase in WHOLE_SUITE_PHASES:
        return
    allowed = _allowed_e2e_files(phase)
    if allowed is not None:
        dropped = [i for i in items if _is_e2e(i) and i.nodeid.split("::")[0] not in allowed]
        if dropped:
            config.hook.pytest_deselected(items=dropped)
            kept = set(items) - set(dropped)
            items[:] = [i for i in items if i in kept]
    # Fastest first: most mutants die on the first failing test (-x), and the
    # in-process tests are a hundred times cheaper than a real `reconcile`.
    from mutmut.state import state

    durations = state().duration_by_test
    items.sort(key=lambda item: (_is_e2e(item), durations.get(item.nodeid, 0.0)))


def _allowed_e2e_files(phase: str) -> set[str] | None:
    """The e2e files this mutant may run; None for all of them.

    MUTATION_E2E_TESTS is JSON: module name -> list of files, or "all".
    """
    selection = json.loads(os.environ.get(E2E_VARIABLE) or '"all"')
    if selection == "all":
        return None
    module = phase.rpartition(".")[0]
    if module in selection:
        return set(selection[module])
    # The clean run and the forced failure before the mutants: every module's files.
    return {name for names in selection.values() for name in names}


def _is_e2e(item: pytest.Item) -> bool:
    return item.nodeid.startswith("tests/e2e/")


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_teardown(item: pytest.Item) -> Iterator[None]:
    # Runs before mutmut's own teardown hook, which files the recorded hits
    # under this test.
    _collect_child_hits()
    yield


def _collect_child_hits() -> None:
    hits_dir = os.environ.get(HITS_VARIABLE)
    if os.environ.get("MUTANT_UNDER_TEST") != "stats" or not hits_dir:
        return
    from mutmut.state import state

    for path in Path(hits_dir).glob("*.hits"):
        state()._stats.update(path.read_text("utf-8").split())
        path.unlink()


def pytest_unconfigure(config: pytest.Config) -> None:
    hits_dir = os.environ.get(HITS_VARIABLE)
    if hits_dir and "MUTANT_UNDER_TEST" in os.environ:
        shutil.rmtree(hits_dir, ignore_errors=True)
