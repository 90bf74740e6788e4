"""CI findings name files from the repository root, wherever the CLI ran."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from support.cli import run_cli
from support.git import git
from support.helpers import clean_env

BAD = "invites:\n  - id: inv_ünï\n    email: 42\n"


def bad_file(root: Path) -> Path:
    folder = root / "invites"
    folder.mkdir()
    (folder / "bad.yaml").write_text(BAD, encoding="utf-8")
    return folder


def error_annotations(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("::error ")]


@pytest.mark.parametrize(
    ("workspace", "cwd", "given"),
    [
        (".", "invites", "."),  # the file from GITHUB_WORKSPACE, wherever the CLI ran
        (None, "invites", "."),  # no CI variable: from git's top level
        ("workspace", ".", "invites"),  # a file outside the workspace keeps its path
    ],
    ids=["workspace", "git-top-level", "outside-the-workspace"],
)
def test_github_annotations_name_the_file_from_the_root(
    tmp_path: Path, workspace: str | None, cwd: str, given: str
) -> None:
    if workspace is None and shutil.which("git") is None:
        pytest.skip("git is not installed")
    bad_file(tmp_path)
    env = clean_env(GITHUB_ACTIONS="true")
    env.pop("GITHUB_WORKSPACE", None)
    env.pop("CI_PROJECT_DIR", None)
    if workspace is None:
        git(tmp_path, "init", "-q")
    else:
        (tmp_path / workspace).mkdir(exist_ok=True)
        env["GITHUB_WORKSPACE"] = str(tmp_path / workspace)
    result = run_cli("validate", given, cwd=tmp_path / cwd, env=env)
    assert result.returncode == 1
    found = error_annotations(result.stderr)
    assert found and all(a.startswith("::error file=invites/bad.yaml,line=") for a in found)


def test_code_quality_paths_are_from_the_project_dir(tmp_path: Path) -> None:
    folder = bad_file(tmp_path)
    env = clean_env(CI_PROJECT_DIR=str(tmp_path))
    result = run_cli("validate", ".", "--codequality", "../cq.json", cwd=folder, env=env)
    assert result.returncode == 1
    entries = json.loads((tmp_path / "cq.json").read_text(encoding="utf-8"))
    assert entries and {e["location"]["path"] for e in entries} == {"invites/bad.yaml"}
