"""tests/README.md tells the truth about where each module's tests are: a module has a
mirrored unit test file, or a line under "Modules tested elsewhere" naming test files
that exist; never both, never neither."""

from __future__ import annotations

import re
from pathlib import Path

import reconciler

PACKAGE = Path(reconciler.__file__).parent
TESTS = Path(__file__).resolve().parents[1]
README = TESTS / "README.md"
ROW = re.compile(r"^\| `(?P<module>[\w/]+\.py)` \| (?P<tests>.+) \|$")


def _modules() -> set[str]:
    return {
        path.relative_to(PACKAGE).as_posix()
        for path in PACKAGE.rglob("*.py")
        if path.name != "__init__.py" and "ansible_collections" not in path.parts
    }


def _mirrored(module: str) -> Path:
    path = Path(module)
    return TESTS / "unit" / path.parent / f"test_{path.name}"


def _elsewhere() -> dict[str, list[str]]:
    text = README.read_text(encoding="utf-8")
    section = text.split("## Modules tested elsewhere", 1)[1]
    rows = {}
    for line in section.splitlines():
        if match := ROW.match(line):
            rows[match["module"]] = re.findall(r"`((?:unit|e2e)/[\w/]+\.py)`", match["tests"])
    return rows


def test_every_module_has_a_mirrored_file_or_a_line_saying_where_it_is_tested() -> None:
    elsewhere = _elsewhere()
    unmirrored = {module for module in _modules() if not _mirrored(module).is_file()}
    assert sorted(unmirrored - elsewhere.keys()) == [], "add a test file or a README line"
    assert sorted(elsewhere.keys() - unmirrored) == [], "mirrored now: drop the README line"


def test_each_line_names_test_files_that_exist() -> None:
    for module, files in _elsewhere().items():
        assert files, module
        missing = [name for name in files if not (TESTS / name).is_file()]
        assert missing == [], module
