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
"""

from __future__ import annotations

import json
import os
import threading
import uuid
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, NamedTuple, Self

from reconciler.api.exceptions import ApiError, PreconditionFailed
from reconciler.apply.audit_path import AuditLogError, open_for_append, write_all
from reconciler.model.values import JsonValue
from reconciler.safetext import escape_json_text, redact_and_escape

# What a write record says of each field it carries: {"before": ..., "after": ...}, as JSON.
WriteFields = Mapping[str, Mapping[str, JsonValue]]

# Longest server message kept in a record: an answer is no place for a novel.
_MAX_MESSAGE = 1000


class Attempt(NamedTuple):
    """A write whose attempt line is on disk; its outcome line will name ``attempt_id``."""

    attempt_id: str
    invite_id: str
    operation: str  # "update" or "resend"


def outcome_of(error: ApiError) -> str:
    """``unknown`` when the request may have been carried out, else ``failed``."""
    return "unknown" if error.outcome_unknown else "failed"


class NoAuditLog:
    """Stands in when no audit log was asked for: writes are sent unrecorded."""

    def attempt(
        self,
        invite_id: str,
        operation: str,
        fields: WriteFields | None = None,
    ) -> Attempt:
        return Attempt("", invite_id, operation)

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
        pass

    def resend_owed(self, invite_id: str, reason: str) -> None:
        pass

    def close(self) -> None:
        pass

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AuditLog(NoAuditLog):
    """An append-only JSON Lines file of write attempts and their outcomes."""

    def __init__(
        self,
        path: str,
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
        self._fd = open_for_append(path)
        self._closed = False

    # -- the write-ahead rule ---------------------------------------------------

    def attempt(
        self,
        invite_id: str,
        operation: str,
        fields: WriteFields | None = None,
    ) -> Attempt:
        attempt = Attempt(uuid.uuid4().hex, redact_and_escape(invite_id), operation)
        self._append(
            {
                "record": "attempt",
                "attempt_id": attempt.attempt_id,
                "time": _now(),
                "invite_id": attempt.invite_id,
                "operation": operation,
                # Given redacted (InviteChange.redacted): redacting here would edit the
                # record of what was sent, which is the files' values as written.
                "fields": fields or {},
                "client_id": self._client_id,
                "plan_hash": self._plan_hash,
            },
            durable=True,
        )
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
        entry: dict[str, Any] = {
            "record": "outcome",
            "attempt_id": attempt.attempt_id,
            "time": _now(),
            "invite_id": attempt.invite_id,
            "operation": attempt.operation,
            "outcome": outcome,
            "http_status": status,
            "request_id": redact_and_escape(request_id) if request_id else None,
            "client_id": self._client_id,
            "plan_hash": self._plan_hash,
        }
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
        self._append(
            {
                "record": "resend_owed",
                "time": _now(),
                "invite_id": redact_and_escape(invite_id),
                "operation": "resend",
                "message": redact_and_escape(reason)[:_MAX_MESSAGE],
                "client_id": self._client_id,
                "plan_hash": self._plan_hash,
            },
            durable=True,
        )

    # -- the file ---------------------------------------------------------------

    def _append(self, entry: dict[str, Any], *, durable: bool) -> None:
        line = escape_json_text(json.dumps(entry, ensure_ascii=False)) + "\n"
        data = line.encode("utf-8")
        try:
            with self._lock:  # one line at a time, even if the kernel writes it in parts
                write_all(self._fd, data)
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
            if self._closed:
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


class AttemptRecorder:
    """The audit records of one write's attempts (``api.http.exchange.AttemptWatch``): an
    attempt line on disk before each attempt leaves, retries included, and an outcome line
    for each that failed. A successful attempt's outcome is the caller's (``settle``), once
    it has checked the answer.

    An outcome that cannot be written is kept in ``audit_error`` (the request has left:
    what happened is still reported); an attempt line that cannot be written raises
    ``AuditLogError``, and that attempt is not sent.
    """

    def __init__(
        self,
        log: NoAuditLog,
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
        self.maybe_done = self.maybe_done or error.outcome_unknown
        self.settle(outcome_of(error), error.status, error.request_id, error.message)

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
) -> AuditLog | NoAuditLog:
    return AuditLog(path, client_id, plan_hash) if path else NoAuditLog()


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
