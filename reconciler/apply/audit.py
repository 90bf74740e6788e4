"""The audit log, written ahead: a line on disk before each write request leaves.

Each write is two JSON lines. The ``attempt`` line (what is about to be sent)
is appended and synced to disk before the request leaves; the ``outcome`` line
(``ok``, ``failed`` or ``unknown``, with the HTTP status and the server's
requestId) follows once the answer is known, naming the attempt it answers.
After a crash, even ``kill -9``, every write the server may have received has
at least its attempt line, and an attempt with no outcome means "may or may
not have happened".

Every record is one ``write()`` of one complete line on a file opened with
``O_APPEND``: workers in several threads never interleave, and a crash leaves
whole lines behind. Should an earlier crash (a power cut, a full disk) have
left a torn last line, the next run starts on a new line so that its own
records stay readable.

Where the log may be: the path usually sits in the checkout (`--audit-log audit.jsonl` in
CI), and what is in the checkout is what a pull request made. A committed symbolic link
would point the appends at any file the job can write (`~/.bashrc`, another job's
output); a committed regular file would hand the log records the pull request wrote,
which then read as the tool's own. So the path is checked before it is opened, never
through a link, a committed file or out of the repository it is written in.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import threading
import uuid
from collections.abc import Mapping
from typing import Any, NamedTuple

from reconciler.api.exceptions import ApiError, GatewayForbidden, PreconditionFailed
from reconciler.errors import ReconcilerError
from reconciler.files import open_append
from reconciler.git import outside_repository, repository_top, try_run
from reconciler.model.invite import JsonValue, utc_now
from reconciler.safetext import escape, escape_json_text, redact_and_escape

# What a write record says of each field it carries: {"before": ..., "after": ...}, as JSON.
WriteFields = Mapping[str, Mapping[str, JsonValue]]

# Longest server message kept in a record: an answer is no place for a novel.
_MAX_MESSAGE = 1000


class AuditLogError(ReconcilerError):
    """The audit log cannot be written: no write may start without its record."""


class Attempt(NamedTuple):
    """A write whose attempt line is on disk; its outcome line will name ``attempt_id``."""

    attempt_id: str
    invite_id: str
    operation: str  # "update" or "resend"


def outcome_of(error: ApiError) -> str:
    """``unknown`` when the request may have been carried out, else ``failed``."""
    return "unknown" if error.outcome_unknown else "failed"


def said(error: ApiError) -> tuple[str, int | None, str | None, str]:
    """What the outcome line of a write that failed with ``error`` says (``settle``'s)."""
    return outcome_of(error), error.status, error.request_id, error.message


class AuditLog:
    """An append-only JSON Lines file of write attempts and their outcomes (``path``
    None: no file, every record dropped; see ``NoAuditLog``)."""

    def __init__(
        self,
        path: str | None,
        client_id: str | None,
        plan_hash: str | None = None,
        *,
        sync: bool = True,
    ) -> None:
        self.path = path
        self._client_id = redact_and_escape(client_id) if client_id else None
        self._plan_hash = plan_hash  # None for writes made by hand (`resend`)
        self._sync = sync  # False only to measure what syncing costs
        self._lock = threading.Lock()
        self._fd = None if path is None else _open_log(path)
        self._closed = False

    # -- the write-ahead rule ---------------------------------------------------

    def attempt(
        self,
        invite_id: str,
        operation: str,
        fields: WriteFields | None = None,
    ) -> Attempt:
        attempt = Attempt(uuid.uuid4().hex, redact_and_escape(invite_id), operation)
        # Given redacted (InviteChange.redacted): redacting here would edit the record of
        # what was sent, which is the files' values as written.
        record = self._record("attempt", *attempt, fields=fields or {})
        self._append(record, durable=True)
        return attempt

    def outcome(
        self,
        attempt: Attempt,
        outcome: str,
        status: int | None = None,
        request_id: str | None = None,
        message: str | None = None,
        *,
        stored: Mapping[str, JsonValue] | None = None,
        resend: str | None = None,
    ) -> None:
        """``stored``: a `diverged` update's fields as the platform stored them (redacted).
        ``resend``: "due" on an update after which a re-send is owed until its own
        attempt says otherwise (a crash between the two leaves the fact here)."""
        entry = self._record(
            "outcome",
            *attempt,
            outcome=outcome,
            http_status=status,
            request_id=redact_and_escape(request_id) if request_id else None,
        )
        if message:
            entry["message"] = redact_and_escape(message)[:_MAX_MESSAGE]
        if stored is not None:
            entry["stored"] = dict(stored)
        if resend is not None:
            entry["resend"] = resend
        # Written, not synced: the next attempt's sync (or close) carries it to disk. A power
        # cut before then loses only the news that a write ended, which the log then reads as
        # unknown: never a write without its record. An update after which a re-send is
        # due is synced: that an e-mail is owed must survive whatever stops the run next.
        self._append(entry, durable=resend is not None)

    def resend_owed(self, invite_id: str, reason: str) -> None:
        """A re-send that was due after an update and never attempted: `reconcile resend`."""
        message = redact_and_escape(reason)[:_MAX_MESSAGE]
        owed = self._record(
            "resend_owed", None, redact_and_escape(invite_id), "resend", message=message
        )
        self._append(owed, durable=True)

    def _record(
        self, record: str, attempt_id: str | None, invite_id: str, operation: str, **said: Any
    ) -> dict[str, Any]:
        """A record of a write (the attempt ``attempt_id``, when it has one) saying ``said``."""
        entry: dict[str, Any] = {"record": record}
        if attempt_id is not None:
            entry["attempt_id"] = attempt_id
        entry.update(time=utc_now(), invite_id=invite_id, operation=operation, **said)
        return {**entry, "client_id": self._client_id, "plan_hash": self._plan_hash}

    # -- the file ---------------------------------------------------------------

    def _append(self, entry: dict[str, Any], *, durable: bool) -> None:
        if self._fd is None:
            return
        line = escape_json_text(json.dumps(entry, ensure_ascii=False)) + "\n"
        data = line.encode("utf-8")
        try:
            with self._lock:  # one line at a time, even if the kernel writes it in parts
                _write_whole(self._fd, data)
            if durable and self._sync:
                # Outside the lock: concurrent workers' syncs can share one disk flush.
                os.fsync(self._fd)
        except OSError as exc:
            raise AuditLogError(
                f"{self.path}: cannot write the audit log ({exc.strerror}); no new writes "
                "are started without their audit record"
            ) from None

    def close(self) -> None:
        with self._lock:
            if self._fd is None or self._closed:
                return
            self._closed = True
            try:
                if self._sync:
                    os.fsync(self._fd)  # the last outcomes, which no attempt followed
            except OSError as exc:
                message = f"{self.path}: cannot sync the audit log: {exc.strerror}"
                raise AuditLogError(message) from None
            finally:
                os.close(self._fd)


class NoAuditLog(AuditLog):
    """Stands in when no audit log was asked for: writes are sent unrecorded."""

    def __init__(self) -> None:
        super().__init__(None, None)


class AttemptRecorder:
    """The audit records of one write's attempts (``api.exchange.AttemptWatch``): an
    attempt line on disk before each attempt leaves, retries included, and an outcome line
    for each that failed. A successful attempt's outcome is the caller's (``settle``), once
    it has checked the answer.

    An outcome that cannot be written is kept in ``audit_error`` (the request has left:
    what happened is still reported); an attempt line that cannot be written raises
    ``AuditLogError``, and that attempt is not sent.
    """

    def __init__(
        self,
        log: AuditLog,
        invite_id: str,
        operation: str,
        fields: WriteFields | None = None,
    ) -> None:
        self._log = log
        self._invite_id = invite_id
        self._operation = operation
        self._fields = fields
        self._pending: Attempt | None = None
        self.sent = 0  # attempts recorded, and so sent
        # An attempt failed after it may have been carried out (a 504, a timeout).
        self.maybe_done = False
        self.audit_error: AuditLogError | None = None

    def before(self) -> None:
        self._pending = self._log.attempt(self._invite_id, self._operation, self._fields)
        self.sent += 1

    def failed(self, error: ApiError) -> None:
        if isinstance(error, PreconditionFailed) and self.maybe_done:
            # If-Match refused a retry after an attempt that may have been written: that
            # write changed the ETag. The caller reads the invite to tell, and settles it.
            return
        if (
            isinstance(error, GatewayForbidden)
            and error.outcome_unknown
            and (self._operation == "update")
        ):
            # A gateway's 403 that was no block on the client, to a PATCH: the caller
            # reads the invite to tell whether it was written, and settles it.
            self.maybe_done = True
            return
        self.maybe_done = self.maybe_done or error.outcome_unknown
        self.settle(*said(error))

    def settle(
        self,
        outcome: str,
        status: int | None = None,
        request_id: str | None = None,
        message: str | None = None,
        **extra: Any,
    ) -> None:
        """The outcome of the last attempt, if it has none yet."""
        attempt, self._pending = self._pending, None
        if attempt is None:
            return
        try:
            self._log.outcome(attempt, outcome, status, request_id, message, **extra)
        except AuditLogError as error:
            self.audit_error = self.audit_error or error


def open_audit_log(
    path: str | None, client_id: str | None, plan_hash: str | None = None
) -> AuditLog:
    return AuditLog(path, client_id, plan_hash) if path else NoAuditLog()


# -- where the log may be, and its file ----------------------------------------------------


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


def _open_log(path: str) -> int:
    """The audit log opened to append (``0600``), as a file descriptor: a new file's
    directory synced, a torn last line ended. AuditLogError if it may not be."""
    problem = audit_path_problem(path)  # a link or a committed file: refused, never followed
    if problem:
        raise AuditLogError(f"{escape(path)}: cannot open the audit log: {problem}")
    try:
        fd = open_append(path)  # a FIFO, a device or a symbolic link: refused at once
    except OSError as exc:
        raise AuditLogError(f"{path}: cannot open the audit log: {exc.strerror}") from None
    try:
        size = os.fstat(fd).st_size
        if size == 0:  # a new file: its name must survive a power cut too
            directory = os.open(os.path.dirname(os.path.abspath(path)), os.O_RDONLY)
            try:
                os.fsync(directory)
            finally:
                os.close(directory)
        elif os.pread(fd, 1, size - 1) != b"\n":
            _write_whole(fd, b"\n")  # after a torn line: our records start on their own line
    except OSError as exc:
        os.close(fd)
        raise AuditLogError(f"{path}: cannot prepare the audit log: {exc.strerror}") from None
    return fd


def _write_whole(fd: int, data: bytes) -> None:
    """All of ``data``, however many ``write`` calls it takes."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
