"""git, found and run in one place: always by its path on PATH, output captured, time bounded.

Three stages ask git something: `--changed-since` reads files as they were at a commit,
CI paths and the invite loader ask for the repository's top level (and the loader which
files the repository ignores), the audit log asks whether its file is committed. Each
decides what a failure means to it (an error the user reads, or quietly no answer);
here git is only found, run and stopped in time.
A top-level module, so that desired/ need not reach into output/ for the top level.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from functools import lru_cache
from pathlib import Path

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
    )


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
