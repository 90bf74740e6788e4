"""git found on PATH, run within its time bound, and the repository's top level."""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.git import git

import reconciler.git
from reconciler.git import GitNotFound, git_top, run

needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


@pytest.fixture(autouse=True)
def fresh_answers() -> Iterator[None]:
    # git_top remembers each directory's answer; every test asks git anew.
    git_top.cache_clear()
    yield
    git_top.cache_clear()


def on_path(monkeypatch: pytest.MonkeyPatch, folder: Path) -> None:
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ.get('PATH', '')}")


@needs_git
def test_the_top_of_a_subdirectory_is_the_repository_root(tmp_path: Path) -> None:
    git(tmp_path, "init", "-q")
    below = tmp_path / "invites" / "emea"
    below.mkdir(parents=True)
    top = git_top(str(below))
    assert top is not None and os.path.realpath(top) == os.path.realpath(tmp_path)


@needs_git
def test_outside_a_repository_there_is_no_top(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path.parent))
    assert git_top(str(tmp_path)) is None


def test_without_git_there_is_no_top_and_run_says_git_is_missing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # an empty folder: no git anywhere
    assert git_top(str(tmp_path)) is None
    with pytest.raises(GitNotFound):
        run(["--version"])


def test_a_hung_git_is_stopped_at_the_time_bound(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = tmp_path / "bin" / "git"
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\nexec sleep 30\n", encoding="utf-8")
    fake.chmod(0o755)
    on_path(monkeypatch, fake.parent)
    monkeypatch.setattr(reconciler.git, "TIMEOUT", 0.2)
    started = time.monotonic()
    assert git_top(str(tmp_path)) is None
    assert time.monotonic() - started < 5


@needs_git
def test_run_hands_git_its_input_and_returns_what_git_printed(tmp_path: Path) -> None:
    git(tmp_path, "init", "-q")
    done = run(["hash-object", "--stdin"], cwd=str(tmp_path), input=b"hello\n")
    # The id git gives the blob "hello\n" in every repository.
    assert (done.returncode, done.stdout) == (0, b"ce013625030ba8dba906f756967f9e9ca394464a\n")
