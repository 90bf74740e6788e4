"""Every file the tool writes goes through here (`../shared/spec/cli.md`, "Files the tool writes").

- ``refuse_input``: an output path that is a file this run reads (an invite file, the
  config) is refused before anything is sent.
- ``write_output``: a new output (a plan, a report, a summary, an export), written whole
  into a temporary file beside it, synced, renamed over the path; ``private`` files
  (plans) are ``0600``, others keep the mode of the file they replace, or get the usual
  one (``0666`` less the umask). ``create_only`` never replaces a file that appeared
  meanwhile.
- ``write_atomic``: that write, which ``rewriting`` also uses to replace a file read
  (``replace_read``: only while it is still byte-for-byte what was read).
- ``open_append``: the audit log, created ``0600``, never through a symbolic link.

The temporary file and the rename are made in the file's directory held open from the
start (``dir_fd``), and, for a file replaced in place, that directory must be the one
the file was read from: a directory or a link on the path swapped meanwhile never
receives the new file.
"""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import stat
import tempfile
import threading
from collections.abc import Callable, Iterable, Iterator
from types import FrameType

from reconciler.errors import ReconcilerError
from reconciler.safefile import kind_of, open_for_append
from reconciler.safetext import escape

PRIVATE_MODE = 0o600
_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)


class FileChanged(ReconcilerError):
    """The file is no longer what was read: it is left as it is."""


def same_file(a: str, b: str) -> bool:
    """Whether two paths name the same file (symbolic links followed), existing or not."""
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.realpath(a) == os.path.realpath(b)


def refuse_input(path: str | None, inputs: Iterable[str], option: str, what: str) -> None:
    """Raise, before anything is read from the platform, when ``path`` is one of ``inputs``."""
    if not path:
        return
    for one in inputs:
        if same_file(path, one):
            raise ReconcilerError(
                f"{option} {escape(path)}: {escape(one)} is a file this run reads; write "
                f"{what} elsewhere. Nothing was read from the platform"
            )


def write_output(
    path: str,
    text: str | Iterable[str],
    what: str,
    *,
    private: bool = False,
    create_only: bool = False,
) -> None:
    """Write ``text`` (or its pieces, in order) to ``path`` atomically.

    A symlink at ``path`` is replaced by the new file and its target left untouched:
    writing through a link could overwrite any file the link points at. A FIFO, device
    or directory at ``path`` is refused. ``create_only``: a file that appeared at
    ``path`` since the caller looked is refused, never replaced.
    """
    _refuse_special(path, what)
    mode = PRIVATE_MODE if private else _kept_mode(path)
    pieces = [text] if isinstance(text, str) else text
    write_atomic(path, (p.encode("utf-8") for p in pieces), mode, what, create_only=create_only)


def open_append(path: str, *, private: bool = True, follow_symlinks: bool = False) -> int:
    """A file descriptor appending to ``path``, a regular file only: created ``0600`` when
    ``private``; a symbolic link is refused (``ELOOP``) unless ``follow_symlinks`` (a file
    the CI runner made, as GITHUB_STEP_SUMMARY). Raises ``OSError``."""
    mode = PRIVATE_MODE if private else 0o666
    return open_for_append(path, follow_symlinks=follow_symlinks, mode=mode)


# -- inside ------------------------------------------------------------------------------------


def _refuse_special(path: str, what: str) -> None:
    try:
        mode = os.stat(path).st_mode  # follows symlinks: what a write would reach
    except OSError:
        return  # absent (or a dangling link): the write makes a new file
    if not stat.S_ISREG(mode):
        raise ReconcilerError(
            f"{escape(path)}: cannot write {what}: it is {kind_of(mode)}, not a regular "
            "file, and is left as it is; choose a file path"
        )


def _kept_mode(path: str) -> int:
    try:
        info = os.lstat(path)
    except OSError:
        return 0o666 & ~_umask()
    return stat.S_IMODE(info.st_mode) if stat.S_ISREG(info.st_mode) else 0o666 & ~_umask()


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
    """The temporary file and the rename are made in one directory, held open from the
    start: a directory (or a link on the path to it) swapped meanwhile never receives the
    file; with ``directory`` (the identity recorded when the file was read), the one held
    must be that one."""
    folder = os.path.dirname(target) or "."
    name = os.path.basename(target)
    tmp = None
    dfd = None
    try:
        with _terminate_unwinds():
            dfd = os.open(folder, os.O_RDONLY | _DIRECTORY | _CLOEXEC)
            held = os.fstat(dfd)
            if directory is not None and (held.st_dev, held.st_ino) != directory:
                raise FileChanged(
                    f"{escape(target)}: not written ({what}): its directory was replaced since "
                    "it was read; nothing was written"
                )
            fd, tmp = tempfile.mkstemp(prefix=".reconcile-", suffix=".tmp", dir=folder)
            with os.fdopen(fd, "wb") as handle:
                os.fchmod(handle.fileno(), mode)
                made = os.fstat(handle.fileno())
                for piece in pieces:
                    handle.write(piece)
                handle.flush()
                os.fsync(handle.fileno())
            base = os.path.basename(tmp)
            there = os.stat(base, dir_fd=dfd, follow_symlinks=False)
            if (there.st_dev, there.st_ino) != (made.st_dev, made.st_ino):
                os.unlink(tmp)  # made through a directory swapped meanwhile: gone again
                tmp = None
                raise FileChanged(
                    f"{escape(target)}: not written ({what}): its directory was replaced while "
                    "it was written; nothing was written"
                )
            if before_rename is not None:
                before_rename()
            if create_only:
                _link_new(base, name, dfd)
                with contextlib.suppress(FileNotFoundError):  # renamed, without hard links
                    os.unlink(base, dir_fd=dfd)
            else:
                os.replace(base, name, src_dir_fd=dfd, dst_dir_fd=dfd)
            tmp = None
            with contextlib.suppress(OSError):  # the rename survives a power cut
                os.fsync(dfd)
    except OSError as exc:
        problem = exc.strerror or str(exc)
        if create_only and exc.errno == errno.EEXIST:
            problem = "a file appeared there meanwhile, and is left as it is"
        raise ReconcilerError(f"{escape(target)}: cannot write {what}: {problem}") from None
    finally:
        if tmp is not None:
            with contextlib.suppress(OSError):
                if dfd is not None:
                    os.unlink(os.path.basename(tmp), dir_fd=dfd)
                else:
                    os.unlink(tmp)
        if dfd is not None:
            os.close(dfd)


def _link_new(tmp: str, target: str, dfd: int) -> None:
    """``tmp`` made ``target`` (both in the directory ``dfd``), which must not exist: a hard
    link, which fails (``EEXIST``) when a file appeared there; without hard links, a rename
    after one more look."""
    try:
        os.link(tmp, target, src_dir_fd=dfd, dst_dir_fd=dfd, follow_symlinks=False)
    except OSError as exc:
        if exc.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV):
            raise
        try:
            os.stat(target, dir_fd=dfd, follow_symlinks=False)
        except FileNotFoundError:
            os.replace(tmp, target, src_dir_fd=dfd, dst_dir_fd=dfd)
            return
        raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), target) from None


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


# SIGHUP too: closing the terminal or an SSH session sends it, and by default it
# also ends the process on the spot.
_UNWINDING_SIGNALS = tuple(
    getattr(signal, name) for name in ("SIGTERM", "SIGHUP") if hasattr(signal, name)
)


@contextlib.contextmanager
def _terminate_unwinds() -> Iterator[None]:
    """SIGTERM and SIGHUP raise SystemExit while this runs, so ``finally`` clauses run.

    By default they end the process on the spot, which would leave the
    temporary file behind. A signal the caller ignores (``nohup``) stays ignored.
    Signals reach the main thread only; elsewhere this does nothing.
    """
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
