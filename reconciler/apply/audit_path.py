"""The audit log's file: where it may be written (never through a symbolic link, never a
committed file, never out of the repository it is written in), and how it is opened (to
append; a new file's directory synced; a torn last line ended).

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
from reconciler.git import outside_repository, repository_top, try_run
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
    if repository_top(path) is None:
        return None  # outside git: wherever the user chose
    outside = outside_repository(path)  # a directory of the checkout linked out of it
    if outside:
        return f"it {outside}; the audit log never follows a link out of it: give the real path"
    if mode is not None and _tracked(path):
        return (
            "it is a file committed in the repository, so a commit could have written records "
            "into it; write the audit log outside the checkout, or to a path git ignores"
        )
    return None


def _tracked(path: str) -> bool:
    real = os.path.realpath(path)  # inside the repository: a link to a committed file too
    done = try_run(
        ["ls-files", "--error-unmatch", "--", real],
        cwd=os.path.dirname(real),
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
