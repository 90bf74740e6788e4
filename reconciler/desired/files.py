"""Which files a run reads: the paths named, directories walked (without the settings' file,
what is hidden, what git ignores), none read through a link out of the repository."""

from __future__ import annotations

import os
from pathlib import Path

from reconciler.errors import FileProblem
from reconciler.files import file_kind
from reconciler.git import boundary, git_top, ignored, outside_repository, up_to_top
from reconciler.safetext import escape

YAML_SUFFIXES = (".yaml", ".yml")


def is_yaml_name(name: str) -> bool:
    """Whether a file of this name is read when its directory is: `*.yaml`, `*.yml`, in any
    case (`APAC.YAML`, saved so on Windows, was left out without a word)."""
    return name.lower().endswith(YAML_SUFFIXES)


DEFAULT_PATH = "invites"  # read when no PATH is given and the config sets no `paths`


CONFIG_FILE = "reconciler.yaml"  # the settings' file, found next to the invites or above


def find_files(paths: list[str]) -> tuple[list[Path], list[FileProblem]]:
    """The YAML files named or found (recursively, sorted) under ``paths``.

    A path named, or a file found under it, that leads out of its repository (symbolic
    links followed; reconciler.git.outside_repository) is refused unread: a link
    committed in a pull request could otherwise have any file of the job's machine
    read and quoted in messages.
    """
    files: list[Path] = []
    problems: list[FileProblem] = []
    for raw in paths:
        path = Path(raw)
        outside = outside_repository(raw)  # `invites/` itself a link out: never listed
        if outside:
            problems.append(FileProblem(raw, 0, 0, _link_out(outside)))
        elif path.is_dir():
            found = _walk(path)
            if not found:
                problems.append(FileProblem(raw, 0, 0, _NONE_FOUND))
            inside = boundary(raw)
            for file in found:
                outside = inside.outside(str(file))
                if outside:
                    problems.append(FileProblem(str(file), 0, 0, _link_out(outside)))
                elif not file.is_file():  # a FIFO, a device, a dangling link: never opened
                    problems.append(FileProblem(str(file), 0, 0, _not_regular(file)))
                else:
                    files.append(file)
        elif path.is_file():
            files.append(path)
        elif path.exists():  # a FIFO, a device, a socket: never opened
            problems.append(FileProblem(raw, 0, 0, _not_regular(path)))
        else:
            problems.append(FileProblem(raw, 0, 0, _missing(raw)))
    unique = list(dict.fromkeys(files))
    return unique, problems


def _walk(path: Path) -> list[Path]:
    """The invite files under the directory ``path``, sorted, without what git ignores."""
    # Not only regular files: a FIFO named like one is refused, not passed over unsaid.
    found = sorted(p for p in path.rglob("*") if _walked(p, path) and not p.is_dir())
    if not found or git_top(os.path.abspath(path)) is None:
        return found
    # What the repository ignores (a virtualenv, node_modules/) is not its invites,
    # however much YAML it holds.
    below = [str(p.relative_to(path)) for p in found]
    left_out = ignored([".", *below], cwd=str(path))
    if "." in left_out:  # a directory named that git ignores is read whole
        return found
    return [p for p, rel in zip(found, below, strict=True) if rel not in left_out]


def _link_out(outside: str) -> str:
    return (
        f"not read: it {outside}; invite files never follow a link out of it "
        "(copy the file in instead)"
    )


_NONE_FOUND = (
    f"no *.yaml or *.yml files in this directory ({CONFIG_FILE}, files and directories "
    "whose names start with a dot, and what git ignores are not invite files)"
)


def _walked(file: Path, directory: Path) -> bool:
    """Whether a walk of ``directory`` reads ``file`` as an invite file: a YAML name, not
    the settings' file, and nothing hidden under it (`.git/`, `.github/workflows/*.yml`:
    `validate .` at a repository's top reads the invites, not the CI's YAML; what git
    ignores is left out too). A file named is read."""
    if file.name == CONFIG_FILE or not is_yaml_name(file.name):
        return False
    return not any(part.startswith(".") for part in file.relative_to(directory).parts)


def _not_regular(path: Path) -> str:
    try:
        mode = path.stat().st_mode
    except OSError as exc:
        return f"cannot read: {exc.strerror}"
    return f"not read: it is {file_kind(mode)}, not a regular file"


def _missing(raw: str) -> str:
    message = "no such file or directory"
    if raw != DEFAULT_PATH:
        return message
    if Path(CONFIG_FILE).is_file():
        return message + (
            f" (read when no PATH is given and {CONFIG_FILE} sets no `paths`; "
            f"pass a PATH, or set `paths:` in {CONFIG_FILE})"
        )
    looked = up_to_top()
    where = ", ".join(escape(str(d)) for d in looked)
    top = " (the repository's top)" if git_top(str(looked[0])) else " (not in a git repository)"
    return message + (
        f" (read when no PATH is given and no {CONFIG_FILE} sets `paths`; looked for "
        f"{CONFIG_FILE} in {where}{top}, and found none; pass a PATH, or run from the "
        f"directory of your {CONFIG_FILE} or below it)"
    )
