"""Carry out a plan: one PATCH per changed invite, then its re-send if asked."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from enum import Enum

from reconciler.api.client import ApiClient, Receipt
from reconciler.api.errors import ApiError
from reconciler.audit import AuditLog
from reconciler.concurrency import ordered_map
from reconciler.plan import RUN_FATAL_ERRORS, InviteChange, Plan


class WriteState(Enum):
    UPDATED = "updated"
    FAILED = "failed"
    NOT_STARTED = "not started"


@dataclass
class ChangeResult:
    change: InviteChange
    state: WriteState
    error: ApiError | None = None
    resent: bool = False
    resend_error: ApiError | None = None

    @property
    def resend_unknown(self) -> bool:
        """The re-send may have reached the server: sending it again could duplicate it."""
        return self.resend_error is not None and self.resend_error.outcome_unknown


@dataclass
class ApplyReport:
    results: list[ChangeResult] = field(default_factory=list)
    interrupted: bool = False
    stopped_by: str | None = None  # why no new writes were started

    def count(self, state: WriteState) -> int:
        return sum(1 for r in self.results if r.state is state)

    @property
    def resend_failures(self) -> int:
        return sum(1 for r in self.results if r.resend_error is not None and not r.resend_unknown)

    @property
    def resends_unknown(self) -> int:
        return sum(1 for r in self.results if r.resend_unknown)

    @property
    def ok(self) -> bool:
        return all(r.state is WriteState.UPDATED and not r.resend_error for r in self.results)


class _NotStarted(Exception):
    pass


class Applier:
    def __init__(
        self,
        client: ApiClient,
        *,
        parallelism: int,
        stop: threading.Event,
        audit: AuditLog | None = None,
    ) -> None:
        self._client = client
        self._parallelism = parallelism
        self._stop = stop  # set by an interruption or a run-fatal error
        self._audit = audit
        self._fatal: ApiError | None = None

    def apply(
        self, plan: Plan, on_result: Callable[[ChangeResult], None] | None = None
    ) -> ApplyReport:
        report = ApplyReport()
        for result in self._results(plan):
            report.results.append(result)
            if on_result:
                on_result(result)
        if self._fatal is not None:
            report.stopped_by = f"{self._fatal}; no new writes were started"
        elif self._stop.is_set() and report.count(WriteState.NOT_STARTED):
            report.interrupted = True
            report.stopped_by = "interrupted; no new writes were started"
        return report

    def _results(self, plan: Plan) -> Iterator[ChangeResult]:
        for change, outcome in ordered_map(
            self._write, plan.changes, self._parallelism, self._stop
        ):
            if not outcome.ran:
                yield ChangeResult(change, WriteState.NOT_STARTED)
            elif outcome.error is not None:
                yield ChangeResult(change, WriteState.FAILED, error=outcome.error)
            else:
                assert outcome.value is not None
                yield outcome.value

    def _write(self, change: InviteChange) -> ChangeResult:
        if self._stop.is_set():
            return ChangeResult(change, WriteState.NOT_STARTED)
        fields = {f: {"before": change.before.get(f), "after": v} for f, v in change.patch.items()}
        try:
            receipt = self._client.update_invite(change.id, change.patch)
        except ApiError as error:
            self._record(change.id, "update", "failed", fields, error)
            if isinstance(error, RUN_FATAL_ERRORS):
                self._fatal = self._fatal or error
                self._stop.set()
            raise
        self._record(change.id, "update", "ok", fields, receipt=receipt)
        result = ChangeResult(change, WriteState.UPDATED)
        # The re-send belongs to this invite's write: an interruption lets it finish.
        if change.resend:
            try:
                receipt = self._client.resend_invite(change.id)
            except ApiError as error:
                result.resend_error = error
                outcome = "unknown" if result.resend_unknown else "failed"
                self._record(change.id, "resend", outcome, None, error)
            else:
                self._record(change.id, "resend", "ok", receipt=receipt)
                result.resent = True
        return result

    def _record(
        self,
        invite_id: str,
        operation: str,
        outcome: str,
        fields: dict | None = None,
        error: ApiError | None = None,
        receipt: Receipt | None = None,
    ) -> None:
        if self._audit is None:
            return
        source = error or receipt
        self._audit.record(
            invite_id=invite_id,
            operation=operation,
            outcome=outcome,
            fields=fields,
            status=source.status if source else None,
            request_id=source.request_id if source else None,
            message=error.message if error else None,
        )
