"""`reconcile apply`: compute the plan (or load a saved one), confirm, apply it.

The writes are the service's (``service.apply.apply_plan``); this module shows each
line as it ends (on stderr too when stdout is lost), then the summary, and the failures
and the error that stopped the run said once, last.
"""

from __future__ import annotations

import sys

import click

from reconciler.apply.applier import ApplyReport, ChangeResult, WriteOutcome
from reconciler.commands.options import (
    RUN_ENV,
    FilePath,
    RunOptions,
    ask_first,
    audit_log_option,
    auto_approve_option,
    confirm,
    run_options,
    settings_help,
)
from reconciler.files import refuse_input
from reconciler.output import Stdout, echo_chunks
from reconciler.output.ci import emit, github_enabled, invite_error_commands, report_plan
from reconciler.output.console import (
    SHOWN,
    Progress,
    echo_err,
    echo_errors,
    use_color,
    what_to_do,
)
from reconciler.output.text import TextRenderer
from reconciler.plan.model import FailedInvite, InviteChange, Plan
from reconciler.plan.saved import load_signed_plan
from reconciler.safetext import plural, redact_and_escape
from reconciler.service.apply import Applied, Watch, apply_plan, run_fatal
from reconciler.service.offline import check_writable, read_desired, run_inputs
from reconciler.service.online import Service, open_service, signing_secret


@click.command(
    epilog=settings_help(
        api=True,
        reads_paths=True,
        extra=("max_changes", "max_resends", "audit_log"),
        other_env=RUN_ENV,
    )
)
@run_options("apply")
@click.option(
    "--plan",
    "plan_file",
    type=FilePath(),
    help="Apply exactly this saved plan (from `plan --out`), without asking.",
)
@auto_approve_option
@audit_log_option
@click.option(
    "--force-conflicts",
    is_flag=True,
    help="With --changed-since: also write fields changed on the platform since REF "
    "(conflicts), which apply otherwise leaves alone.",
)
def apply(
    run: RunOptions,
    plan_file: str | None,
    auto_approve: bool,
    audit_log: str | None,
    force_conflicts: bool,
) -> int:
    """Apply the changes the plan shows, sending only the fields that differ."""
    picks = run.targets or run.excludes or run.changed_since or run.changed_since_applied
    if plan_file and (run.paths or picks):
        raise click.UsageError(
            "--plan applies a saved plan as it is; do not give PATH, --target, --exclude, "
            "--changed-since or --changed-since-applied"
        )
    selection = run.selection("apply")
    # Before anything is read: nobody could answer the question (a saved plan asks none).
    on_stderr = False if plan_file or auto_approve else ask_first(action="apply", instead=_INSTEAD)
    github = github_enabled(run.annotations)
    settings = run.settings(audit_log=audit_log)
    check_writable(settings.audit_log, "open the audit log")
    if plan_file:  # checked against its limits, which needs no request
        reviewed = load_signed_plan(plan_file, signing_secret(settings, run.sandbox))
        reviewed.raise_if_unsafe(settings.max_changes, settings.max_resends)
    else:
        inputs = run_inputs(run.config_file, run.paths or settings.paths)
        refuse_input(settings.audit_log, inputs, "--audit-log", "the audit log")
        state = read_desired(settings, run.paths, selection)
    renderer = TextRenderer(color=use_color(run.color))
    with open_service(settings, run.sandbox) as service:
        # done: the ids of a saved plan's changes made already, which are not made again.
        the_plan, done = (
            (reviewed, service.check_saved(reviewed, plan_file))
            if plan_file
            else (service.plan(state), frozenset[str]())
        )
        echo_chunks(renderer.chunks(the_plan))
        report_plan(the_plan, github)
        in_conflict = [] if force_conflicts else the_plan.conflicts
        if in_conflict:
            the_plan = the_plan.without_conflicts()
        if not the_plan.has_changes:
            return _nothing_to_apply(the_plan, renderer, len(in_conflict))
        service.refuse_narrow_grant()  # before any write, and before asking
        if not plan_file:
            the_plan.raise_if_unsafe(settings.max_changes, settings.max_resends)
            _ask(the_plan, run.color, on_stderr, auto_approve)
        shown = _Shown(renderer, service)
        applied = apply_plan(
            service, the_plan, done=done, left_in_conflict=len(in_conflict), watch=shown
        )
        return _closing(_report_applied(applied, shown, github, on_stderr), len(in_conflict))


def _closing(code: int, count: int) -> int:
    """``code``, or 1 with the invites left in conflict said last: an error closes the log."""
    if not count:
        return code
    echo_err(
        f"error: {plural(count, 'invite')} in conflict (changed on the platform since "
        "--changed-since REF) left alone, nothing written to "
        f"{'it' if count == 1 else 'them'}; bring the files in line with the platform "
        "(`reconcile adopt --target ID`), or pass --force-conflicts to write the files' "
        "values anyway"
    )
    return 1


def _nothing_to_apply(plan: Plan, renderer: TextRenderer, in_conflict: int) -> int:
    if in_conflict:  # apply's summary counts them apart, as every summary does
        click.echo(renderer.apply_summary(ApplyReport(left_in_conflict=in_conflict)))
    echo_errors(plan.failed)
    return _closing(1 if plan.failed else 0, in_conflict)


def _ask(plan: Plan, color: str, on_stderr: bool, auto_approve: bool) -> None:
    if on_stderr:  # what the question is about, where the person can read it
        shown = use_color(color, stream=sys.stderr)
        echo_chunks(TextRenderer(color=shown).chunks(plan), err=True, color=shown)
    if not auto_approve:
        confirm("Apply these changes?", action="apply", instead=_INSTEAD)


_INSTEAD = (
    ", or save the plan with `reconcile plan --out FILE`, read it (`reconcile show FILE`) "
    "and apply it with `reconcile apply --plan FILE`"
)


class _Shown(Watch):
    """The writes' lines as each ends, on stdout; once stdout is lost (`apply | head`, a
    full disk) the run stops as an interrupt would, and every write the server may have
    received is reported on stderr."""

    def __init__(self, renderer: TextRenderer, service: Service) -> None:
        self.renderer = renderer
        self._client = service.client
        self._progress: Progress | None = None
        self.stdout = Stdout(self._client.stop.set)

    def started(self, done: list[InviteChange], total: int) -> None:
        for change in done:
            click.echo(self.renderer.already_applied(change))
        # Not "failed": a conflict, a diverged value and an unknown re-send are counted here.
        self._progress = Progress(
            "Applying", total, pace=self._client.pacer, failed_word="to look at"
        )

    def result(self, result: ChangeResult) -> None:
        progress = self._progress
        assert progress is not None
        if result.outcome is not WriteOutcome.NOT_STARTED:
            progress.advance(failed=not result.ok)
        line = self.renderer.apply_result(result)
        if self.stdout.echo(line, progress.echo):
            return
        if result.outcome is not WriteOutcome.NOT_STARTED:
            progress.echo(line, err=True)

    def ended(self) -> None:
        if self._progress is not None:
            self._progress.finish()


def _report_applied(applied: Applied, shown: _Shown, github: bool, summary_on_stderr: bool) -> int:
    """The summary, then the failures, then the error that stopped the run, said once."""
    plan, report, failures, fatal = applied.plan, applied.report, applied.failures, applied.fatal
    lost = shown.stdout.lost
    if github:
        _annotate(failures[len(plan.failed) :])
    # With stdout gone, the summary goes where it can still be read; asked about at the
    # terminal with stdout in a file, the person sees how it ended there too.
    summary = shown.renderer.apply_summary(report)
    click.echo(summary, err=lost)
    if summary_on_stderr and not lost:
        click.echo(summary, err=True)
    if plan.failed:
        count = len(plan.failed)
        click.echo(
            f"{plural(count, 'invite')} could not be planned (errors above) and "
            f"{'was' if count == 1 else 'were'} left alone.",
            err=lost,
        )
    _say_errors(failures, fatal)
    if report.audit_error is not None:
        raise report.audit_error  # the last line: the log is incomplete, the run failed
    return 0 if applied.ok and not lost else 1


def _say_errors(failures: list[FailedInvite], fatal: list[ChangeResult]) -> None:
    """Each failure's line; the error that stopped the run once, for every invite it failed."""
    fatal_ids = {r.change.id for r in fatal}
    echo_errors(f for f in failures if f.id not in fatal_ids)
    if not fatal:
        return
    # One line for the error that stopped the run, whichever invites it failed.
    error = run_fatal(fatal[0])
    assert error is not None
    ids = [redact_and_escape(r.change.id) for r in fatal]
    shown = ", ".join(ids[:SHOWN]) + (f" and {len(ids) - SHOWN} more" if len(ids) > SHOWN else "")
    echo_err(
        f"error: {shown}: {redact_and_escape(str(error))}; "
        f"{what_to_do(error.status, None, error.request_id)}. It stopped the run: no new "
        "writes were started"
    )


def _annotate(failures: list[FailedInvite]) -> None:
    """On the entry's line: what the files' author must look at (the plan's own failures
    were annotated with the plan)."""
    emit(
        invite_error_commands(
            (f.id, f"{f.message}; {f.advice}" if f.advice else f.message, f.source)
            for f in failures
        )
    )
