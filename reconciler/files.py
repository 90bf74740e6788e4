"""Every file the tool reads or writes (`../shared/spec/cli.md`, "Files the tool writes").

- Read: ``open_regular`` and ``read_regular`` (within the reader's bound) open a regular
  file only: a FIFO or a device is refused at once, never waited on or read for ever.
- Write whole: ``write_output`` (a plan, a report, a summary, an export) writes into a
  temporary file beside the path, synced, renamed over it; ``private`` files (plans) are
  ``0600``, others keep the mode of the file they replace, or get the usual one (``0666``
  less the umask); ``create_only`` never replaces a file that appeared meanwhile.
  ``refuse_input``: an output path that is a file this run reads is refused before
  anything is sent.
- Append: ``open_append`` (the audit log, created ``0600``, never through a symbolic
  link; GitHub's step summary).
- Replace in place (adopt, export --force): ``read_for_rewrite``, then ``replace_read``
  (or ``replace_all`` for several) only while the file is still byte for byte what was
  read, through the same symbolic links, keeping its mode.
- The package's own: ``resource_path`` (the schemas, the example invites) and
  ``invite_schema_path``, from an installed wheel's ``_bundled/`` or a source checkout.

The temporary file is made, and renamed, in the file's directory held open from the
start (``dir_fd``); for a file replaced in place that directory must be the one it was
read from: a directory or a link on the path swapped meanwhile never receives the file.
What is left: POSIX has no rename "only if the target is still this inode", so an edit
landing between the last compare and the rename (a few system calls) is replaced.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import signal
import stat
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import BinaryIO

from reconciler.errors import ReconcilerError
from reconciler.safetext import escape

PRIVATE_MODE = 0o600
# Opening a FIFO without a writer blocks; O_NONBLOCK returns at once, and fstat says what it is.
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_DIRECTORY = getattr(os, "O_DIRECTORY", 0)


class NotRegularFile(OSError):
    """The path is a FIFO, a device, a directory or a socket: refused before any read or
    write. Its ``strerror`` says what the path is, so every "cannot read X: {strerror}"
    reads right."""

    def __init__(self, path: str, mode: int) -> None:
        super().__init__(errno.EINVAL, f"it is {file_kind(mode)}, not a regular file", path)


class TooLarge(Exception):
    """The file holds more than the ``limit`` bytes its reader takes (not an ``OSError``:
    each reader says in its own words what such a file should be)."""

    def __init__(self, limit: int) -> None:
        super().__init__(limit)
        self.limit = limit


class FileChanged(ReconcilerError):
    """The file is no longer what was read: it is left as it is."""


_KINDS = {stat.S_IFDIR: "a directory", stat.S_IFCHR: "a device", stat.S_IFBLK: "a device"}
_KINDS |= {stat.S_IFIFO: "a FIFO (named pipe)", stat.S_IFSOCK: "a socket"}


def file_kind(mode: int) -> str:
    """What a path that is no regular file is, in words: "a directory", "a FIFO (named pipe)"."""
    return _KINDS.get(stat.S_IFMT(mode), "a special file")


# -- read and append ---------------------------------------------------------------------------


def open_regular(path: str | os.PathLike[str]) -> BinaryIO:
    """``path`` opened for reading in binary, a regular file only. Raises ``OSError``
    (``NotRegularFile`` for a FIFO, device, directory or socket)."""
    return os.fdopen(_open_regular_fd(os.fspath(path), os.O_RDONLY), "rb")


def read_regular(path: str | os.PathLike[str], limit: int) -> bytes:
    """The bytes of ``path``, a regular file only, never more than ``limit`` read:
    ``TooLarge`` past it (``/dev/zero`` named as a file ends at once). Raises ``OSError``."""
    with open_regular(path) as stream:
        data = stream.read(limit + 1)
    if len(data) > limit:
        raise TooLarge(limit)
    return data


def open_append(path: str, *, private: bool = True, follow_symlinks: bool = False) -> int:
    """A file descriptor appending to ``path`` (created if absent, ``0600`` when ``private``),
    a regular file only. A symbolic link is refused (``ELOOP``) unless ``follow_symlinks``
    (a file the CI runner made, as GITHUB_STEP_SUMMARY): a link committed in a repository
    could point the appends at any file the job can write. Raises ``OSError``."""
    flags = os.O_RDWR | os.O_APPEND | os.O_CREAT | (0 if follow_symlinks else _NOFOLLOW)
    return _open_regular_fd(path, flags, PRIVATE_MODE if private else 0o666)


def _open_regular_fd(path: str, flags: int, mode: int = 0o666) -> int:
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


# -- write whole -------------------------------------------------------------------------------


def refuse_input(path: str | None, inputs: Iterable[str], option: str, what: str) -> None:
    """Raise, before anything is read from the platform, when ``path`` is one of ``inputs``."""
    if not path:
        return
    for one in inputs:
        try:  # the same file, symbolic links followed, existing or not
            same = os.path.samefile(path, one)
        except OSError:
            same = os.path.realpath(path) == os.path.realpath(one)
        if same:
            raise ReconcilerError(
                f"{option} {escape(path)}: {escape(one)} is a file this run reads; write "
                f"{what} elsewhere. Nothing was read from the platform"
            )


def refuse_special_file(path: str, what: str) -> None:
    """Raise unless ``path`` is absent or, after symbolic links, a regular file."""
    try:
        mode = os.stat(path).st_mode  # follows symlinks: what a write would reach
    except OSError:
        return  # absent (or a dangling link): the write makes a new file; other errors show there
    if not stat.S_ISREG(mode):
        raise ReconcilerError(
            f"{escape(path)}: cannot write {what}: it is {file_kind(mode)}, not a regular "
            "file, and is left as it is; choose a file path"
        )


def write_output(
    path: str,
    text: str | Iterable[str],
    what: str,
    *,
    private: bool = False,
    create_only: bool = False,
) -> None:
    """Write ``text`` (or its pieces, in order) to ``path`` whole, by rename.

    A symlink at ``path`` is replaced by the new file and its target left untouched:
    writing through a link could overwrite any file the link points at. A FIFO, device
    or directory at ``path`` is refused. ``create_only``: a file that appeared at
    ``path`` since the caller looked is refused, never replaced.
    """
    refuse_special_file(path, what)
    mode = PRIVATE_MODE if private else _kept_mode(path)
    pieces = [text] if isinstance(text, str) else text
    write_atomic(path, (p.encode("utf-8") for p in pieces), mode, what, create_only=create_only)


def _kept_mode(path: str) -> int:
    with contextlib.suppress(OSError):
        info = os.lstat(path)
        if stat.S_ISREG(info.st_mode):
            return stat.S_IMODE(info.st_mode)
    mask = os.umask(0o022)
    os.umask(mask)
    return 0o666 & ~mask


def write_atomic(
    target: str,
    pieces: Iterable[bytes],
    mode: int,
    what: str,
    *,
    create_only: bool = False,
    before_rename: Callable[[], None] | None = None,
    directory: tuple[int, int] | None = None,
) -> None:
    """``pieces`` written into a temporary file made in ``target``'s directory, held open
    from the start, synced, then renamed to ``target`` there; with ``directory`` (its
    identity when the file was read), the directory held must be that one."""
    dfd = tmp = None
    try:
        with _terminate_unwinds():
            dfd = os.open(os.path.dirname(target) or ".", os.O_RDONLY | _DIRECTORY | _CLOEXEC)
            if directory is not None and _identity(os.fstat(dfd)) != directory:
                raise FileChanged(
                    f"{escape(target)}: not written ({what}): its directory was replaced since "
                    "it was read; nothing was written"
                )
            fd, tmp = _new_temporary(dfd)
            with os.fdopen(fd, "wb") as handle:
                os.fchmod(handle.fileno(), mode)
                handle.writelines(pieces)
                handle.flush()
                os.fsync(handle.fileno())
            if before_rename is not None:
                before_rename()
            _rename(tmp, os.path.basename(target), dfd, create_only)
            tmp = None
            with contextlib.suppress(OSError):  # the rename survives a power cut
                os.fsync(dfd)
    except OSError as exc:
        exists = create_only and exc.errno == errno.EEXIST
        problem = "a file appeared there meanwhile, and is left as it is" if exists else None
        raise ReconcilerError(
            f"{escape(target)}: cannot write {what}: {problem or exc.strerror or exc}"
        ) from None
    finally:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp, dir_fd=dfd)
        if dfd is not None:
            os.close(dfd)


def _new_temporary(dfd: int) -> tuple[int, str]:
    """A new file in the directory ``dfd``, by a name no other file has: (fd, name)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC
    for _ in range(100):
        name = f".reconcile-{secrets.token_hex(6)}.tmp"
        with contextlib.suppress(FileExistsError):
            return os.open(name, flags, PRIVATE_MODE, dir_fd=dfd), name
    raise FileExistsError(errno.EEXIST, "no free temporary file name")


def _rename(tmp: str, target: str, dfd: int, create_only: bool) -> None:
    """``tmp`` made ``target`` (both in the directory ``dfd``). ``create_only``: a hard link,
    which fails (``EEXIST``) when a file appeared there; without hard links, a rename after
    one more look."""
    if not create_only:
        os.replace(tmp, target, src_dir_fd=dfd, dst_dir_fd=dfd)
        return
    try:
        os.link(tmp, target, src_dir_fd=dfd, dst_dir_fd=dfd, follow_symlinks=False)
    except OSError as exc:
        if exc.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV):
            raise
        with contextlib.suppress(FileNotFoundError):
            os.stat(target, dir_fd=dfd, follow_symlinks=False)
            raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), target) from None
        os.replace(tmp, target, src_dir_fd=dfd, dst_dir_fd=dfd)
        return
    os.unlink(tmp, dir_fd=dfd)


def _identity(info: os.stat_result) -> tuple[int, int]:
    return (info.st_dev, info.st_ino)


# SIGHUP too: closing the terminal or an SSH session sends it, and by default it
# also ends the process on the spot.
_UNWINDING_SIGNALS = tuple(
    getattr(signal, name) for name in ("SIGTERM", "SIGHUP") if hasattr(signal, name)
)


@contextlib.contextmanager
def _terminate_unwinds() -> Iterator[None]:
    """SIGTERM and SIGHUP raise SystemExit while this runs, so ``finally`` clauses run and
    the temporary file goes (by default they end the process on the spot). A signal the
    caller ignores (``nohup``) stays ignored. Signals reach the main thread only."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {signum: signal.getsignal(signum) for signum in _UNWINDING_SIGNALS}
    for signum, handler in previous.items():
        if handler is not signal.SIG_IGN:
            signal.signal(signum, _exit_on_terminate)
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def _exit_on_terminate(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(128 + signum)  # the status a shell reports for a process ended by it


# -- replace in place --------------------------------------------------------------------------


@dataclass(frozen=True)
class ReadFile:
    """A file as read, to be replaced only while it still is exactly that."""

    path: str  # as named (shown in messages)
    real: str  # every symbolic link resolved, when it was read
    data: bytes
    mode: int  # its permission bits
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
    return ReadFile(path, real, data, stat.S_IMODE(info.st_mode), _identity(folder))


def replace_read(
    read: ReadFile, new: str | bytes, what: str, *, through_links: bool = True
) -> None:
    """Replace the file ``read`` came from with ``new``, keeping its mode.

    Refused (``FileChanged``), nothing written, when the file is no longer
    byte-for-byte ``read.data``, or its path now leads elsewhere (a symbolic link
    swapped, the file replaced by a directory or a FIFO); checked before the write
    starts and again right before the rename. ``through_links``: the file a symbolic
    link names is replaced, and the link stays; else the link itself is replaced by
    the new file (as ``write_output`` does).
    """
    data = new.encode("utf-8") if isinstance(new, str) else new
    _check_unchanged(read, what)
    write_atomic(
        read.real if through_links else read.path,
        [data],
        read.mode,
        what,
        before_rename=lambda: _check_unchanged(read, what),
        directory=read.directory if through_links else None,
    )


def replace_all(writes: Sequence[tuple[ReadFile, str | bytes]], what: str) -> list[str]:
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
    refused = f"{escape(read.path)}: not written ({what}):"
    now_real = os.path.realpath(read.path)
    if now_real != read.real:
        raise FileChanged(
            f"{refused} it now leads to {escape(now_real)}, not the file read; nothing was "
            "written to it"
        )
    try:
        with open_regular(read.real) as stream:
            now = stream.read(len(read.data) + 1)
        folder = _identity(os.stat(os.path.dirname(read.real)))
    except NotRegularFile as exc:
        raise FileChanged(f"{refused} {exc.strerror} now; nothing was written to it") from None
    except OSError as exc:
        raise FileChanged(
            f"{refused} cannot read it again ({exc.strerror}); nothing was written to it"
        ) from None
    if now != read.data:
        raise FileChanged(
            f"{refused} it changed since it was read (edited meanwhile?); nothing was written "
            "to it. Run again on the file as it is now"
        )
    if folder != read.directory:
        raise FileChanged(
            f"{refused} its directory was replaced since it was read; nothing was written"
        )


# Files the package reads at run time: an installed wheel carries copies under
# _bundled/; a source checkout has the originals at the top of the repository.
_PACKAGE = Path(__file__).resolve().parent
_ROOTS = (_PACKAGE / "_bundled", _PACKAGE.parent)


def resource_path(relative: str) -> Path:
    for root in _ROOTS:
        candidate = root / relative
        if candidate.exists():
            return candidate
    raise FileNotFoundError(
        f"package resource {relative!r} is missing; reinstall invite-reconciler"
    )


def invite_schema_path() -> Path:
    return resource_path("schemas/invites.schema.json")
