"""git, found and run in one place: always by its path on PATH, output captured, time bounded.

Three stages ask git something: `--changed-since` reads files as they were at a commit,
CI paths and the invite loader ask for the repository's top level (and the loader which
files the repository ignores), the audit log asks whether its file is committed. Each
decides what a failure means to it (an error the user reads, or quietly no answer);
here git is only found, run and stopped in time. And here is the one rule for a path a
repository's file names (``outside_repository``): where it leads must be inside the top.
A top-level module, so that desired/ need not reach into output/ for the top level.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path, PurePath
from typing import NamedTuple

from reconciler.errors import ReconcilerError
from reconciler.safetext import escape, redact_and_escape

# A quick question (the top level, whether a file is tracked) gets this long; a
# caller reading a whole tree's history gives its own bound.
TIMEOUT = 5.0


class GitNotFound(FileNotFoundError):
    """git is not installed or not on PATH: a missing program, as running it would say."""


def run(
    args: list[str],
    *,
    cwd: str | None = None,
    input: bytes | None = None,
    stdin: int | None = None,
    timeout: float | None = None,
) -> subprocess.CompletedProcess[bytes]:
    """git ``args`` run to the end or killed after ``timeout`` seconds (default TIMEOUT).

    ``input`` and ``stdin`` are subprocess.run's. Raises GitNotFound, OSError when git
    cannot start, subprocess.TimeoutExpired; a refusal is only a non-zero return code.
    """
    git = shutil.which("git")
    if git is None:
        raise GitNotFound("git is not installed or not on PATH")
    return subprocess.run(
        [git, *args],
        cwd=cwd,
        input=input,
        stdin=stdin,
        capture_output=True,
        timeout=TIMEOUT if timeout is None else timeout,
        check=False,
        env={**os.environ, **_ENV},
    )


# A commit is read as it is: a refs/replace/ ref (pushed by anyone who may push a ref)
# would show other files at a commit --changed-since compares against. And git never
# waits for a password nobody will type: a job would hang to its time bound.
_ENV = {"GIT_NO_REPLACE_OBJECTS": "1", "GIT_TERMINAL_PROMPT": "0"}


def try_run(
    args: list[str],
    *,
    cwd: str | None = None,
    stdin: int | None = None,
    input: bytes | None = None,
) -> subprocess.CompletedProcess[bytes] | None:
    """git ``args`` as ``run`` runs them; None when git is missing, cannot start or overruns.

    For questions that have an answer without git: the caller goes on as if git said no.
    """
    try:
        return run(args, cwd=cwd, stdin=stdin, input=input)
    except (OSError, subprocess.TimeoutExpired):
        return None


class GitFailed(ReconcilerError):
    """git ran and refused; ``said`` is its last line, redacted and escaped."""

    def __init__(self, message: str, said: str) -> None:
        super().__init__(message)
        self.said = said


def call(
    args: list[str],
    what: str,
    *,
    timeout: float,
    ok: tuple[int, ...] | None = (0,),
    cwd: str | None = None,
    input: bytes | None = None,
) -> subprocess.CompletedProcess[bytes]:
    """git ``args`` for ``what`` (the stage that needs it, first in every message): git
    missing, not starting or overrunning is a ReconcilerError, a return code outside ``ok``
    (None: any) a GitFailed."""
    try:
        done = run(args, cwd=cwd, input=input, timeout=timeout)
    except GitNotFound:
        raise ReconcilerError(f"{what} needs git, which is not installed or not on PATH") from None
    except subprocess.TimeoutExpired:
        raise ReconcilerError(f"{what}: git {args[0]} took over {timeout:.0f} s") from None
    except OSError as exc:
        shown = escape(exc.strerror or str(exc))
        raise ReconcilerError(f"{what}: git could not start: {shown}") from None
    if ok is not None and done.returncode not in ok:
        said = last_line(done)
        raise GitFailed(f"{what}: git {args[0]} failed: {said}", said)
    return done


USERINFO = re.compile(r"(?<=://)[^/@\s]*@")  # the `user:token@` of a URL git quotes


def last_line(done: subprocess.CompletedProcess[bytes]) -> str:
    """git's last line on stderr, fit to show: redacted, escaped, no `user:token@`."""
    lines = done.stderr[-2000:].decode("utf-8", "replace").strip().splitlines()
    return redact_and_escape(USERINFO.sub("", lines[-1])) if lines else f"exit {done.returncode}"


def up_to_top(cwd: str | None = None) -> list[Path]:
    """``cwd`` (default: the working directory) and each directory above it, up to the git
    repository's top level, nearest first: where a project's file is looked for, as
    pre-commit and editorconfig look. Outside git, ``cwd`` alone."""
    here = Path(cwd or os.getcwd())
    top = git_top(str(here))
    if top is None:
        return [here]
    real_top = os.path.realpath(top)
    found = [here]
    for parent in here.parents:
        if os.path.realpath(found[-1]) == real_top:
            break
        found.append(parent)
    return found if os.path.realpath(found[-1]) == real_top else [here]


@lru_cache(maxsize=8)
def git_top(cwd: str) -> str | None:
    """The git top level of ``cwd``, asked once per directory; None outside git."""
    done = try_run(["rev-parse", "--show-toplevel"], cwd=cwd)
    if done is None:
        return None
    top = done.stdout.decode("utf-8", "replace").strip()
    return top if done.returncode == 0 and top else None


def repository_top(path: str) -> str | None:
    """The top level of the git repository ``path`` is written in; None outside git.

    Found from the path as written, never from where a link in it leads (a link
    committed in one repository may point into another): the working directory's
    repository when ``path`` lies in it as written, else that of ``_anchor(path)``.
    """
    here = os.path.abspath(path)
    top = git_top(os.getcwd())
    if top is not None and (_within(here, top) or _within(here, os.path.realpath(top))):
        return top
    return git_top(_anchor(here))


def outside_repository(path: str, *, base: str | None = None) -> str | None:
    """Why ``path`` may be neither read nor written, or None: the one rule for every path
    a repository's file names. Its real path (symbolic links followed) must lie inside
    ``boundary(base)``, ``base`` being where it is named from (the directory of the file
    naming it, a directory walked), by default the path itself. The reason reads after
    the path as written: "leads to REAL, outside the repository (TOP)"."""
    return boundary(base or path).outside(path)


class Boundary(NamedTuple):
    """The real path that the paths named from one place must stay in."""

    real: str
    in_git: bool

    def outside(self, path: str) -> str | None:
        """Why ``path`` is refused (``outside_repository``), or None."""
        real = os.path.realpath(path)
        if _within(real, self.real):
            if _into_git(os.path.relpath(real, self.real)):
                # Not the repository's files but git's: its config (a CI token), its hooks,
                # which git runs (an audit log appended to one runs what a record holds).
                return f"leads to {escape(real)}, into git's own directory, which no commit holds"
            return None
        if self.in_git:
            where = f"the repository ({escape(self.real)})"
        else:
            where = f"the directory {escape(self.real)} (not in a git repository)"
        return f"leads to {escape(real)}, outside {where}"


def boundary(base: str) -> Boundary:
    """The top of the repository ``base`` is written in; outside git, ``base``'s anchor
    (a directory given, or the directory a link or a file is in)."""
    anchor = _anchor(os.path.abspath(base))
    top = repository_top(anchor)
    return Boundary(os.path.realpath(top or anchor), top is not None)


def _anchor(path: str) -> str:
    """Where ``path`` (absolute) is written: the nearest of itself and its parents that is a
    directory and no link (a link is judged by where it stands, not where it leads)."""
    while not os.path.isdir(path) or os.path.islink(path):
        parent = os.path.dirname(path)
        if parent == path:
            break
        path = parent
    return path


def _into_git(relative: str) -> bool:
    """Whether a path below the top passes through a `.git`: as git itself refuses one in a
    commit, in any case and with trailing dots or spaces (`.GIT` is `.git` on macOS and
    Windows, `.git.` on Windows), and whether or not git can be asked (not installed, a
    checkout it calls of dubious ownership)."""
    return any(part.rstrip(". ").casefold() == ".git" for part in relative.split(os.sep))


def _within(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def ignored(paths: list[str], cwd: str) -> set[str]:
    """Which of ``paths`` (relative to ``cwd``, a directory in a repository) git ignores:
    untracked and matched by a .gitignore (a tracked file never is). Empty when git
    cannot say (not installed, not a repository, too slow): then nothing is left out."""
    if not paths or any("\0" in p for p in paths):
        return set()
    listed = "".join(f"{p}\0" for p in paths).encode("utf-8", "surrogateescape")
    done = try_run(["check-ignore", "-z", "--stdin"], cwd=cwd, input=listed)
    if done is None or done.returncode not in (0, 1):  # 1: none ignored; 128: an error
        return set()
    return {p for p in done.stdout.decode("utf-8", "surrogateescape").split("\0") if p}


# File paths as CI shows them: relative to the repository root, not to where the CLI ran.
#
# GitHub places an annotation and GitLab a Code Quality finding on a file by its path from the
# repository root; `cd invites && reconcile validate .` must still say `invites/bad.yaml`, not
# `bad.yaml`.

# Set by the runners to the checked-out repository.
ROOT_VARIABLES = ("GITHUB_WORKSPACE", "CI_PROJECT_DIR")


def repo_relative(path: str, env: Mapping[str, str] | None = None) -> str:
    """``path`` from the repository root when it lies inside it, else as given."""
    env = os.environ if env is None else env
    root = next((env[name] for name in ROOT_VARIABLES if env.get(name)), None) or git_top(
        os.getcwd()
    )
    if not root:
        return path
    try:
        relative = os.path.relpath(os.path.realpath(path), os.path.realpath(root))
    except ValueError:  # another drive on Windows
        return path
    if relative == ".." or relative.startswith(".." + os.sep):
        return path
    return PurePath(relative).as_posix()
