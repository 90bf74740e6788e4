"""`reconcile apply`: compute the plan (or load a saved one), confirm, apply it."""

from __future__ import annotations

import click

from reconciler.api.client import ApiClient
from reconciler.apply import Applier, ChangeResult, WriteState
from reconciler.audit import open_audit_log
from reconciler.commands.common import (
    api_client,
    compute_plan,
    read_desired,
    run_options,
    settings_for,
    setup_logging,
    use_color,
)
from reconciler.config import Settings
from reconciler.confirm import confirm
from reconciler.errors import ReconcilerError
from reconciler.interrupt import GracefulInterrupt
from reconciler.plan import Plan
from reconciler.planfile import find_drift, load_plan
from reconciler.progress import Progress
from reconciler.render.common import plural, too_many_changes
from reconciler.render.text import TextRenderer


@click.command()
@run_options
@click.option(
    "--plan",
    "plan_file",
    type=click.Path(dir_okay=False),
    help="Apply exactly this saved plan (from `plan --out`), without asking.",
)
@click.option("--auto-approve", is_flag=True, help="Do not ask for confirmation.")
@click.option(
    "--audit-log",
    type=click.Path(dir_okay=False),
    help="Append one JSON line per write attempted to this file.",
)
def apply(
    paths: tuple[str, ...],
    config_file: str | None,
    targets: tuple[str, ...],
    parallelism: int | None,
    max_changes: int | None,
    sandbox: bool,
    verbose: bool,
    plan_file: str | None,
    auto_approve: bool,
    audit_log: str | None,
) -> int:
    """Apply the changes the plan shows, sending only the fields that differ."""
    setup_logging(verbose)
    if plan_file and (paths or targets):
        raise click.UsageError("--plan applies a saved plan as it is; do not give PATH or --target")
    settings = settings_for(
        config_file, parallelism=parallelism, max_changes=max_changes, audit_log=audit_log
    )
    renderer = TextRenderer(color=use_color())
    saved = load_plan(plan_file) if plan_file else None
    state = None if saved else read_desired(settings, paths, targets)
    if saved is not None:
        _check_max_changes(saved, settings)  # needs no request: before the drift check
    with api_client(settings, sandbox) as client:
        if saved is not None:
            the_plan = saved
            _check_saved_plan(the_plan, client, settings, plan_file or "")
        else:
            assert state is not None
            the_plan = compute_plan(client, state, settings)
        click.echo(renderer.render(the_plan), nl=False)
        if not the_plan.has_changes:
            return 1 if the_plan.errors else 0
        if saved is None:
            _check_max_changes(the_plan, settings)
            if not auto_approve:
                confirm(
                    "Apply these changes?",
                    action="apply",
                    instead=", or apply a reviewed plan with `apply --plan FILE`",
                )
        return _apply(the_plan, client, settings, renderer)


def _check_saved_plan(plan: Plan, client: ApiClient, settings: Settings, path: str) -> None:
    with GracefulInterrupt("checks", client.halt) as interrupt:
        drift = find_drift(
            plan, client.base_url, client.get_invite, settings.parallelism, interrupt.event
        )
    if drift:
        lines = "\n".join(f"  {line}" for line in drift)
        raise ReconcilerError(
            f"{path}: refusing the whole plan, nothing was changed: the server no longer "
            f"matches what was reviewed:\n{lines}\nMake and review a new plan."
        )


def _check_max_changes(plan: Plan, settings: Settings) -> None:
    # A saved plan keeps the limit it was reviewed under; this run may add a stricter one.
    limits = [n for n in (plan.max_changes, settings.max_changes) if n is not None]
    plan.max_changes = min(limits) if limits else None
    if plan.over_max_changes:
        raise ReconcilerError(f"refusing to apply, nothing was changed: {too_many_changes(plan)}")


def _apply(plan: Plan, client: ApiClient, settings: Settings, renderer: TextRenderer) -> int:
    audit = open_audit_log(settings.audit_log, settings.client_id, plan.digest())
    progress = Progress("Applying", len(plan.changes))
    # One event stops new writes and further retries, on an interrupt or a run-fatal error.
    applier = Applier(client, parallelism=settings.parallelism, stop=client.halt, audit=audit)

    def show(result: ChangeResult) -> None:
        if result.state is not WriteState.NOT_STARTED:
            progress.advance()
        progress.echo(renderer.apply_result(result))

    try:
        with GracefulInterrupt("writes", client.halt):
            report = applier.apply(plan, on_result=show)
    finally:
        progress.finish()
        audit.close()
    click.echo(renderer.apply_summary(report))
    if plan.errors:
        count = len(plan.errors)
        click.echo(
            f"{plural(count, 'invite')} could not be planned (errors above) and "
            f"{'was' if count == 1 else 'were'} left alone."
        )
    return 0 if report.ok and not plan.errors else 1
