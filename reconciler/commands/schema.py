"""`reconcile schema`: print the JSON Schema of invite files, for editors and CI."""

from __future__ import annotations

import click

from reconciler.files import invite_schema_path, resource_path


@click.command(epilog="Reads no environment variables and no reconciler.yaml.")
@click.option(
    "--config",
    "config_schema",
    is_flag=True,
    help="Print the schema of reconciler.yaml instead (settings, policies, checks).",
)
def schema(config_schema: bool) -> int:
    """Print the JSON Schema of desired-state files.

    Save it in your repository (reconcile schema > schemas/invites.schema.json)
    and point the first line of each invite file at it, so editors check and
    complete the files as you type.
    """
    path = resource_path("schemas/config.schema.json") if config_schema else invite_schema_path()
    click.echo(path.read_text(encoding="utf-8"), nl=False)
    return 0
