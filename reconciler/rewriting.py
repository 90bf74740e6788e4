"""Files replaced in place (adopt, export --force): read, then replaced only while each is
still byte-for-byte what was read, through the same symbolic links, keeping its mode.

- read_for_rewrite: a file read whole, within its reader's limit.
- replace_read: the file replaced by writing's atomic write, checked unchanged
  before it starts and again right before the rename.
- write_all: several such replacements; when one fails, the error names every file
  already written.

What is left: between the last compare and the rename there is no compare-and-swap on
POSIX (no rename "only if the target is still this inode"), so an edit landing in
those few system calls is replaced; every other moment of the run is covered.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Sequence
from dataclasses import dataclass

from reconciler import writing
from reconciler.errors import ReconcilerError
from reconciler.safefile import NotRegularFile, open_regular
from reconciler.safetext import escape
from reconciler.writing import FileChanged


@dataclass(frozen=True)
class ReadFile:
    """A file as read, to be replaced only while it still is exactly that."""

    path: str  # as named (shown in messages)
    real: str  # every symbolic link resolved, when it was read
    data: bytes
    mode: int  # its permission bits
    inode: tuple[int, int]  # (st_dev, st_ino)
    directory: tuple[int, int]  # its directory's (st_dev, st_ino): the new file goes there

    @property
    def text(self) -> str:
        """Its text, BOM included; raises UnicodeDecodeError when it is not UTF-8."""
        return self.data.decode("utf-8")


def read_for_rewrite(path: str, limit: int) -> ReadFile:
    """``path`` read whole, a regular file only, never more than ``limit`` bytes (the
    caller's: an invite file's is the loader's). Raises ``OSError`` (``EFBIG`` past it)."""
    real = os.path.realpath(path)
    folder = os.stat(os.path.dirname(real))
    with open_regular(real) as stream:
        info = os.fstat(stream.fileno())
        data = stream.read(limit + 1)
    if len(data) > limit:
        raise OSError(errno.EFBIG, f"larger than {limit // 2**20} MiB", path)
    return ReadFile(
        path,
        real,
        data,
        stat.S_IMODE(info.st_mode),
        (info.st_dev, info.st_ino),
        (folder.st_dev, folder.st_ino),
    )


def replace_read(
    read: ReadFile, new: str | bytes, what: str, *, through_links: bool = True
) -> None:
    """Replace the file ``read`` came from with ``new``, keeping its mode.

    Refused (``FileChanged``), nothing written, when the file is no longer
    byte-for-byte ``read.data``, or its path now leads elsewhere (a symbolic link
    swapped, the file replaced by a directory or a FIFO). ``through_links``: the
    file a symbolic link names is replaced, and the link stays; else the link itself
    is replaced by the new file (as ``write_output`` does).
    """
    data = new.encode("utf-8") if isinstance(new, str) else new
    _check_unchanged(read, what)
    target = read.real if through_links else read.path
    writing.write_atomic(
        target,
        iter([data]),
        read.mode,
        what,
        before_rename=lambda: _check_unchanged(read, what),
        directory=read.directory if through_links else None,
    )


def write_all(writes: Sequence[tuple[ReadFile, str | bytes]], what: str) -> list[str]:
    """Each ``(read, new)`` by ``replace_read``, in order; the paths written.

    Every file is checked unchanged before the first is written. When one fails,
    the error names it and lists the files already written (they hold the new text).
    """
    for read, _ in writes:
        try:
            _check_unchanged(read, what)
        except FileChanged as error:
            raise FileChanged(f"{error} (no file was changed)") from None
    written: list[str] = []
    for read, new in writes:
        try:
            replace_read(read, new, what)
        except ReconcilerError as error:
            if written:
                listed = ", ".join(escape(p) for p in written)
                raise type(error)(
                    f"{error}\nalready written before this failure: {listed}"
                ) from None
            raise
        written.append(read.path)
    return written


def _check_unchanged(read: ReadFile, what: str) -> None:
    shown = escape(read.path)
    if os.path.realpath(read.path) != read.real:
        raise FileChanged(
            f"{shown}: not written ({what}): it now leads to "
            f"{escape(os.path.realpath(read.path))}, not the file read; nothing was written to it"
        )
    try:
        with open_regular(read.real) as stream:
            now = stream.read(len(read.data) + 1)
    except NotRegularFile as exc:
        raise FileChanged(
            f"{shown}: not written ({what}): {exc.strerror} now; nothing was written to it"
        ) from None
    except OSError as exc:
        raise FileChanged(
            f"{shown}: not written ({what}): cannot read it again ({exc.strerror}); "
            "nothing was written to it"
        ) from None
    if now != read.data:
        raise FileChanged(
            f"{shown}: not written ({what}): it changed since it was read (edited meanwhile?); "
            "nothing was written to it. Run again on the file as it is now"
        )
    try:
        folder = os.stat(os.path.dirname(read.real))
    except OSError:
        folder = None
    if folder is None or (folder.st_dev, folder.st_ino) != read.directory:
        raise FileChanged(
            f"{shown}: not written ({what}): its directory was replaced since it was read; "
            "nothing was written"
        )
