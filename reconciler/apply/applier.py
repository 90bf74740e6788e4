"""Carry out a plan: one PATCH per changed invite, then its re-send if asked."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from enum import Enum

from reconciler.api.client import ApiClient
from reconciler.api.concurrency import ordered_map
from reconciler.api.exceptions import ApiError, NotSent
from reconciler.api.limiter import Limiter
from reconciler.apply.audit import AuditLog, NoAuditLog
from reconciler.plan.model import RUN_FATAL_ERRORS, InviteChange, Plan


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
    def update_unknown(self) -> bool:
        """The update failed with no answer after it may have reached the server."""
        return self.state is WriteState.FAILED and bool(self.error and self.error.outcome_unknown)

    @property
    def resend_unknown(self) -> bool:
        """The re-send may have reached the server: sending it again could duplicate it."""
        return self.resend_error is not None and self.resend_error.outcome_unknown


@dataclass
class ApplyReport:
    results: list[ChangeResult] = field(default_factory=list)
    stopped_by: str | None = None  # why no new writes were started

    def count(self, state: WriteState) -> int:
        """Results in ``state``; updates of unknown outcome are not counted as FAILED."""
        return sum(1 for r in self.results if r.state is state and not r.update_unknown)

    @property
    def updates_unknown(self) -> int:
        return sum(1 for r in self.results if r.update_unknown)

    @property
    def resend_failures(self) -> int:
        return sum(1 for r in self.results if r.resend_error is not None and not r.resend_unknown)

    @property
    def resends_unknown(self) -> int:
        return sum(1 for r in self.results if r.resend_unknown)

    @property
    def ok(self) -> bool:
        return all(r.state is WriteState.UPDATED and not r.resend_error for r in self.results)


class Applier:
    def __init__(
        self,
        client: ApiClient,
        *,
        parallelism: int | Limiter,
        stop: threading.Event,
        audit: AuditLog | NoAuditLog | None = None,
    ) -> None:
        self._client = client
        self._parallelism = parallelism
        self._stop = stop  # set by an interruption or a run-fatal error
        self._audit = audit or NoAuditLog()
        self._fatal: ApiError | None = None
        self.stop_reason = "interrupted"  # what the report says set ``stop``, if not an error

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
            report.stopped_by = f"{self.stop_reason}; no new writes were started"
        return report

    def _results(self, plan: Plan) -> Iterator[ChangeResult]:
        for change, outcome in ordered_map(
            self._write, plan.changes, self._parallelism, self._stop
        ):
            # NotSent: the run stopped while this write waited for its turn; it never left.
            if not outcome.ran or isinstance(outcome.error, NotSent):
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
            self._audit.audited(
                change.id,
                "update",
                lambda: self._client.update_invite(change.id, change.patch),
                fields,
            )
        except ApiError as error:
            if isinstance(error, RUN_FATAL_ERRORS):
                self._fatal = self._fatal or error
                self._stop.set()
            raise
        result = ChangeResult(change, WriteState.UPDATED)
        # The re-send belongs to this invite's write: an interruption lets it finish.
        if change.resend:
            self._resend(result)
        return result

    def _resend(self, result: ChangeResult) -> None:
        invite_id = result.change.id
        try:
            self._audit.audited(invite_id, "resend", lambda: self._client.resend_invite(invite_id))
        except ApiError as error:
            result.resend_error = error
        else:
            result.resent = True
