"""`reconcile plan`: show what apply would change. Never writes to the API."""

from __future__ import annotations

import click

from reconciler.commands.options import (
    RUN_ENV,
    FilePath,
    RunOptions,
    plan_format_option,
    run_options,
    settings_help,
)
from reconciler.files import refuse_input, refuse_special_file
from reconciler.output import echo_chunks, renderer_for
from reconciler.output.ci import github_enabled, report_plan
from reconciler.output.console import echo_err, echo_errors, use_color
from reconciler.plan.model import Plan
from reconciler.plan.saved import save_plan, sign_plan
from reconciler.safetext import escape, plural
from reconciler.service.offline import check_writable, read_desired, run_inputs
from reconciler.service.online import open_service, signing_secret


@click.command(
    epilog=settings_help(
        api=True, reads_paths=True, extra=("max_changes", "max_resends"), other_env=RUN_ENV
    )
)
@run_options("plan")
@plan_format_option
@click.option("--out", type=FilePath(), help="Also save the plan, signed, for `apply --plan FILE`.")
@click.option("--detailed-exitcode", is_flag=True, help="Exit 2 when there are changes.")
def plan(run: RunOptions, output_format: str, out: str | None, detailed_exitcode: bool) -> int:
    """Read the invite files and the current invites; print what apply would change."""
    check_writable(out, "write plan file")
    if out:  # before any request: a device or FIFO at --out would be replaced by a file
        refuse_special_file(out, "plan file")
    settings = run.settings()
    refuse_input(out, run_inputs(run.config_file, run.paths or settings.paths), "--out", "the plan")
    state = read_desired(settings, run.paths, run.selection("plan"))
    with open_service(settings, run.sandbox) as service:
        the_plan = service.plan(state)
        service.say_grant()
    secret = signing_secret(settings, run.sandbox)
    if secret:  # always, in practice: reading the invites needed it
        sign_plan(the_plan, secret)
    if out:
        save_plan(the_plan, out)
    echo_chunks(renderer_for(output_format, use_color(run.color)).chunks(the_plan))
    report_plan(the_plan, github_enabled(run.annotations))
    if out:
        _say_saved(the_plan, out, run.sandbox)
    return _exit_code(the_plan, detailed_exitcode)


def _say_saved(the_plan: Plan, out: str, sandbox: bool) -> None:
    failed = the_plan.failed
    caveat = f" ({plural(len(failed), 'invite')} with errors will be left alone)" if failed else ""
    # Signed with this client's secret: another client's apply refuses it.
    said = f"{caveat}; apply it, with the same client, with: reconcile apply --plan {escape(out)}"
    if sandbox:  # its API ends with this run; another --sandbox run starts another
        said = (
            f"{caveat}; the in-process sandbox ends with this run, so no apply can use it. "
            "A saved plan needs a sandbox that outlives the run: start `reconcile sandbox` "
            "in another terminal, export the three lines it prints (RECONCILER_BASE_URL and "
            "its client), then plan --out and apply --plan without --sandbox"
        )
    if the_plan.too_much_change() is not None:
        said = ", for the record."
    click.echo(f"Saved the plan to {escape(out)}{said}", err=True)


def _exit_code(the_plan: Plan, detailed_exitcode: bool) -> int:
    """1 when apply would fail or refuse; invites no longer pending never count."""
    echo_errors(the_plan.failed)
    refusal = the_plan.too_much_change()
    if refusal is not None:
        # The check apply would fail fails here too, so a pull request is not green for it.
        echo_err(f"error: apply will refuse this plan: {refusal.reason}")
        return 1
    conflicts = the_plan.conflicts
    if conflicts:
        echo_err(
            f"error: {plural(len(conflicts), 'invite')} in conflict: changed on the platform "
            "since --changed-since REF (listed above); apply leaves "
            f"{'it' if len(conflicts) == 1 else 'them'} alone unless --force-conflicts"
        )
    if the_plan.failed or conflicts:
        return 1
    return 2 if detailed_exitcode and the_plan.has_changes else 0
