"""File paths as CI shows them: relative to the repository root, not to where the CLI ran.

GitHub places an annotation and GitLab a Code Quality finding on a file by its
path from the repository root; `cd invites && reconcile validate .` must still
say `invites/bad.yaml`, not `bad.yaml`.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Mapping
from functools import lru_cache
from pathlib import PurePath

# Set by the runners to the checked-out repository.
ROOT_VARIABLES = ("GITHUB_WORKSPACE", "CI_PROJECT_DIR")
_GIT_TIMEOUT = 5.0


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


@lru_cache(maxsize=8)
def git_top(cwd: str) -> str | None:
    """The git top level of ``cwd``, asked once per directory; None outside git."""
    git = shutil.which("git")
    if git is None:
        return None
    try:
        done = subprocess.run(
            [git, "rev-parse", "--show-toplevel"],
            cwd=cwd,
            capture_output=True,
            timeout=_GIT_TIMEOUT,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    top = done.stdout.decode("utf-8", "replace").strip()
    return top if done.returncode == 0 and top else None
