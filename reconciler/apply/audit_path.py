"""The audit log's file: where it may be written (never through a symbolic link, never a
committed file), and how it is opened (to append; a new file's directory synced; a torn
last line ended).

The audit log path usually sits in the checkout (`--audit-log audit.jsonl` in
CI), and what is in the checkout is what a pull request made. A committed
symbolic link would point the appends at any file the job can write
(`~/.bashrc`, another job's output); a committed regular file would hand the
log records the pull request wrote, which then read as the tool's own. So the
path is checked before it is opened, and opened without following a link.
"""

from __future__ import annotations

import os
import stat
import subprocess

from reconciler.errors import ReconcilerError
from reconciler.git import git_top, try_run
from reconciler.safetext import escape
from reconciler.writing import open_append


class AuditLogError(ReconcilerError):
    """The audit log cannot be written: no write may start without its record."""


def audit_path_problem(path: str) -> str | None:
    """Why ``path`` must not be the audit log, or None when it may be."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        mode = None
    except OSError as exc:
        return exc.strerror or str(exc)
    if mode is not None and stat.S_ISLNK(mode):
        return (
            f"it is a symbolic link (to {escape(os.readlink(path))}); the audit log is never "
            "written through a link, which a commit could point at any file: give the real path"
        )
    directory = os.path.dirname(os.path.abspath(path))
    # The repository run in; else the one the path is in (a link there leads out of it).
    top = git_top(os.getcwd()) or (git_top(directory) if os.path.isdir(directory) else None)
    if top is None:
        return None
    real_top = os.path.realpath(top)
    lexically_inside = _inside(directory, top) or _inside(directory, real_top)
    if lexically_inside and not _inside(os.path.realpath(directory), real_top):
        return (
            "its directory is a symbolic link out of the repository; the audit log never "
            "follows a link out of it: give the real path"
        )
    if mode is not None and lexically_inside and _tracked(path, directory):
        return (
            "it is a file committed in the repository, so a commit could have written records "
            "into it; write the audit log outside the checkout, or to a path git ignores"
        )
    return None


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def _tracked(path: str, directory: str) -> bool:
    done = try_run(
        ["ls-files", "--error-unmatch", "--", os.path.abspath(path)],
        cwd=directory,
        stdin=subprocess.DEVNULL,
    )
    return done is not None and done.returncode == 0


def open_for_append(path: str) -> int:
    """The audit log opened to append, as a file descriptor; AuditLogError if it may not be."""
    problem = audit_path_problem(path)  # a link or a committed file: refused, never followed
    if problem:
        raise AuditLogError(f"{escape(path)}: cannot open the audit log: {problem}")
    try:
        fd = open_append(path)  # 0600; a FIFO, device or symbolic link: refused at once
    except OSError as exc:
        raise AuditLogError(f"{path}: cannot open the audit log: {exc.strerror}") from None
    try:
        size = os.fstat(fd).st_size
        if size == 0:
            _sync_directory(path)  # a new file: its name must survive a power cut too
        elif os.pread(fd, 1, size - 1) != b"\n":
            write_all(fd, b"\n")  # after a torn line: our records start on their own line
    except OSError as exc:
        os.close(fd)
        raise AuditLogError(f"{path}: cannot prepare the audit log: {exc.strerror}") from None
    return fd


def _sync_directory(path: str) -> None:
    directory = os.open(os.path.dirname(os.path.abspath(path)), os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)


def write_all(fd: int, data: bytes) -> None:
    """All of ``data``, however many ``write`` calls it takes."""
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]
