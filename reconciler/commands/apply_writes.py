"""An apply's writes, once confirmed: each change through the applier, audited, its line
shown as it ends (on stderr too when stdout is lost), then the summary, and the failures
and the error that stopped the run said once, last."""

from __future__ import annotations

from dataclasses import replace

import click

from reconciler.api.capacity.limiter import Limiter
from reconciler.api.client import ApiClient
from reconciler.api.exceptions import ApiError
from reconciler.apply.applier import (
    Applier,
    ApplyReport,
    ChangeResult,
    ResendOutcome,
    WriteOutcome,
)
from reconciler.apply.audit import AuditLog, AuditLogError, NoAuditLog, open_audit_log
from reconciler.apply.interrupt import GracefulInterrupt
from reconciler.output.apply_text import (
    diverged_advice,
    fatal_short,
    resend_if_updated,
    stored_otherwise_text,
)
from reconciler.output.color import echo_err
from reconciler.output.common import stop_writing_to_stdout
from reconciler.output.failures import (
    RESEND_UNKNOWN_ADVICE,
    SHOWN,
    echo_errors,
    resend_advice,
    what_to_do,
)
from reconciler.output.github import (
    emit,
    invite_error_commands,
)
from reconciler.output.progress import Progress
from reconciler.output.text import TextRenderer
from reconciler.plan.model import FailedInvite, Plan
from reconciler.plan.saved import plan_digest
from reconciler.safetext import plural, redact_and_escape
from reconciler.settings.config import Settings


def apply_changes(
    plan: Plan,
    client: ApiClient,
    settings: Settings,
    limiter: Limiter,
    renderer: TextRenderer,
    github: bool = False,
    done: frozenset[str] = frozenset(),
    left_in_conflict: int = 0,
    summary_on_stderr: bool = False,
) -> int:
    # The log names the plan as reviewed; only its changes not made yet are applied.
    audit = open_audit_log(settings.audit_log, settings.client_id, plan_digest(plan))
    for change in plan.changes:
        if change.id in done:
            click.echo(renderer.already_applied(change))
    plan = replace(plan, changes=[c for c in plan.changes if c.id not in done])
    # Not "failed": a conflict, a diverged value and an unknown re-send are counted here.
    progress = Progress("Applying", len(plan.changes), pace=client.pacer, failed_word="to look at")
    # One stop ends new writes and further retries: an interrupt, a run-fatal error, lost stdout.
    stop = client.stop
    applier = Applier(client, parallelism=limiter, stop=stop, audit=audit)
    stdout_lost = False

    def show(result: ChangeResult) -> None:
        nonlocal stdout_lost
        if result.outcome is not WriteOutcome.NOT_STARTED:
            progress.advance(failed=not result.ok)
        line = renderer.apply_result(result)
        if not stdout_lost:
            try:
                progress.echo(line)
                return
            except OSError as exc:  # `apply | head`, a full disk: stop as an interrupt would
                stdout_lost = True
                stop.set(f"stdout could not be written ({exc.strerror or type(exc).__name__})")
                stop_writing_to_stdout()
        # Every write the server may have received is reported where it can still be read.
        if result.outcome is not WriteOutcome.NOT_STARTED:
            progress.echo(line, err=True)

    try:
        with GracefulInterrupt("writes", stop):
            report = applier.apply(plan, on_result=show)
    finally:
        progress.finish()
        closing = _close(audit)
    report.audit_error = report.audit_error or closing
    report.already_applied = len(done)
    report.left_in_conflict = left_in_conflict
    failures = _failures(plan, report)
    # The error that stopped the run is said once, last; the lines above point at it.
    fatal = [r for r in report.results if _run_fatal(r) is not None]
    if fatal and report.stopped_by is not None:
        first = _run_fatal(fatal[0])
        assert first is not None
        report.stopped_by = (
            f"{fatal_short(first)} (the error at the end); no new writes were started"
        )
    if github:
        # On the entry's line: what the files' author must look at (the plan's own failures
        # were annotated with the plan).
        emit(
            invite_error_commands(
                (f.id, f"{f.message}; {f.advice}" if f.advice else f.message, f.source)
                for f in failures[len(plan.failed) :]
            )
        )
    # With stdout gone, the summary goes where it can still be read; asked about at the
    # terminal with stdout in a file, the person sees how it ended there too.
    summary = renderer.apply_summary(report)
    click.echo(summary, err=stdout_lost)
    if summary_on_stderr and not stdout_lost:
        click.echo(summary, err=True)
    if plan.failed:
        count = len(plan.failed)
        click.echo(
            f"{plural(count, 'invite')} could not be planned (errors above) and "
            f"{'was' if count == 1 else 'were'} left alone.",
            err=stdout_lost,
        )
    fatal_ids = {r.change.id for r in fatal}
    echo_errors(f for f in failures if f.id not in fatal_ids)
    if fatal:
        echo_err(_fatal_line(fatal))
    if report.audit_error is not None:
        raise report.audit_error  # the last line: the log is incomplete, the run failed
    return 0 if report.ok and not plan.failed and not stdout_lost else 1


def _run_fatal(result: ChangeResult) -> ApiError | None:
    """The run-fatal error ``result`` failed with: its write's, or its re-send's refusal."""
    if result.outcome is WriteOutcome.FAILED and result.error is not None:
        return result.error if result.error.run_fatal else None
    error = result.resend_error
    refused = result.resend is ResendOutcome.NOT_RESENT and error is not None
    return error if refused and error is not None and error.run_fatal else None


def _fatal_line(results: list[ChangeResult]) -> str:
    """One line for the error that stopped the run, whichever invites it failed."""
    error = _run_fatal(results[0])
    assert error is not None
    ids = [redact_and_escape(r.change.id) for r in results]
    shown = ", ".join(ids[:SHOWN]) + (f" and {len(ids) - SHOWN} more" if len(ids) > SHOWN else "")
    return (
        f"error: {shown}: {redact_and_escape(str(error))}; "
        f"{what_to_do(error.status, None, error.request_id)}. It stopped the run: no new "
        "writes were started"
    )


def _close(audit: AuditLog | NoAuditLog) -> AuditLogError | None:
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
    invite_id = redact_and_escape(change.id)
    if outcome is WriteOutcome.CONFLICT:
        said = f" ({error})" if error is not None else ""
        reason = (
            f"conflict: changed on the platform since the plan was shown{said}; nothing written"
        )
        status = error.status if error is not None else None
        advice = f"make and review a new plan (`reconcile plan --target {invite_id}`)"
        return [FailedInvite(change.id, change.source, reason, status, advice=advice)]
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
            else f"check with `reconcile plan --target {invite_id}` before applying again"
        )
        reason = f"update unknown: {error}"
        return [FailedInvite(change.id, None, reason, error.status, advice=advice)]
    if error is not None and not outcome.updated:
        return [FailedInvite(change.id, change.source, str(error), error.status, error.request_id)]
    return _resend_failures(result)


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
