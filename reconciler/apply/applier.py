"""Carry out a plan: one PATCH per changed invite, then its re-send if asked."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from reconciler.api.client import ApiClient, Receipt
from reconciler.api.concurrency import ordered_map
from reconciler.api.exceptions import ApiError, NotSent
from reconciler.api.limiter import Limiter
from reconciler.apply.audit import AuditLog, AuditLogError, NoAuditLog, WriteFields, outcome_of
from reconciler.model.outcome import Done, Failed, NotRun
from reconciler.model.values import to_json
from reconciler.plan.changes import InviteChange
from reconciler.plan.model import Plan
from reconciler.stop import Stop


class WriteOutcome(Enum):
    """What one invite's write ended as; each result carries exactly one."""

    UPDATED = "updated"  # no re-send was asked for
    RESENT = "re-sent"  # updated, then the invitation re-sent
    NOT_RESENT = "not re-sent"  # updated, but the re-send failed
    # Updated, but the re-send failed with no answer after it may have reached
    # the server: sending it again could duplicate the invitation.
    RESEND_UNKNOWN = "re-send unknown"
    FAILED = "failed"
    # The update failed with no answer after it may have reached the server:
    # not "failed", which would invite a blind retry (the audit log says unknown too).
    UPDATE_UNKNOWN = "update unknown"
    NOT_STARTED = "not started"  # the run stopped before this write left

    @property
    def resend_not_made(self) -> bool:
        """A re-send was due and certainly not made: `reconcile resend ID` makes it."""
        return self is WriteOutcome.NOT_RESENT

    @property
    def updated(self) -> bool:
        """The update was applied, whatever became of the re-send."""
        return self in _UPDATED

    @property
    def ok(self) -> bool:
        """Everything asked of this invite was done."""
        return self is WriteOutcome.UPDATED or self is WriteOutcome.RESENT


_UPDATED = frozenset(
    {
        WriteOutcome.UPDATED,
        WriteOutcome.RESENT,
        WriteOutcome.NOT_RESENT,
        WriteOutcome.RESEND_UNKNOWN,
    }
)


@dataclass(frozen=True)
class ChangeResult:
    change: InviteChange
    outcome: WriteOutcome
    # What went wrong, for the outcomes that report an error: the update's for
    # FAILED and UPDATE_UNKNOWN, the re-send's for NOT_RESENT and RESEND_UNKNOWN.
    error: ApiError | None = None


@dataclass
class ApplyReport:
    results: list[ChangeResult] = field(default_factory=list)
    stopped_by: str | None = None  # why no new writes were started
    # The audit log failed during the run: reported after the results, and the run fails.
    audit_error: AuditLogError | None = None
    already_applied: int = 0  # changes of a saved plan made by an earlier run: not sent again

    @property
    def resends_not_made(self) -> list[ChangeResult]:
        """Updates made whose due re-send certainly was not: each needs `reconcile resend`."""
        return [r for r in self.results if r.change.resend and r.outcome.resend_not_made]

    @property
    def resends_in_doubt(self) -> list[ChangeResult]:
        """Updates of unknown outcome that were to re-send: the re-send was not made."""
        return [
            r for r in self.results if r.change.resend and r.outcome is WriteOutcome.UPDATE_UNKNOWN
        ]

    def count(self, *outcomes: WriteOutcome) -> int:
        """Results that ended as any of ``outcomes``."""
        return sum(1 for r in self.results if r.outcome in outcomes)

    @property
    def updated(self) -> int:
        """Updates applied, whatever became of their re-sends."""
        return sum(1 for r in self.results if r.outcome.updated)

    @property
    def ok(self) -> bool:
        return self.audit_error is None and all(r.outcome.ok for r in self.results)


class Applier:
    def __init__(
        self,
        client: ApiClient,
        *,
        parallelism: int | Limiter,
        stop: Stop,
        audit: AuditLog | NoAuditLog | None = None,
    ) -> None:
        self._client = client
        self._parallelism = parallelism
        self._stop = stop  # set by an interruption, a run-fatal error or lost stdout
        self._audit = audit or NoAuditLog()
        self._fatal: ApiError | None = None
        self._audit_error: AuditLogError | None = None
        self._lock = threading.Lock()

    def apply(
        self, plan: Plan, on_result: Callable[[ChangeResult], None] | None = None
    ) -> ApplyReport:
        report = ApplyReport()
        for result in self._results(plan):
            report.results.append(result)
            if on_result:
                on_result(result)
        report.audit_error = self._audit_error
        if self._fatal is not None:
            report.stopped_by = f"{self._fatal}; no new writes were started"
        elif self._stop.is_set() and report.count(WriteOutcome.NOT_STARTED):
            report.stopped_by = f"{self._stop.reason}; no new writes were started"
        return report

    # -- the audit log, written ahead ---------------------------------------------

    def _audited(
        self,
        invite_id: str,
        operation: str,
        send: Callable[[], Receipt],
        fields: WriteFields | None = None,
    ) -> Receipt:
        """Attempt line, ``send()``, outcome line. An AuditLogError means nothing was sent.

        Once the request has left, a log that cannot take the outcome no longer changes
        what happened: the result is still returned (or raised) so that it is reported,
        and the run stops starting writes.
        """
        attempt = self._audit.attempt(invite_id, operation, fields)
        try:
            receipt = send()
        except ApiError as error:
            self._record(attempt, outcome_of(error), error.status, error.request_id, error.message)
            raise
        self._record(attempt, "ok", receipt.status, receipt.request_id)
        return receipt

    def _record(self, attempt: Any, *outcome: Any) -> None:
        try:
            self._audit.outcome(attempt, *outcome)
        except AuditLogError as error:
            self._audit_failed(error)

    def _audit_failed(self, error: AuditLogError) -> None:
        with self._lock:
            self._audit_error = self._audit_error or error
        self._stop.set("the audit log could not be written")

    def _results(self, plan: Plan) -> Iterator[ChangeResult]:
        for change, outcome in ordered_map(
            self._write, plan.changes, self._parallelism, self._stop
        ):
            match outcome:
                case Done(result):
                    yield result
                # NotSent: the run stopped while this write waited for its turn; it never left.
                case NotRun() | Failed(NotSent()):
                    yield ChangeResult(change, WriteOutcome.NOT_STARTED)
                case Failed(error):
                    unknown = error.outcome_unknown
                    failed = WriteOutcome.UPDATE_UNKNOWN if unknown else WriteOutcome.FAILED
                    yield ChangeResult(change, failed, error)

    def _write(self, change: InviteChange) -> ChangeResult:
        if self._stop.is_set():
            return ChangeResult(change, WriteOutcome.NOT_STARTED)
        # The audit record of what is sent: the files' values as sent, the server's redacted.
        redacted = change.redacted()
        fields = {
            f: {"before": to_json(redacted.before.get(f)), "after": to_json(v)}
            for f, v in redacted.patch.items()
        }
        try:
            self._audited(
                change.id,
                "update",
                lambda: self._client.update_invite(change.id, change.patch),
                fields,
            )
        except AuditLogError as error:  # the attempt line: the request never left
            self._audit_failed(error)
            return ChangeResult(change, WriteOutcome.NOT_STARTED)
        except ApiError as error:
            if error.run_fatal:
                self._fatal = self._fatal or error
                self._stop.set(str(error))
            raise
        # The re-send belongs to this invite's write: an interruption lets it finish.
        return self._resend(change) if change.resend else ChangeResult(change, WriteOutcome.UPDATED)

    def _resend(self, change: InviteChange) -> ChangeResult:
        invite_id = change.id
        try:
            self._audited(invite_id, "resend", lambda: self._client.resend_invite(invite_id))
        except AuditLogError as error:  # no e-mail goes out without its attempt line
            self._audit_failed(error)
            unsent = NotSent(
                "not sent: the audit log could not be written, and no write is sent "
                "without its audit record"
            )
            return ChangeResult(change, WriteOutcome.NOT_RESENT, unsent)
        except ApiError as error:
            unknown = error.outcome_unknown
            failed = WriteOutcome.RESEND_UNKNOWN if unknown else WriteOutcome.NOT_RESENT
            return ChangeResult(change, failed, error)
        return ChangeResult(change, WriteOutcome.RESENT)
