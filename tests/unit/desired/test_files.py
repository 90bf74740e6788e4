"""Which files a run reads (reconciler.desired.files): a directory walked without the
settings' file, what is hidden and what git ignores; a file named is always read."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from support.git import git

from reconciler.desired.files import find_files


def test_a_directory_is_read_without_the_settings_file_and_what_is_hidden(
    tmp_path: Path,
) -> None:
    # `validate .` at a repository's top: the CI's workflows are YAML too, and so is
    # reconciler.yaml; neither holds invites. A file named on the command line is read.
    invite = "invites:\n  - id: inv_abc12345\n    name: Acme\n"
    for name, text in {
        "reconciler.yaml": "checks: {duplicate-name: off}\n",
        ".github/workflows/ci.yml": "on: push\njobs: {}\n",
        ".gitlab-ci.yml": "stages: [plan]\n",
        "invites/.draft.yaml": invite,
        "invites/emea/acme.yaml": invite.replace("abc12345", "def67890"),
        "invites/reconciler.yaml": "paths: [.]\n",
        "invites/apac.yml": invite,
        "invites/LATAM.YAML": invite.replace("abc12345", "lat12345"),
        "invites/notes.txt": "not yaml\n",
    }.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text, encoding="utf-8")

    files, problems = find_files([str(tmp_path)])
    named, _ = find_files([str(tmp_path / ".gitlab-ci.yml")])

    assert problems == []
    assert [f.relative_to(tmp_path).as_posix() for f in files] == [
        "invites/LATAM.YAML",
        "invites/apac.yml",
        "invites/emea/acme.yaml",
    ]
    assert named == [tmp_path / ".gitlab-ci.yml"]


def test_a_directory_is_read_without_what_its_repository_ignores(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A virtualenv or node_modules/ inside the checkout holds YAML of its own; what git
    # ignores is not the repository's invites. A tracked file is read, ignored or not;
    # and git is asked from the directory read, wherever the command runs.
    git(tmp_path, "init", "--quiet")
    invite = "invites:\n  - id: inv_abc12345\n"
    for name in [
        ".gitignore", "invites/a.yaml", "venv/lib/site/data.yaml",
        "node_modules/pkg/invites.yml", "node_modules/kept/forced.yaml",
    ]:  # fmt: skip
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(invite, encoding="utf-8")
    (tmp_path / ".gitignore").write_text("venv/\nnode_modules/\n", encoding="utf-8")
    git(tmp_path, "add", "-f", "node_modules/kept/forced.yaml")
    monkeypatch.chdir(tmp_path.parent)

    files, problems = find_files([str(tmp_path)])

    assert problems == []
    assert [f.relative_to(tmp_path).as_posix() for f in files] == [
        "invites/a.yaml",
        "node_modules/kept/forced.yaml",
    ]
    # Named itself, an ignored directory is read whole (an installed package's examples).
    named, _ = find_files([str(tmp_path / "venv")])
    assert [f.relative_to(tmp_path).as_posix() for f in named] == ["venv/lib/site/data.yaml"]


def test_a_directory_named_is_judged_where_it_is_written_not_where_it_leads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Issue 51 row 3: `invites` committed as a link to a directory of another repository
    # was read with that repository's top as the boundary; a link inside is still read.
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))
    invite = "invites:\n  - id: inv_abc12345\n"
    repo, other = tmp_path / "repo", tmp_path / "other"
    for top in (repo, other):
        (top / "shared").mkdir(parents=True)
        (top / "shared" / "a.yaml").write_text(invite, encoding="utf-8")
        git(top, "init", "-q")
    (repo / "invites").symlink_to(other / "shared")
    (repo / "team").symlink_to(repo / "shared")
    monkeypatch.chdir(repo)

    files, problems = find_files(["invites", "team"])

    assert files == [Path("team/a.yaml")]
    assert [(p.path, p.message) for p in problems] == [
        (
            "invites",
            f"not read: it leads to {(other / 'shared').resolve()}, outside the repository "
            f"({repo.resolve()}); invite files never follow a link out of it (copy the file "
            "in instead)",
        )
    ]


def test_a_fifo_or_a_dangling_link_named_like_an_invite_file_is_refused_not_passed_over(
    tmp_path: Path,
) -> None:
    (tmp_path / "acme.yaml").write_text("invites: []\n", encoding="utf-8")
    os.mkfifo(tmp_path / "pipe.yaml")  # opened, a read would block for ever
    (tmp_path / "gone.yml").symlink_to(tmp_path / "nowhere.yml")
    (tmp_path / "dir.yaml").mkdir()  # a directory is walked into, not refused

    files, problems = find_files([str(tmp_path)])

    assert files == [tmp_path / "acme.yaml"]
    assert [(Path(p.path).name, p.message) for p in problems] == [
        ("gone.yml", "cannot read: No such file or directory"),
        ("pipe.yaml", "not read: it is a FIFO (named pipe), not a regular file"),
    ]
