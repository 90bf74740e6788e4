# Copyright: invite-reconciler maintainers
# MIT License (see the repository's pyproject.toml)
"""Reads ``src:`` on the controller, then runs the module with the files' text.

Files are found and read with the library's own rules (``find_files``: recursive,
sorted, no symbolic link out of the repository or the directory given, no FIFO or
device; at most 256 MiB a file), so that the module reports a problem as
``path:line:column`` of the controller's file, as ``reconcile validate`` does.

Exactly once across hosts: a task that would run for several hosts of a play without
``run_once`` fails before any request (each host would send the same writes, and
could e-mail an invitation once per host); and runs that apply take turns on the
controller (a lock in ANSIBLE_HOME), so that one started while another applies plans
after it, and finds nothing left to do.
"""

from __future__ import annotations

import errno
import fcntl
import os
import stat
import time
from contextlib import contextmanager

from ansible import constants as C
from ansible.errors import AnsibleError, AnsibleFileNotFound
from ansible.plugins.action import ActionBase
from ansible.utils.display import Display

try:
    from reconciler.desired.files import find_files
    from reconciler.desired.state import MAX_FILE_BYTES
    from reconciler.files import TooLarge, read_regular
    from reconciler.yamlload.source import decode_source
except ImportError:
    HAS_LIBRARY = False
else:
    HAS_LIBRARY = True

MODULE = "kyb.invites.invites"
LOCK_NAME = "kyb.invites.lock"
LOCK_WAIT = 3600.0  # seconds a run waits for another to finish applying, at most
HOSTS_SHOWN = 5
SECRET_VARIABLES = ("RECONCILER_CLIENT_SECRET",)

display = Display()


class LockNotTaken(AnsibleError):
    """Another run kept applying for longer than a run waits, or the lock's path is not a
    regular file (a symbolic link, a FIFO, a directory)."""


class ActionModule(ActionBase):
    TRANSFERS_FILES = False

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        del tmp
        args = dict(self._task.args)
        hosts = self._several_hosts(task_vars or {})
        if hosts:
            result.update(failed=True, msg=_refusal(hosts, self._strategy()))
            return result
        self._warn_of_secret_in_environment()
        src = args.get("src")
        if src is not None:
            if not HAS_LIBRARY:
                result.update(
                    failed=True,
                    msg="src: is read on the controller, which needs the invite-reconciler "
                    "library in the Python running Ansible (pip install . from a checkout)",
                )
                return result
            paths = [src] if isinstance(src, str) else list(src)
            try:
                sources, problems = self._read(paths)
            except AnsibleError as error:
                result.update(failed=True, msg=str(error))
                return result
            if problems:
                result.update(failed=True, msg="\n".join(str(p) for p in problems))
                return result
            args["src"] = [dict(path=path, text=text) for path, text in sources]
        try:
            with _controller_lock(applies=not self._play_context.check_mode):
                module_result = self._execute_module(
                    module_name=MODULE, module_args=args, task_vars=task_vars
                )
        except LockNotTaken as error:  # an unreachable host stays Ansible's to report
            result.update(failed=True, msg=str(error))
            return result
        _shorten_invocation(module_result)
        result.update(module_result)
        return result

    def _several_hosts(self, task_vars):
        """The play's hosts this task would run for, one after another or at once,
        when there are several and no run_once that holds; None otherwise."""
        if self._task.run_once and not _ignores_run_once(self._strategy()):
            return None
        hosts = task_vars.get("ansible_play_batch") or []
        return list(hosts) if len(hosts) > 1 else None

    def _strategy(self):
        """The play's strategy (free runs a run_once task for every host)."""
        parent = getattr(self._task, "_parent", None)
        while parent is not None:
            play = getattr(parent, "_play", None)
            if play is not None:
                return str(getattr(play, "strategy", "") or "")
            parent = getattr(parent, "_parent", None)
        return ""

    def _warn_of_secret_in_environment(self):
        environment = self._task.environment
        blocks = environment if isinstance(environment, list) else [environment]
        named = {key for block in blocks if isinstance(block, dict) for key in block}.intersection(
            SECRET_VARIABLES
        )
        for name in sorted(named):
            display.warning(
                f"{name} is set with the task's environment keyword, whose values -vvv "
                "shows in the EXEC line of the job log: give the secret as the task's "
                'client_secret option, from Ansible Vault (client_secret: "{{ '
                'vault_reconciler_secret }}"), a no-log value'
            )

    def _found(self, path):
        """``path`` on the controller, as the src of ansible.builtin.copy is found."""
        try:
            return self._find_needle("files", path)
        except AnsibleFileNotFound as error:
            base = self._loader.get_basedir()
            looked = ", ".join(_shown_path(p, base) for p in (error.paths or []))
            raise AnsibleError(
                f"src: {path} was not found on the controller (looked for it at {looked}); "
                "src is read on the controller, relative to the role's or playbook's files "
                "directory, then the playbook's"
            ) from None

    def _read(self, paths):
        """(path shown, text) of each file found under ``paths``, and the problems."""
        found, problems = find_files([self._found(p) for p in paths])
        base = self._loader.get_basedir()
        sources = []
        for file in found:
            shown = _shown_path(str(file), base)
            try:
                data = read_regular(file, MAX_FILE_BYTES)
            except OSError as error:
                raise AnsibleError(f"{shown}: cannot read: {error.strerror}") from None
            except TooLarge:
                raise AnsibleError(
                    f"{shown}: larger than {MAX_FILE_BYTES // 2**20} MiB; "
                    "split it into several files"
                ) from None
            text, file_problems = decode_source(data, shown)
            problems.extend(file_problems)
            if text is not None:
                sources.append((shown, text))
        return sources, problems


def _ignores_run_once(strategy):
    """free and host_pinned run a run_once task for every host (Ansible warns, and runs it)."""
    return strategy.rpartition(".")[2] in ("free", "host_pinned")


def _refusal(hosts, strategy=""):
    shown = ", ".join(str(host) for host in hosts[:HOSTS_SHOWN])
    if len(hosts) > HOSTS_SHOWN:
        shown += f" and {len(hosts) - HOSTS_SHOWN} more"
    said = (
        f"{MODULE} would run for {len(hosts)} hosts of this play ({shown}), each sending "
        "the same writes to the platform, and could e-mail an invitation once per host: "
    )
    if _ignores_run_once(strategy):
        return said + (
            f"the play's strategy, {strategy}, runs even a run_once task for every host; "
            "run it in a play of hosts: localhost (or of the linear strategy, with "
            "run_once: true); nothing was sent"
        )
    return said + (
        "set run_once: true on the task, or run it in a play of hosts: localhost; nothing was sent"
    )


@contextmanager
def _controller_lock(applies):
    """Runs that apply take turns on this controller, whatever their play or fork: a run
    waits for the one applying, then plans what is left. Check mode reads only."""
    if not applies:
        yield
        return
    home = os.path.expanduser(str(getattr(C, "ANSIBLE_HOME", None) or "~/.ansible"))
    path = os.path.join(home, "tmp", LOCK_NAME)
    try:
        os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
        handle = _open_lock(path)
    except OSError as error:
        refusal = _not_a_lock(path, error)
        if refusal:
            raise LockNotTaken(refusal) from None
        # The refusal of several hosts still holds; only concurrent runs are not ordered.
        display.warning(
            f"{MODULE}: cannot open the lock {path} ({error.strerror}): runs on this "
            "controller do not take turns; set ANSIBLE_HOME to a writable directory"
        )
        yield
        return
    try:
        deadline = time.monotonic() + LOCK_WAIT
        said = False
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise LockNotTaken(
                        f"another {MODULE} task has been applying on this controller for "
                        f"more than {LOCK_WAIT:.0f} s (it holds {path}); nothing was sent"
                    ) from None
                if not said:
                    display.vv(f"{MODULE}: waiting for another run applying ({path})")
                    said = True
                time.sleep(0.1)
        yield
    finally:
        os.close(handle)  # the lock goes with it


def _open_lock(path):
    """The lock file, as the library's open_append opens a file (the controller may lack
    the library): a symbolic link is never followed (ELOOP: it could make its target, any
    file this user may create), the open never waits on a FIFO (O_NONBLOCK), and anything
    but a regular file is refused after the open (fstat). Made 0600."""
    flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    handle = os.open(path, flags, 0o600)
    try:
        mode = os.fstat(handle).st_mode
        if not stat.S_ISREG(mode):
            raise OSError(errno.EINVAL, _kind(mode), path)
        os.set_blocking(handle, True)
    except BaseException:
        os.close(handle)
        raise
    return handle


def _kind(mode):
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "a special file"


def _not_a_lock(path, error):
    """The refusal when the lock's path is there but is no regular file; None when the
    open failed for another reason (an unwritable ANSIBLE_HOME: warned of, as before)."""
    try:
        mode = os.lstat(path).st_mode
    except OSError:
        return None
    if stat.S_ISREG(mode):
        return None
    return (
        f"{MODULE}: the lock {path} is {_kind(mode)}, not a regular file: it is neither "
        "followed nor used (a link could make its target, a FIFO would hang the run); "
        "remove it, and the next run makes the lock again; nothing was sent"
    )


def _shown_path(path, base):
    """A file under the playbook's directory by its path from there, as a reviewer knows it."""
    relative = os.path.relpath(path, base)
    return path if relative.startswith(os.pardir) else relative


def _shorten_invocation(module_result):
    """The files' text is not echoed back with -v: their paths stand for them."""
    args = module_result.get("invocation", {}).get("module_args")
    if isinstance(args, dict) and isinstance(args.get("src"), list):
        args["src"] = [read.get("path") if isinstance(read, dict) else read for read in args["src"]]
