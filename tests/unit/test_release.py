"""Releases you can pin: one version, a changelog in Keep a Changelog's form, the licence
pyproject.toml declares."""

from __future__ import annotations

import re
import tomllib
from importlib.metadata import version
from pathlib import Path

from support.cli import run_cli

import reconciler

REPO = Path(__file__).resolve().parents[2]


def test_the_version_is_written_once_and_reconcile_says_it() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert "version" not in project and "version" in project["dynamic"]
    hatch = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["hatch"]
    assert hatch["version"]["path"] == "reconciler/__init__.py"
    assert re.fullmatch(r"\d+\.\d+\.\d+", reconciler.__version__)
    assert version("invite-reconciler") == reconciler.__version__  # as installed
    result = run_cli("--version")
    assert result.returncode == 0
    assert result.stdout.strip() == f"reconcile, version {reconciler.__version__}"


def test_the_changelog_keeps_a_changelog() -> None:
    text = (REPO / "CHANGELOG.md").read_text(encoding="utf-8")
    headings = re.findall(r"^## (.+)$", text, re.MULTILINE)
    assert headings[0] == "[Unreleased]"
    released = []
    for heading in headings[1:]:
        found = re.fullmatch(r"\[(\d+\.\d+\.\d+)\] - (\d{4}-\d{2}-\d{2})", heading)
        assert found, f"not a release heading: {heading!r}"
        released.append(tuple(map(int, found[1].split("."))))
    assert released == sorted(released, reverse=True)
    numbers = re.fullmatch(r"(\d+)\.(\d+)\.(\d+)", reconciler.__version__)
    assert numbers
    current = tuple(int(n) for n in numbers.groups())
    # The package's version is a release written here, or the next one to be.
    assert not released or current >= released[0]
    kinds = set(re.findall(r"^### (\w+)$", text, re.MULTILINE))
    assert kinds <= {"Added", "Changed", "Deprecated", "Removed", "Fixed", "Security"}
    for name in ["Unreleased", *(".".join(map(str, r)) for r in released)]:
        assert re.search(rf"^\[{re.escape(name)}\]: https://", text, re.MULTILINE), name


def test_the_licence_file_is_the_one_pyproject_declares() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert project["license"] == "MIT"
    assert (REPO / "LICENSE").read_text(encoding="utf-8").startswith("MIT License\n")
