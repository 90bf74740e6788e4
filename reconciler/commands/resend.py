"""`reconcile resend`: re-send invitations by hand, e.g. after a failed re-send."""

from __future__ import annotations

import sys

import click

from reconciler.api.errors import ApiError
from reconciler.commands.common import (
    api_client,
    config_option,
    settings_for,
    setup_logging,
    verbose_option,
)
from reconciler.errors import ReconcilerError


@click.command()
@click.argument("invite_ids", nargs=-1, required=True, metavar="ID...")
@click.option("--auto-approve", is_flag=True, help="Do not ask for confirmation.")
@config_option
@click.option("--sandbox", is_flag=True, help="Use an in-process sandbox.")
@verbose_option
def resend(
    invite_ids: tuple[str, ...],
    auto_approve: bool,
    config_file: str | None,
    sandbox: bool,
    verbose: bool,
) -> int:
    """Re-send the invitation of each given invite, once. Never retried automatically."""
    setup_logging(verbose)
    settings = settings_for(config_file)
    ids = list(dict.fromkeys(invite_ids))
    if not auto_approve:
        if not sys.stdin.isatty():
            raise ReconcilerError(
                "refusing to re-send without confirmation: standard input is not a terminal; "
                "pass --auto-approve"
            )
        if not click.confirm(f"Re-send {len(ids)} invitation(s)?", default=False, err=True):
            raise ReconcilerError("cancelled; nothing was sent")
    failed = 0
    with api_client(settings, sandbox) as client:
        for invite_id in ids:  # one at a time: each is a message to a person
            try:
                client.resend_invite(invite_id)
            except ApiError as error:
                failed += 1
                click.echo(f"failed   {invite_id}: {error}")
            else:
                click.echo(f"re-sent  {invite_id}")
    click.echo(f"Resend: {len(ids) - failed} re-sent, {failed} failed.")
    return 1 if failed else 0
