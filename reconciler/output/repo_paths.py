"""File paths as CI shows them: relative to the repository root, not to where the CLI ran.

GitHub places an annotation and GitLab a Code Quality finding on a file by its
path from the repository root; `cd invites && reconcile validate .` must still
say `invites/bad.yaml`, not `bad.yaml`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import PurePath

from reconciler.git import git_top

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
