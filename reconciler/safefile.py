"""Files opened only when they are what they claim: regular files, never a FIFO or device.

Every file the tool reads (config, plan, secret file, invite files) is opened
with ``open_regular``: a FIFO or device is refused at once instead of blocking
forever or reading an endless stream. Appends (the audit log, the step summary)
go through ``open_for_append``, which can also refuse a symbolic link.

Writing is ``reconciler.writing``'s: every file the tool writes goes through it.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterable
from typing import BinaryIO

from reconciler.errors import ReconcilerError
from reconciler.safetext import escape

# Opening a FIFO without a writer blocks; O_NONBLOCK returns at once, and fstat says what it is.
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)


class NotRegularFile(OSError):
    """The path is a FIFO, a device, a directory or a socket: refused before any read or write.

    An ``OSError`` whose ``strerror`` says what the path is, so every caller's
    "cannot read X: {strerror}" reads right.
    """

    def __init__(self, path: str, mode: int) -> None:
        super().__init__(errno.EINVAL, f"it is {kind_of(mode)}, not a regular file", path)


def open_regular(path: str | os.PathLike[str]) -> BinaryIO:
    """``path`` opened for reading in binary, refused unless it is a regular file.

    Raises ``OSError`` (``NotRegularFile`` for a FIFO, device, directory or socket).
    """
    fd = _open_checked(os.fspath(path), os.O_RDONLY)
    return os.fdopen(fd, "rb")


class TooLarge(Exception):
    """The file holds more than the ``limit`` bytes its reader takes (not an ``OSError``:
    each reader says in its own words what such a file should be)."""

    def __init__(self, limit: int) -> None:
        super().__init__(limit)
        self.limit = limit


def read_regular(path: str | os.PathLike[str], limit: int) -> bytes:
    """The bytes of ``path``, a regular file only, never more than ``limit`` read:
    ``TooLarge`` past it (``/dev/zero`` named as a file ends at once). Raises ``OSError``."""
    with open_regular(path) as stream:
        data = stream.read(limit + 1)
    if len(data) > limit:
        raise TooLarge(limit)
    return data


def open_for_append(path: str, *, follow_symlinks: bool = True, mode: int = 0o666) -> int:
    """A file descriptor appending to ``path`` (created if absent), a regular file only.

    With ``follow_symlinks=False`` a symbolic link at ``path`` is refused
    (``ELOOP``) rather than followed: a link committed in a repository could
    otherwise point the appends at any file the job can write.
    """
    flags = os.O_RDWR | os.O_APPEND | os.O_CREAT | (0 if follow_symlinks else _NOFOLLOW)
    return _open_checked(path, flags, mode)


def _open_checked(path: str, flags: int, mode: int = 0o666) -> int:
    fd = os.open(path, flags | _NONBLOCK | _CLOEXEC, mode)
    try:
        st_mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(st_mode):
            raise NotRegularFile(path, st_mode)
        if _NONBLOCK:  # a regular file: back to ordinary blocking reads and writes
            os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def refuse_special_file(path: str, what: str) -> None:
    """Raise unless ``path`` is absent or, after symlinks, a regular file."""
    try:
        mode = os.stat(path).st_mode  # follows symlinks: what a write would reach
    except OSError:
        return  # absent (or a dangling link): the write makes a new file; other errors show there
    if not stat.S_ISREG(mode):
        raise ReconcilerError(
            f"{escape(path)}: cannot write {what}: it is {kind_of(mode)}, not a regular "
            "file, and is left as it is; choose a file path"
        )


def write_text_replacing(
    path: str, text: str | Iterable[str], what: str, *, private: bool = False
) -> None:
    """``reconciler.writing.write_output``, under the name callers knew it by."""
    from reconciler.writing import write_output  # writing imports this module

    write_output(path, text, what, private=private)


def kind_of(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "a special file"
