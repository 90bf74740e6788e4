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
from reconciler.git import GitNotFound, git_top, outside_repository, run

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


@needs_git
def test_a_commit_is_read_as_it_is_whatever_a_replace_ref_says(tmp_path: Path) -> None:
    # refs/replace/ can be pushed by anyone who may push a ref: it would show other files
    # at the commit --changed-since compares against.
    git(tmp_path, "init", "-q")
    (tmp_path / "f").write_text("reviewed\n")
    git(tmp_path, "add", "f")
    git(tmp_path, "commit", "-qm", "reviewed")
    reviewed = git(tmp_path, "rev-parse", "HEAD").strip()
    (tmp_path / "f").write_text("forged\n")
    git(tmp_path, "commit", "-qam", "forged")
    git(tmp_path, "replace", reviewed, "HEAD")
    assert git(tmp_path, "show", f"{reviewed}:f") == "forged"  # git's own default
    assert run(["show", f"{reviewed}:f"], cwd=str(tmp_path)).stdout == b"reviewed\n"


# -- outside_repository: the one rule for a path a repository's file names ---------------


@pytest.fixture
def checkout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A repository, run from its top, with a directory beside it and links to both."""
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))
    repo = tmp_path / "repo"
    (repo / "invites").mkdir(parents=True)
    git(repo, "init", "-q")
    (tmp_path / "outside").mkdir()
    (repo / "in").symlink_to(repo / "invites")
    (repo / "out").symlink_to(tmp_path / "outside")
    monkeypatch.chdir(repo)
    return repo


@needs_git
@pytest.mark.parametrize(
    ("path", "leads_to"),
    [
        pytest.param("invites", None, id="inside"),
        pytest.param("invites/a.yaml", None, id="file"),
        pytest.param("in", None, id="link-in"),
        pytest.param("in/a.yaml", None, id="through-link-in"),
        pytest.param("invites/../reconciler.yaml", None, id="dot-dot-in"),
        pytest.param("{repo}/x", None, id="absolute-in"),
        pytest.param("out", "outside", id="link-out"),
        pytest.param("out/a.yaml", "outside/a.yaml", id="through-link-out"),
        pytest.param("../outside", "outside", id="dot-dot"),
        pytest.param("invites/../../outside/a.yaml", "outside/a.yaml", id="dot-dot-deeper"),
        pytest.param("{tmp}/outside/a.yaml", "outside/a.yaml", id="absolute"),
    ],
)
def test_a_path_passes_while_it_stays_in_the_repository_and_else_says_where_it_leads(
    checkout: Path, path: str, leads_to: str | None
) -> None:
    # base: the directory of the file that names the path (reconciler.yaml's, here).
    written = path.format(repo=checkout, tmp=checkout.parent)
    said = outside_repository(written, base=".")
    if leads_to is None:
        assert said is None
    else:
        real = (checkout.parent / leads_to).resolve()
        assert said == f"leads to {real}, outside the repository ({checkout.resolve()})"


@needs_git
def test_a_path_named_without_a_base_is_judged_where_it_is_written(checkout: Path) -> None:
    # A directory given on the command line outside the repository is the user's: its
    # own place is the boundary (no repository there: the directory itself).
    assert outside_repository("../outside") is None
    assert outside_repository("out") is not None  # a link written here still leads out


@needs_git
def test_the_repository_is_the_one_written_not_the_one_a_link_leads_into(
    checkout: Path, tmp_path: Path
) -> None:
    # `invites` committed as a link into another repository: judged from where it is
    # written (this one), never from the top of the repository it leads into.
    other = tmp_path / "other"
    (other / "invites").mkdir(parents=True)
    git(other, "init", "-q")
    (checkout / "theirs").symlink_to(other / "invites")
    why = outside_repository("theirs")
    assert why is not None and f"outside the repository ({checkout.resolve()})" in why
    # Named from elsewhere, that other repository's own files are its own.
    assert outside_repository(str(other / "invites")) is None


@needs_git
def test_outside_git_a_directory_named_is_the_boundary_and_a_link_its_parent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))
    plain = tmp_path / "plain"
    (plain / "invites").mkdir(parents=True)
    (tmp_path / "elsewhere").mkdir()
    (plain / "linked").symlink_to(tmp_path / "elsewhere")
    (plain / "invites" / "up.yaml").symlink_to(plain / "x.yaml")
    monkeypatch.chdir(plain)

    assert outside_repository("invites") is None
    assert outside_repository("invites/up.yaml", base="invites") == (
        f"leads to {(plain / 'x.yaml').resolve()}, outside the directory "
        f"{(plain / 'invites').resolve()} (not in a git repository)"
    )
    assert outside_repository("linked") == (
        f"leads to {(tmp_path / 'elsewhere').resolve()}, outside the directory "
        f"{plain.resolve()} (not in a git repository)"
    )


@needs_git
@pytest.mark.parametrize("path", [".git/config", "invites/../.git/hooks/pre-commit", "git"])
def test_git_s_own_directory_is_no_part_of_the_repository(checkout: Path, path: str) -> None:
    # Its config holds a CI token, its hooks are run by git: a pull request's link or
    # `audit_log` into it never reads or appends there.
    (checkout / "git").symlink_to(checkout / ".git")
    why = outside_repository(path, base=".")
    assert why is not None and why.endswith("into git's own directory, which no commit holds")
    assert why.startswith(f"leads to {checkout.resolve() / '.git'}")


@needs_git
@pytest.mark.parametrize("name", [".GIT", ".Git", ".git.", ".git ", ".git. ."])
def test_git_s_directory_in_another_spelling_is_git_s_too(checkout: Path, name: str) -> None:
    # On macOS and Windows `.GIT/config` (on Windows `.git./config`) opens `.git/config`,
    # where realpath keeps the name as written: refused as git refuses it in a commit.
    (checkout / name).mkdir()
    why = outside_repository(f"invites/../{name}/config", base=".")
    assert why is not None and why.endswith("into git's own directory, which no commit holds")
    assert outside_repository(".github/workflows/x.yml", base=".") is None
    assert outside_repository(".gitignore", base=".") is None


def test_a_git_directory_is_refused_where_git_cannot_be_asked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A checkout made where git is missing from the job's image, or one git calls of
    # dubious ownership: no top level is known, and `.git/` is still git's.
    plain = tmp_path / "plain"
    (plain / ".git" / "hooks").mkdir(parents=True)
    monkeypatch.chdir(plain)
    monkeypatch.setenv("PATH", str(tmp_path / "no-git-here"))
    why = outside_repository(".git/hooks/post-checkout", base=".")
    assert why is not None and why.endswith("into git's own directory, which no commit holds")
