"""The kyb.invites collection as AWX and execution environments install it (issue 54): its
version is the library's, an execution environment gets the library at that very release,
its licence is the project's, and `ansible-test units --venv` gets the library's
dependencies. Built, installed and linted for real: e2e/test_ansible_collection.py."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import yaml

import reconciler

REPO = Path(__file__).resolve().parents[2]
COLLECTION = REPO / "ansible_collections" / "kyb" / "invites"
# The fill-in of a copy of the repository, as in the README's pinned install.
REPOSITORY = "https://github.com/OWNER/invite-reconciler"


def _galaxy() -> dict[str, object]:
    loaded = yaml.safe_load((COLLECTION / "galaxy.yml").read_text(encoding="utf-8"))
    assert isinstance(loaded, dict)
    return loaded


def _requirement_lines(path: Path) -> list[str]:
    lines = (line.split("#", 1)[0].strip() for line in path.read_text().splitlines())
    return [line for line in lines if line]


def test_the_collection_is_released_with_the_library_at_one_version() -> None:
    assert _galaxy()["version"] == reconciler.__version__


def test_an_execution_environment_installs_the_library_at_the_collections_release() -> None:
    meta = yaml.safe_load((COLLECTION / "meta" / "execution-environment.yml").read_text())
    python = COLLECTION / meta["dependencies"]["python"]  # relative to the collection
    assert meta["version"] == 1 and python.is_file()
    pinned = f"invite-reconciler @ git+{REPOSITORY}@v{reconciler.__version__}"
    assert _requirement_lines(python) == [pinned]
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert f'pip install "invite-reconciler @ git+{REPOSITORY}@COMMIT"' in readme  # the same


def test_galaxy_links_the_repository_and_says_what_to_fill_in_at_a_release() -> None:
    galaxy = _galaxy()
    assert galaxy["repository"] == REPOSITORY
    assert galaxy["documentation"] == f"{REPOSITORY}/blob/main/docs/ansible.md"
    assert galaxy["issues"] == f"{REPOSITORY}/issues"
    assert (REPO / "docs" / "ansible.md").is_file()
    releasing = (REPO / "CONTRIBUTING.md").read_text(encoding="utf-8").split("## Releasing")[1]
    assert "galaxy.yml" in releasing and "OWNER" in releasing


def test_galaxy_tags_include_a_category_ansible_lint_asks_for() -> None:
    # ansible-lint's galaxy[tags]: one of these, or Galaxy files the collection nowhere.
    categories = {"application", "cloud", "database", "infrastructure", "linux", "tools"}
    tags = _galaxy()["tags"]
    assert isinstance(tags, list) and categories & set(tags)
    assert all(re.fullmatch(r"[a-z][a-z0-9_]{0,63}", tag) for tag in tags)


def test_the_collections_licence_is_the_projects() -> None:
    assert (COLLECTION / "LICENSE").read_bytes() == (REPO / "LICENSE").read_bytes()
    assert _galaxy()["license"] == ["MIT"]


def test_the_unit_tests_venv_gets_every_dependency_of_the_library() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    listed = _requirement_lines(COLLECTION / "tests" / "unit" / "requirements.txt")
    assert listed == project["dependencies"]


def test_the_changelog_is_antsibull_changelogs_and_the_next_release_has_fragments() -> None:
    changelogs = COLLECTION / "changelogs"
    config = yaml.safe_load((changelogs / "config.yaml").read_text(encoding="utf-8"))
    changes = yaml.safe_load((changelogs / config["changes_file"]).read_text(encoding="utf-8"))
    assert set(changes) == {"ancestor", "releases"}
    released = set(changes["releases"])
    fragments = sorted((changelogs / config["notesdir"]).glob("*.yml"))
    # Either the version in galaxy.yml is released, or fragments say what it brings.
    assert str(_galaxy()["version"]) in released or fragments
    sections = {name for name, _title in config["sections"]}
    sections |= {config["prelude_section_name"], config["trivial_section_name"]}
    for fragment in fragments:
        assert set(yaml.safe_load(fragment.read_text(encoding="utf-8"))) <= sections, fragment
