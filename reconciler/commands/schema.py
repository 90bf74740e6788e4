"""`reconcile schema`: print the JSON Schema of invite files, for editors and CI."""

from __future__ import annotations

import click

from reconciler.resources import invite_schema_path


@click.command(epilog="Reads no environment variables and no reconciler.yaml.")
def schema() -> int:
    """Print the JSON Schema of desired-state files.

    Save it in your repository (reconcile schema > schemas/invites.schema.json)
    and point the first line of each invite file at it, so editors check and
    complete the files as you type.
    """
    click.echo(invite_schema_path().read_text(encoding="utf-8"), nl=False)
    return 0
