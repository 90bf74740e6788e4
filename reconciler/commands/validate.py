"""`reconcile validate`: check desired-state files offline."""

from __future__ import annotations

import click

from reconciler.commands.options import FilePath, annotations_option, config_option, settings_help
from reconciler.files import refuse_input
from reconciler.output.ci import writing_codequality
from reconciler.safetext import plural
from reconciler.service.offline import read_desired, run_inputs
from reconciler.settings.config import load_settings


@click.command(
    epilog=settings_help(
        api=False, reads_paths=True, extra=("policies", "checks"), other_env=("GITHUB_ACTIONS",)
    )
)
@click.argument("paths", nargs=-1, type=click.Path())
@config_option
@annotations_option
@click.option(
    "--codequality",
    type=FilePath(),
    metavar="FILE",
    help="Also write the problems found as a GitLab Code Quality report (JSON) to FILE.",
)
def validate(
    paths: tuple[str, ...], config_file: str | None, annotations: str, codequality: str | None
) -> int:
    """Check invite files offline: YAML, schema, duplicate keys and ids, silent type changes.

    Also the policies of reconciler.yaml and the built-in checks (duplicate business names
    and e-mails, text with a space at an end). Needs no credentials and no network.
    """
    # The report is written when the config or a file is refused: never over either.
    refuse_input(codequality, run_inputs(config_file, list(paths)), "--codequality", "the report")
    with writing_codequality(codequality) as warnings:
        settings = load_settings(config_file)
        inputs = run_inputs(config_file, list(paths or settings.paths))
        refuse_input(codequality, inputs, "--codequality", "the report")
        state = read_desired(settings, paths)
        warnings += state.warnings
    click.echo(
        f"OK: {plural(len(state.invites), 'invite')} in {plural(len(state.files), 'file')} checked."
    )
    return 0
