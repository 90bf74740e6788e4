"""What plan, apply, export and resend share online: the API session and the plan.

Kept apart from ``commands.common`` because importing it pulls in requests, which
`validate`, `schema` and `--version` do not need.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import click

from reconciler.api.capacity.concurrency import Capacity
from reconciler.api.capacity.limiter import Limiter
from reconciler.api.client import ApiClient, read_current
from reconciler.desired.state import DesiredState
from reconciler.errors import ReconcilerError
from reconciler.output.color import echo_err
from reconciler.output.progress import Progress
from reconciler.plan.make import make_plan
from reconciler.plan.model import Plan
from reconciler.safetext import redact_and_escape
from reconciler.sandbox import SANDBOX_CLIENT_ID, SANDBOX_CLIENT_SECRET
from reconciler.settings.config import Settings
from reconciler.settings.contract import Contract


@contextmanager
def api_client(
    settings: Settings, sandbox: bool, capacity: Capacity | None = None
) -> Iterator[ApiClient]:
    """A client for the configured API, or for a sandbox started for this run.

    With ``capacity``, requests take their turns from its pacer and the in-flight
    limiter hears of every HTTP attempt.
    """
    pacer = capacity.pacer if capacity else None
    observer = capacity.limiter.observe if capacity else None
    if not sandbox:
        with ApiClient(settings, pacer=pacer, observer=observer) as client:
            yield client
        return
    from reconciler.sandbox import Sandbox  # its HTTP server: only for --sandbox

    with Sandbox() as server:
        click.echo(
            f"Using a sandbox at {server.url} seeded with the bundled example state "
            "(nothing real is read or changed).",
            err=True,
        )
        # The sandbox speaks the contract as published: a deployment's renamed
        # fields, paths or scopes in reconciler.yaml do not apply to it.
        local = settings.with_overrides(
            base_url=server.url, client_id=SANDBOX_CLIENT_ID, client_secret=SANDBOX_CLIENT_SECRET
        ).with_contract(Contract())
        with ApiClient(local, pacer=pacer, observer=observer) as client:
            yield client


def say_grant(client: ApiClient) -> None:
    """`plan`: says when the token was granted less than asked for. Information when only
    a writing scope is missing (a read-only client: a plan reads), a warning otherwise."""
    grant = client.grant()
    if grant is None or not grant.missing:
        return
    missing = ", ".join(redact_and_escape(s) for s in grant.missing)
    if all("write" in s.lower() for s in grant.missing):
        click.echo(
            f"Note: the token was granted {grant.shown()}, not {missing}: a read-only "
            "client, which is enough for a plan; `apply` would refuse before writing.",
            err=True,
        )
    else:
        echo_err(
            f"warning: the token was granted {grant.shown()}, without {missing}, asked for "
            "with RECONCILER_SCOPE; requests needing it will be refused (403)"
        )


def refuse_narrow_grant(client: ApiClient) -> None:
    """`apply`: refuses, before its first write, a token granted less than asked for."""
    grant = client.grant()
    if grant is None or not grant.missing:
        return
    missing = ", ".join(redact_and_escape(s) for s in grant.missing)
    asked = redact_and_escape(client.settings.contract.scope)
    raise ReconcilerError(
        f"the token was granted {grant.shown()}, without {missing}, which writing needs "
        f"(asked for with RECONCILER_SCOPE: '{asked}'); "
        "nothing was written. Use the write client (RECONCILER_CLIENT_ID and "
        "RECONCILER_CLIENT_SECRET of a client granted that scope)"
    )


def reading_progress(client: ApiClient, total: int) -> Progress:
    """Progress of reading ``total`` invites, paced by the client's pacer."""
    return Progress("Reading invites", total, pace=client.pacer)


def compute_plan(
    client: ApiClient, state: DesiredState, settings: Settings, limiter: Limiter
) -> Plan:
    progress = reading_progress(client, len(state.invites))
    readings = read_current(
        client,
        state.invites,
        limiter,
        client.stop,
        on_read=lambda failed: progress.advance(failed=failed),
    )
    try:
        plan = make_plan(
            client.base_url,
            readings,
            settings.max_changes,
            max_resends=settings.max_resends,
            changed_since=state.changed_since,
        )
        # The client's own paths (the sandbox speaks the published ones), named in the plan.
        plan.invite_urls = client.settings.contract.invite_urls(client.base_url)
        return plan
    finally:
        # Closed here, not when garbage is collected: the progress line comes before
        # any error the caller prints, so the error is the last line of the log.
        readings.close()
        progress.finish()
