"""`reconcile show PLANFILE`: render a saved plan for review, without contacting the API."""

from __future__ import annotations

import contextlib
import os
from typing import Any

import click

from reconciler.api.auth import register_secret_forms
from reconciler.commands.options import (
    FilePath,
    color_option,
    config_option,
    plan_format_option,
)
from reconciler.errors import ReconcilerError
from reconciler.output import echo_chunks, renderer_for
from reconciler.output.console import use_color
from reconciler.plan.saved import (
    SignatureCheck,
    check,
    document_json,
    plan_from_document,
    read_plan_document,
    shown_document,
)
from reconciler.safetext import escape
from reconciler.settings.config import (
    SECRET_ENV,
    SECRET_FILE_ENV,
    load_settings,
    secret_from_env,
)


@click.command(
    epilog=(
        f"Environment: {SECRET_ENV} (or {SECRET_FILE_ENV}), to check the signature; "
        "NO_COLOR, TERM.\n\nreconciler.yaml (or --config): checked, no setting of it used."
    )
)
@click.argument("planfile", type=FilePath())
@plan_format_option
@color_option
@config_option
def show(planfile: str, output_format: str, color: str, config_file: str | None) -> int:
    """Print a plan saved by `plan --out`; no credentials needed.

    With RECONCILER_CLIENT_SECRET set, its signature is checked as apply
    would, and a plan apply would refuse exits 1; without it, the plan is
    shown and stderr says the signature was not checked.
    """
    # First: the client secret, then never shown, wherever a hand-edited plan has it.
    secret, unread = _client_secret(config_file)
    document = read_plan_document(planfile)
    verdict, message = _signature_verdict(document, secret, unread)
    shown = shown_document(document)  # in place: the document is not used after
    if output_format == "json":
        click.echo(document_json(shown), nl=False)  # the file's own document, signature too
    else:
        renderer = renderer_for(output_format, use_color(color))
        echo_chunks(renderer.chunks(plan_from_document(shown, planfile)))
    click.echo(f"{escape(planfile)}: {message}", err=True)
    return 0 if verdict in (SignatureCheck.VALID, None) else 1


def _client_secret(config_file: str | None) -> tuple[str | None, ReconcilerError | None]:
    """The client secret, registered for redaction; or why the settings could not be read."""
    secret, unread = None, None
    try:
        secret = load_settings(config_file).client_secret
    except ReconcilerError as exc:
        unread = exc
        with contextlib.suppress(ReconcilerError):  # another setting failed: still redacted
            secret = secret_from_env(os.environ)
    if secret:
        register_secret_forms(secret)
    return (None, unread) if unread else (secret, None)


def _signature_verdict(
    document: dict[str, Any], secret: str | None, unread: ReconcilerError | None
) -> tuple[str | None, str]:
    if not document.get("signature"):
        return SignatureCheck.UNSIGNED, "the plan is not signed: apply will refuse it."
    if unread is not None:
        return None, f"signature not checked ({unread})."
    if not secret:
        return None, (
            "signature not checked: no client secret is set (RECONCILER_CLIENT_SECRET); "
            "apply checks it before writing anything."
        )
    if check(document, secret) == SignatureCheck.VALID:
        return SignatureCheck.VALID, "signature verified with this client secret."
    return SignatureCheck.INVALID, (
        "the signature does not verify with this client secret: the plan was altered, or "
        "made with another credential. apply will refuse it."
    )
