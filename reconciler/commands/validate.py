"""`reconcile validate`: check desired-state files offline."""

from __future__ import annotations

import click

from reconciler.commands.common import config_option, read_desired, settings_for
from reconciler.render.common import plural


@click.command()
@click.argument("paths", nargs=-1, type=click.Path())
@config_option
def validate(paths: tuple[str, ...], config_file: str | None) -> int:
    """Check invite files offline: YAML, schema, duplicate keys and ids, silent type changes.

    Needs no credentials and no network.
    """
    state = read_desired(settings_for(config_file), paths, ())
    click.echo(
        f"OK: {plural(len(state.invites), 'invite')} in {plural(len(state.files), 'file')} checked."
    )
    return 0
