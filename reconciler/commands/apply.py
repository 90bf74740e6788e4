"""`reconcile apply`: compute the plan (or load a saved one), confirm, apply it."""

from __future__ import annotations

import sys
from typing import NamedTuple

import click

from reconciler.api.capacity.concurrency import capacity_for
from reconciler.api.capacity.limiter import Limiter
from reconciler.api.client import ApiClient
from reconciler.apply.applier import (
    ApplyReport,
)
from reconciler.apply.interrupt import GracefulInterrupt
from reconciler.apply.recheck import saved_plan_state
from reconciler.commands.apply_writes import apply_changes
from reconciler.commands.common import (
    check_writable,
    read_desired,
    run_inputs,
    run_selection,
    run_settings,
)
from reconciler.commands.confirm import confirm, require_terminal, show_on_stderr_too
from reconciler.commands.options import (
    FilePath,
    RunOptions,
    audit_log_option,
    auto_approve_option,
    force_conflicts_option,
    run_options,
)
from reconciler.commands.plan import signing_secret
from reconciler.commands.remote import api_client, compute_plan, refuse_narrow_grant
from reconciler.commands.settings_help import RUN_ENV, settings_help
from reconciler.desired.state import DesiredState
from reconciler.errors import ReconcilerError
from reconciler.files import refuse_input
from reconciler.output.color import echo_err, use_color
from reconciler.output.common import echo_chunks
from reconciler.output.failures import (
    echo_errors,
)
from reconciler.output.github import (
    github_enabled,
    report_plan,
)
from reconciler.output.log import setup_logging
from reconciler.output.text import (
    TextRenderer,
)
from reconciler.plan.model import Plan
from reconciler.plan.saved import load_signed_plan
from reconciler.safetext import plural


@click.command(
    epilog=settings_help(
        api=True,
        reads_paths=True,
        extra=("max_changes", "max_resends", "audit_log"),
        other_env=RUN_ENV,
    )
)
@run_options
@click.option(
    "--plan",
    "plan_file",
    type=FilePath(),
    help="Apply exactly this saved plan (from `plan --out`), without asking.",
)
@auto_approve_option
@audit_log_option
@force_conflicts_option
def apply(
    run: RunOptions,
    plan_file: str | None,
    auto_approve: bool,
    audit_log: str | None,
    force_conflicts: bool,
) -> int:
    """Apply the changes the plan shows, sending only the fields that differ."""
    setup_logging(run.verbose)
    if plan_file and (run.paths or run.narrows):
        raise click.UsageError(
            "--plan applies a saved plan as it is; do not give PATH, --target, --exclude, "
            "--changed-since or --changed-since-applied"
        )
    selection = run_selection(run)
    on_stderr = False  # the plan shown on the terminal too: stdout goes elsewhere
    if not plan_file and not auto_approve:  # before anything is read: nobody could answer
        require_terminal(action="apply", instead=_INSTEAD)
        on_stderr = show_on_stderr_too(action="apply", instead=_INSTEAD)
    github = github_enabled(run.annotations)
    settings = run_settings(run, audit_log=audit_log)
    check_writable(settings.audit_log, "open the audit log")
    if not plan_file:
        inputs = run_inputs(run.config_file, list(run.paths or settings.paths))
        refuse_input(settings.audit_log, inputs, "--audit-log", "the audit log")
    renderer = TextRenderer(color=use_color(run.color))
    secret = signing_secret(settings, run.sandbox)
    # What to apply: a reviewed plan, or the files, planned once the API is reached.
    given: _Reviewed | DesiredState = (
        _Reviewed(load_signed_plan(plan_file, secret), plan_file)
        if plan_file
        else read_desired(settings, run.paths, selection)
    )
    saved = given.plan if isinstance(given, _Reviewed) else None
    if saved is not None:
        # Needs no request: before the drift check.
        saved.raise_if_unsafe(settings.max_changes, settings.max_resends)
    capacity = capacity_for(settings)
    limiter = capacity.limiter
    with api_client(settings, run.sandbox, capacity) as client:
        done: frozenset[str] = frozenset()
        if isinstance(given, _Reviewed):
            the_plan = given.plan
            done = _check_saved_plan(the_plan, client, limiter, given.path)
        else:
            the_plan = compute_plan(client, given, settings, limiter)
        echo_chunks(renderer.chunks(the_plan))
        report_plan(the_plan, github)
        in_conflict = [] if force_conflicts else the_plan.conflicts
        if in_conflict:
            the_plan = the_plan.without_conflicts()
        if not the_plan.has_changes:
            if in_conflict:  # apply's summary counts them apart, as every summary does
                report = ApplyReport(left_in_conflict=len(in_conflict))
                click.echo(renderer.apply_summary(report))
            echo_errors(the_plan.failed)
            if in_conflict:
                _say_left_in_conflict(len(in_conflict))
            return 1 if the_plan.failed or in_conflict else 0
        refuse_narrow_grant(client)  # before any write, and before asking
        if saved is None:
            the_plan.raise_if_unsafe(settings.max_changes, settings.max_resends)
            if on_stderr:  # what the question is about, where the person can read it
                color = use_color(run.color, stream=sys.stderr)
                echo_chunks(TextRenderer(color=color).chunks(the_plan), err=True, color=color)
            if not auto_approve:
                confirm(
                    "Apply these changes?",
                    action="apply",
                    instead=_INSTEAD,
                )
        code = apply_changes(
            the_plan, client, settings, limiter, renderer, github, done, len(in_conflict), on_stderr
        )
        if in_conflict:
            _say_left_in_conflict(len(in_conflict))  # last: an error closes the log
        return 1 if in_conflict else code


def _say_left_in_conflict(count: int) -> None:
    echo_err(
        f"error: {plural(count, 'invite')} in conflict (changed on the platform since "
        "--changed-since REF) left alone, nothing written to "
        f"{'it' if count == 1 else 'them'}; bring the files in line with the platform "
        "(`reconcile adopt --target ID`), or pass --force-conflicts to write the files' "
        "values anyway"
    )


_INSTEAD = (
    ", or save the plan with `reconcile plan --out FILE`, read it (`reconcile show FILE`) "
    "and apply it with `reconcile apply --plan FILE`"
)


class _Reviewed(NamedTuple):
    """A saved plan to apply as it is, and the file it was read from."""

    plan: Plan
    path: str


def _check_saved_plan(plan: Plan, client: ApiClient, limiter: Limiter, path: str) -> frozenset[str]:
    """The ids of the plan's changes already made; refuses a plan the server has left."""
    with GracefulInterrupt("checks", client.stop):
        urls = client.settings.contract.invite_urls(client.base_url)
        state = saved_plan_state(
            plan, client.base_url, client.get_invite, limiter, client.stop, invite_urls=urls
        )
    drift = state.drift
    if drift:
        lines = "\n".join(f"  {line}" for line in drift)
        raise ReconcilerError(
            f"{path}: refusing the whole plan, nothing was changed: the server no longer "
            f"matches what was reviewed:\n{lines}\nMake and review a new plan."
        )
    return state.done
