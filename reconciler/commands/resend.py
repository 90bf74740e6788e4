"""`reconcile resend`: re-send invitations by hand, e.g. after a failed re-send."""

from __future__ import annotations

import click

from reconciler.api.client import ApiClient
from reconciler.api.exceptions import ApiError
from reconciler.apply.audit import AuditLog, NoAuditLog, open_audit_log
from reconciler.commands.common import settings_for
from reconciler.commands.confirm import confirm, require_terminal
from reconciler.commands.options import (
    audit_log_option,
    auto_approve_option,
    config_option,
    sandbox_option,
    settings_help,
    verbose_option,
)
from reconciler.commands.remote import api_client
from reconciler.desired.entries import refuse_bad_ids
from reconciler.output.failures import echo_errors
from reconciler.output.log import setup_logging
from reconciler.plan.changes import FailedInvite
from reconciler.wording import plural


@click.command(epilog=settings_help(api=True, extra=("audit_log",)))
@click.argument("invite_ids", nargs=-1, required=True, metavar="ID...")
@auto_approve_option
@audit_log_option
@config_option
@sandbox_option
@verbose_option
def resend(
    invite_ids: tuple[str, ...],
    auto_approve: bool,
    audit_log: str | None,
    config_file: str | None,
    sandbox: bool,
    verbose: bool,
) -> int:
    """Re-send the invitation of each given invite, once. Never retried automatically."""
    setup_logging(verbose)
    if not auto_approve:  # before anything is read: nobody could answer
        require_terminal(action="re-send")
    refuse_bad_ids(invite_ids, "resend")
    settings = settings_for(config_file, audit_log=audit_log)
    ids = list(dict.fromkeys(invite_ids))
    if not auto_approve:
        confirm(f"Re-send {plural(len(ids), 'invitation')}?", action="re-send")
    failed: list[FailedInvite] = []
    with (
        open_audit_log(settings.audit_log, settings.client_id) as audit,
        api_client(settings, sandbox) as client,
    ):
        for invite_id in ids:  # one at a time: each is a message to a person
            failure = _resend_one(client, invite_id, audit)
            if failure is not None:
                failed.append(failure)
    click.echo(f"Resend: {len(ids) - len(failed)} re-sent, {len(failed)} failed.")
    echo_errors(failed)
    return 1 if failed else 0


def _resend_one(
    client: ApiClient, invite_id: str, audit: AuditLog | NoAuditLog
) -> FailedInvite | None:
    try:
        audit.audited(invite_id, "resend", lambda: client.resend_invite(invite_id))
    except ApiError as error:
        label = "unknown" if error.outcome_unknown else "failed "
        click.echo(f"{label}  {invite_id}: {error}")
        return FailedInvite(invite_id, None, str(error), error.status)
    click.echo(f"re-sent  {invite_id}")
    return None
