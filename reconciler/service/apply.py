"""An apply's writes, once confirmed: each change through the applier, audited, and what
came of them (``Applied``): the report, the failures, the error that stopped the run.

What is shown while it runs is the caller's (``Watch``): the command prints each line as
it ends; the Ansible module watches nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from reconciler.api.exceptions import ApiError
from reconciler.apply.applier import (
    Applier,
    ApplyReport,
    ChangeResult,
    GracefulInterrupt,
    ResendOutcome,
    WriteOutcome,
)
from reconciler.apply.audit import AuditLog, AuditLogError, NoAuditLog, open_audit_log
from reconciler.output.console import RESEND_UNKNOWN_ADVICE, resend_advice
from reconciler.output.text import (
    diverged_advice,
    fatal_short,
    resend_if_updated,
    stored_otherwise_text,
)
from reconciler.plan.model import FailedInvite, InviteChange, Plan
from reconciler.plan.saved import plan_digest
from reconciler.safetext import redact_and_escape
from reconciler.service.online import Service


class Watch:
    """What a caller is told as the writes go; by default, nothing."""

    def started(self, done: list[InviteChange], total: int) -> None:
        """Before the first write: the changes made already, and how many are to make."""

    def result(self, result: ChangeResult) -> None:
        pass

    def ended(self) -> None:
        pass


@dataclass
class Applied:
    """What an apply did."""

    plan: Plan  # the changes applied: those of the plan not made already
    report: ApplyReport
    failures: list[FailedInvite] = field(default_factory=list)  # the plan's, then the writes'
    fatal: list[ChangeResult] = field(default_factory=list)  # failed by the run-fatal error

    @property
    def ok(self) -> bool:
        return self.report.ok and not self.plan.failed


def apply_plan(
    service: Service,
    plan: Plan,
    *,
    done: frozenset[str] = frozenset(),
    left_in_conflict: int = 0,
    watch: Watch | None = None,
) -> Applied:
    """Apply ``plan``'s changes not in ``done`` (made already), each audited.

    An audit log that could not be written is the report's ``audit_error``: the caller
    raises it once it has said what was done.
    """
    watch = watch or Watch()
    settings, client = service.settings, service.client
    # The log names the plan as reviewed; only its changes not made yet are applied.
    audit = open_audit_log(settings.audit_log, settings.client_id, plan_digest(plan))
    made = [c for c in plan.changes if c.id in done]
    plan = replace(plan, changes=[c for c in plan.changes if c.id not in done])
    watch.started(made, len(plan.changes))
    # One stop ends new writes and further retries: an interrupt, a run-fatal error, lost stdout.
    applier = Applier(client, parallelism=service.limiter, stop=client.stop, audit=audit)
    try:
        with GracefulInterrupt("writes", client.stop):
            report = applier.apply(plan, on_result=watch.result)
    finally:
        watch.ended()
        closing = close_audit(audit)
    report.audit_error = report.audit_error or closing
    report.already_applied = len(done)
    report.left_in_conflict = left_in_conflict
    return Applied(plan, report, _failures(plan, report), _fatal(report))


def _fatal(report: ApplyReport) -> list[ChangeResult]:
    """The results failed by a run-fatal error; the stop, if one, said as that error."""
    fatal = [r for r in report.results if run_fatal(r) is not None]
    if fatal and report.stopped_by is not None:
        first = run_fatal(fatal[0])
        assert first is not None
        report.stopped_by = (
            f"{fatal_short(first)} (the error at the end); no new writes were started"
        )
    return fatal


def run_fatal(result: ChangeResult) -> ApiError | None:
    """The run-fatal error ``result`` failed with: its write's, or its re-send's refusal."""
    if result.outcome is WriteOutcome.FAILED and result.error is not None:
        return result.error if result.error.run_fatal else None
    error = result.resend_error
    refused = result.resend is ResendOutcome.NOT_RESENT and error is not None
    return error if refused and error is not None and error.run_fatal else None


def close_audit(audit: AuditLog | NoAuditLog) -> AuditLogError | None:
    """Close the log; a failure is reported after the results, never instead of them."""
    try:
        audit.close()
    except AuditLogError as error:
        return error
    return None


def _failures(plan: Plan, report: ApplyReport) -> list[FailedInvite]:
    """Invites not planned, writes that failed, conflicts, diverged, re-sends not made."""
    failed = list(plan.failed)
    for result in report.results:
        failed.extend(_result_failures(result))
    return failed


def _result_failures(result: ChangeResult) -> list[FailedInvite]:
    change, error, outcome = result.change, result.error, result.outcome
    if outcome is WriteOutcome.CONFLICT:
        return [_conflict(change, error)]
    if outcome is WriteOutcome.DIVERGED:
        found = [
            FailedInvite(
                change.id,
                change.source,
                f"diverged: {stored_otherwise_text(part)}",
                advice=diverged_advice(change),
            )
            for part in result.diverged
        ]
        return found + _resend_failures(result)
    if error is not None and outcome is WriteOutcome.UPDATE_UNKNOWN:
        advice = (
            resend_if_updated(change)
            if change.resend
            else f"check with `reconcile plan --target {redact_and_escape(change.id)}` "
            "before applying again"
        )
        reason = f"update unknown: {error}"
        return [FailedInvite(change.id, None, reason, error.status, advice=advice)]
    if error is not None and not outcome.updated:
        return [FailedInvite(change.id, change.source, str(error), error.status, error.request_id)]
    return _resend_failures(result)


def _conflict(change: InviteChange, error: ApiError | None) -> FailedInvite:
    said = f" ({error})" if error is not None else ""
    reason = f"conflict: changed on the platform since the plan was shown{said}; nothing written"
    status = error.status if error is not None else None
    advice = (
        f"make and review a new plan (`reconcile plan --target {redact_and_escape(change.id)}`)"
    )
    return FailedInvite(change.id, change.source, reason, status, advice=advice)


def _resend_failures(result: ChangeResult) -> list[FailedInvite]:
    change, error, resend = result.change, result.resend_error, result.resend
    status = error.status if error is not None else None
    if resend is ResendOutcome.RESEND_UNKNOWN:
        # The entry is not what to fix: no source. Never advice to send it again.
        reason = f"updated; {error}"
        return [FailedInvite(change.id, None, reason, status, advice=RESEND_UNKNOWN_ADVICE)]
    if resend is ResendOutcome.NOT_RESENT:
        reason = f"updated, but not re-sent: {error}"
        return [FailedInvite(change.id, None, reason, status, advice=resend_advice(change.id))]
    if resend is ResendOutcome.OWED:
        reason = f"re-send owed: {result.owed}"
        return [FailedInvite(change.id, None, reason, None, advice=resend_advice(change.id))]
    return []
