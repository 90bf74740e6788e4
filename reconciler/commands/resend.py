"""`reconcile resend`: re-send invitations by hand, e.g. after a failed re-send."""

from __future__ import annotations

import sys

import click

from reconciler.api.client import ApiClient
from reconciler.api.errors import ApiError
from reconciler.audit import AuditLog
from reconciler.commands.common import api_client, settings_for
from reconciler.commands.options import (
    audit_log_option,
    auto_approve_option,
    config_option,
    sandbox_option,
    settings_help,
    verbose_option,
)
from reconciler.errors import ReconcilerError
from reconciler.logsetup import setup_logging
from reconciler.render.common import plural


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
    settings = settings_for(config_file, audit_log=audit_log)
    ids = list(dict.fromkeys(invite_ids))
    if not auto_approve:
        if not sys.stdin.isatty():
            raise ReconcilerError(
                "refusing to re-send without confirmation: standard input is not a terminal; "
                "pass --auto-approve"
            )
        question = f"Re-send {plural(len(ids), 'invitation')}?"
        if not click.confirm(question, default=False, err=True):
            raise ReconcilerError("cancelled; nothing was sent")
    audit = AuditLog(settings.audit_log, settings.client_id) if settings.audit_log else None
    failed = 0
    try:
        with api_client(settings, sandbox) as client:
            for invite_id in ids:  # one at a time: each is a message to a person
                failed += not _resend_one(client, invite_id, audit)
    finally:
        if audit:
            audit.close()
    click.echo(f"Resend: {len(ids) - failed} re-sent, {failed} failed.")
    return 1 if failed else 0


def _resend_one(client: ApiClient, invite_id: str, audit: AuditLog | None) -> bool:
    try:
        receipt = client.resend_invite(invite_id)
    except ApiError as error:
        unknown = error.outcome_unknown
        if audit:
            audit.record(
                invite_id=invite_id,
                operation="resend",
                outcome="unknown" if unknown else "failed",
                status=error.status,
                request_id=error.request_id,
                message=error.message,
            )
        label = "unknown" if unknown else "failed "
        click.echo(f"{label}  {invite_id}: {error}")
        return False
    if audit:
        audit.record(
            invite_id=invite_id,
            operation="resend",
            outcome="ok",
            status=receipt.status,
            request_id=receipt.request_id,
        )
    click.echo(f"re-sent  {invite_id}")
    return True
