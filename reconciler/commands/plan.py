"""`reconcile plan`: show what apply would change. Never writes to the API."""

from __future__ import annotations

import click

from reconciler.commands.common import (
    api_client,
    compute_plan,
    read_desired,
    run_options,
    settings_for,
    setup_logging,
    use_color,
)
from reconciler.planfile import save_plan
from reconciler.render import renderer_for
from reconciler.render.common import plural


@click.command()
@run_options
@click.option(
    "--format",
    "output_format",
    type=click.Choice(["text", "json", "markdown"]),
    default="text",
    show_default=True,
    help="How the plan is printed on stdout.",
)
@click.option(
    "--out", type=click.Path(dir_okay=False), help="Also save the plan for `apply --plan FILE`."
)
@click.option("--detailed-exitcode", is_flag=True, help="Exit 2 when there are changes.")
def plan(
    paths: tuple[str, ...],
    config_file: str | None,
    targets: tuple[str, ...],
    parallelism: int | None,
    max_changes: int | None,
    sandbox: bool,
    verbose: bool,
    output_format: str,
    out: str | None,
    detailed_exitcode: bool,
) -> int:
    """Read the invite files and the current invites; print what apply would change."""
    setup_logging(verbose)
    settings = settings_for(config_file, parallelism=parallelism, max_changes=max_changes)
    state = read_desired(settings, paths, targets)
    with api_client(settings, sandbox) as client:
        the_plan = compute_plan(client, state, settings)
    if out:
        save_plan(the_plan, out)
    click.echo(renderer_for(output_format, use_color()).render(the_plan), nl=False)
    if out:
        errors = the_plan.errors
        caveat = (
            f" ({plural(len(errors), 'invite')} with errors will be left alone)" if errors else ""
        )
        click.echo(
            f"Saved the plan to {out}{caveat}; apply it with: reconcile apply --plan {out}",
            err=True,
        )
    if the_plan.errors:
        return 1
    return 2 if detailed_exitcode and the_plan.has_changes else 0
