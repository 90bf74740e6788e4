"""The kyb.invites collection as a release ships it (issue 54): `ansible-galaxy collection
build`'s tarball, installed as AWX installs it, read by ansible-builder as an execution
environment's build reads it; a release made from the changelog's fragments; and
ansible-lint on the collection's examples (the modules' EXAMPLES, the plays in the docs).

The tools are the `ansible` extra's (pinned). Without them these tests skip, except under
CI=true, where they fail: .ci/run installs them.
"""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import textwrap
from pathlib import Path

import pytest
import yaml
from support.helpers import REPO

import reconciler

pytestmark = [pytest.mark.e2e, pytest.mark.real]

BIN = Path(sys.executable).parent
COLLECTION = REPO / "ansible_collections" / "kyb" / "invites"
# Where the collection's examples are, besides the modules' EXAMPLES.
DOCS_WITH_PLAYS = [REPO / "docs" / "ansible.md", COLLECTION / "README.md"]


def tool(name: str) -> Path:
    path = BIN / name
    if path.exists():
        return path
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"{name} is not installed, and CI=true: .ci/run installs it")
    pytest.skip(f'{name} is not installed (pip install ".[ansible]"); CI runs these')


def run(command: list[str | Path], cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [str(part) for part in command],
        cwd=cwd,
        # The venv's bin first: antsibull-changelog runs ansible-doc by name.
        env={
            **os.environ,
            "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
            "ANSIBLE_NOCOLOR": "1",
            "NO_COLOR": "1",
            **env,
        },
        capture_output=True,
        text=True,
        timeout=300,
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, f"{command[0]} exited {done.returncode}:\n{output}"
    return done


def copy_collection(destination: Path) -> Path:
    """The collection's committed and new files (not tests/output) under
    destination/ansible_collections/kyb/invites."""
    target = destination / "ansible_collections" / "kyb" / "invites"
    shutil.copytree(
        COLLECTION, target, ignore=shutil.ignore_patterns("output", "__pycache__", "*.pyc")
    )
    return target


@pytest.fixture(scope="module")
def tarball(tmp_path_factory: pytest.TempPathFactory) -> Path:
    built = tmp_path_factory.mktemp("built")
    source = copy_collection(tmp_path_factory.mktemp("source"))
    run([tool("ansible-galaxy"), "collection", "build", "--output-path", built, source], built)
    (path,) = built.glob("kyb-invites-*.tar.gz")
    return path


def test_the_tarball_carries_the_licence_the_changelog_and_the_ee_requirements(
    tarball: Path,
) -> None:
    assert tarball.name == f"kyb-invites-{reconciler.__version__}.tar.gz"
    with tarfile.open(tarball) as archive:
        names = set(archive.getnames())
        manifest = json.load(archive.extractfile("MANIFEST.json"))  # type: ignore[arg-type]
        licence = archive.extractfile("LICENSE").read()  # type: ignore[union-attr]
    for name in [
        "LICENSE",
        "README.md",
        "changelogs/changelog.yaml",
        "changelogs/config.yaml",
        "meta/runtime.yml",
        "meta/execution-environment.yml",
        "meta/ee-requirements.txt",
        "plugins/modules/invites.py",
        "plugins/modules/invite_info.py",
    ]:
        assert name in names, name
    assert licence == (REPO / "LICENSE").read_bytes()
    assert not any(name.startswith("tests/output") for name in names)
    info = manifest["collection_info"]
    assert (info["namespace"], info["name"]) == ("kyb", "invites")
    assert info["version"] == reconciler.__version__
    assert info["license"] == ["MIT"] and "tools" in info["tags"]


def test_an_execution_environment_build_finds_the_library_pinned_at_the_release(
    tarball: Path, tmp_path: Path
) -> None:
    installed = tmp_path / "collections"
    galaxy = tool("ansible-galaxy")
    # --force: an editable install of the library puts the checkout, and so its
    # ansible_collections/, on sys.path, where ansible-galaxy finds kyb.invites installed.
    install: list[str | Path] = [galaxy, "collection", "install", "--offline", "--force"]
    run([*install, "-p", installed, tarball], tmp_path)
    assert (installed / "ansible_collections" / "kyb" / "invites" / "MANIFEST.json").is_file()
    found = run([tool("ansible-builder"), "introspect", installed], tmp_path)
    data = yaml.safe_load(found.stdout)
    pinned = f"git+https://github.com/OWNER/invite-reconciler@v{reconciler.__version__}"
    assert len(data["python"]) == 1, data
    assert data["python"][0].startswith(f"invite-reconciler @ {pinned}")
    assert data["python"][0].endswith("# from collection kyb.invites")


def test_a_release_from_the_fragments_writes_the_changelog_and_still_lints(
    tmp_path: Path,
) -> None:
    """The release step (CONTRIBUTING.md, "Releasing"): antsibull-changelog turns the
    fragments into the version's entry; the result passes the collection's ansible-lint."""
    copy = copy_collection(tmp_path)
    fragments = sorted((copy / "changelogs" / "fragments").glob("*.yml"))
    assert fragments, "no fragment: the next release would have no changelog entry"
    changelog = tool("antsibull-changelog")
    run([changelog, "lint"], copy)
    run([changelog, "release", "--date", "2026-12-10"], copy)
    changes = yaml.safe_load((copy / "changelogs" / "changelog.yaml").read_text())
    release = changes["releases"][reconciler.__version__]
    assert release["release_date"] == "2026-12-10"
    assert release["changes"]["release_summary"]
    assert {module["name"] for module in release["modules"]} == {"invites", "invite_info"}
    assert list((copy / "changelogs" / "fragments").glob("*.yml")) == []  # moved in
    rst = (copy / "CHANGELOG.rst").read_text(encoding="utf-8")
    assert f"v{reconciler.__version__}" in rst and "kyb.invites.invites" in rst
    run([changelog, "lint-changelog-yaml", copy / "changelogs" / "changelog.yaml"], copy)
    run([tool("ansible-lint"), "--nocolor"], copy, ANSIBLE_COLLECTIONS_PATH=str(tmp_path))


def _module_examples() -> dict[str, str]:
    examples = {}
    for module in sorted((COLLECTION / "plugins" / "modules").glob("*.py")):
        for node in ast.parse(module.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.Assign) and [getattr(t, "id", "") for t in node.targets] == [
                "EXAMPLES"
            ]:
                assert isinstance(node.value, ast.Constant)
                examples[module.stem] = str(node.value.value)
    return examples


def _plays_in(markdown: Path) -> list[str]:
    """The YAML blocks of a Markdown file that are plays (a list of mappings with hosts)."""
    text = markdown.read_text(encoding="utf-8")
    blocks = re.findall(r"^```ya?ml\n(.*?)^```", text, re.MULTILINE | re.DOTALL)
    plays = []
    for block in blocks:
        loaded = yaml.safe_load(block)
        if isinstance(loaded, list) and all(isinstance(p, dict) and "hosts" in p for p in loaded):
            plays.append(block)
    return plays


def test_the_examples_pass_ansible_lint(tmp_path: Path) -> None:
    """Each module's EXAMPLES, as the tasks of a play, and each play in the docs, under the
    collection's own ansible-lint settings (its production profile)."""
    examples = _module_examples()
    assert set(examples) == {"invites", "invite_info"}
    for name, tasks in examples.items():
        play = f"---\n- name: Examples of kyb.invites.{name}\n  hosts: localhost\n"
        play += "  gather_facts: false\n  tasks:\n" + textwrap.indent(tasks.strip("\n"), "    ")
        (tmp_path / f"{name}_examples.yml").write_text(play + "\n", encoding="utf-8")
    count = 0
    for markdown in DOCS_WITH_PLAYS:
        for number, block in enumerate(_plays_in(markdown), 1):
            (tmp_path / f"{markdown.stem}_{number}.yml").write_text("---\n" + block)
            count += 1
    assert count >= 1, "the docs show no play"
    shutil.copy(COLLECTION / ".ansible-lint", tmp_path / ".ansible-lint")
    run([tool("ansible-lint"), "--nocolor", "."], tmp_path, ANSIBLE_COLLECTIONS_PATH=str(REPO))
