"""`reconcile sandbox`: serve a local stand-in of the platform API."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import click

from reconciler import safetext
from reconciler.api.network import is_loopback_host
from reconciler.commands.options import together
from reconciler.model.invite import updatable_fields
from reconciler.output.console import echo_err
from reconciler.safetext import plural
from reconciler.sandbox import SANDBOX_CLIENT_ID, SANDBOX_CLIENT_SECRET, Sandbox, SandboxOptions

_share = click.FloatRange(0.0, 1.0)


class _Client(click.ParamType[tuple[str, str]]):
    """ID:SECRET, split at the first colon (a secret may hold colons, an id may not)."""

    name = "ID:SECRET"

    def convert(self, value: Any, param: Any, ctx: Any) -> tuple[str, str]:
        client_id, colon, secret = str(value).partition(":")
        if not (client_id and colon and secret):
            self.fail("expected ID:SECRET, e.g. ci-plan:a-long-random-secret", param, ctx)
        if client_id == SANDBOX_CLIENT_ID:
            self.fail(f"{SANDBOX_CLIENT_ID} is the sandbox's own (write) client", param, ctx)
        return client_id, secret


@click.command(epilog="Reads no environment variables and no reconciler.yaml.")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option(
    "--port",
    default=8787,
    show_default=True,
    type=click.IntRange(0, 65535),
    help="Port to listen on; 0 picks a free one.",
)
@click.option(
    "--state",
    "state_file",
    type=click.Path(exists=True, dir_okay=False),
    help="Invites to serve, YAML or JSON (default: the bundled example state).",
)
@together(
    *(
        click.option(name, type=kind, default=0.0, help=text)
        for name, kind, text in (
            ("--latency", click.FloatRange(0), "Seconds added to every answer."),
            ("--error-rate", _share, "Share of answers that are 503."),
            ("--html-error-rate", _share, "Share answered 502 with HTML."),
            ("--drop-rate", _share, "Share of connections dropped unanswered."),
            ("--slow-rate", _share, "Share answered after --slow-seconds."),
            ("--slow-seconds", click.FloatRange(0), "How slow --slow-rate answers are."),
        )
    )
)
@click.option(
    "--rate-limit", type=click.FloatRange(0, min_open=True), help="Requests per second, then 429."
)
@click.option(
    "--token-ttl",
    type=click.FloatRange(0, min_open=True),
    default=86400.0,
    show_default=True,
    help="Seconds an access token lives.",
)
@click.option("--seed", type=int, help="Seed for the random knobs, for repeatable runs.")
@click.option(
    "--normalize",
    is_flag=True,
    help="Store what a PATCH sends as a normalising platform does: e-mails lower-cased, "
    "text trimmed and its runs of spaces made one. `apply` reports such fields `diverged`.",
)
@click.option(
    "--ignore",
    multiple=True,
    type=click.Choice(updatable_fields()),
    metavar="FIELD",
    help="A field a PATCH leaves as it was, answered 200 all the same (repeat for more). "
    "`apply` reports it `diverged`.",
)
@click.option(
    "--etags",
    is_flag=True,
    help="Send an ETag with each invite and refuse a PATCH whose If-Match is not the "
    "invite's ETag now (412 Precondition Failed, nothing written).",
)
@click.option(
    "--read-only-client",
    "read_only_clients",
    multiple=True,
    type=_Client(),
    help="Also accept this client, granted the read scope only (repeat for more): "
    "rehearses CI's two clients, a read-only one for pull requests beside the write one "
    "(its runs set RECONCILER_SCOPE=kyb:invites:read, as the CI recipes' plan jobs do).",
)
@click.option(
    "--patch-without-data",
    is_flag=True,
    help='Answer a PATCH with no `data` (as a platform that says "verify with GET"): '
    "`apply` reads the invite back to check what was stored.",
)
def sandbox(
    host: str,
    port: int,
    state_file: str | None,
    patch_without_data: bool,
    **knobs: Any,
) -> int:
    """Serve a local stand-in of the platform API, for trying the tool and for tests.

    It speaks the platform contract (token endpoint, GET/PATCH invite, resend)
    with fixed credentials that are not secrets, and keeps its state in memory.
    --normalize, --ignore, --etags and --patch-without-data make it behave as
    platforms do that store something else than what they are sent, version
    their invites, or answer a write without the invite.
    """
    options = SandboxOptions(patch_data=not patch_without_data, **knobs)
    server = Sandbox(state_file=state_file, options=options, host=host, port=port)
    url = server.url
    if not is_loopback_host(host):
        echo_err(f"warning: listening on {host}, which is reachable from other machines")
        # reconcile speaks plain http only to loopback; use this address from here.
        url = f"http://127.0.0.1:{server.url.rsplit(':', 1)[1]}"
    click.echo(
        f"Sandbox API listening on {server.url} with {plural(len(server.store), 'invite')} "
        f"from {state_file or 'the bundled example state'}.\n"
        f"{_served_ids(server.store.snapshot())}\n"
        "Point reconcile at it with these fixed sandbox credentials (not secrets):\n"
        f"  export RECONCILER_BASE_URL={url}\n"
        f"  export RECONCILER_CLIENT_ID={SANDBOX_CLIENT_ID}\n"
        f"  export RECONCILER_CLIENT_SECRET={SANDBOX_CLIENT_SECRET}\n"
        f"{_read_only_line(options.read_only_clients)}"
        "Press Ctrl-C to stop.",
        err=True,
    )
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        click.echo("Sandbox stopped.", err=True)
    finally:
        server.stop()
    return 0


def _read_only_line(clients: tuple[tuple[str, str], ...]) -> str:
    """The read-only clients by id: their secrets are the user's, never echoed."""
    if not clients:
        return ""
    ids = ", ".join(safetext.escape(client_id) for client_id, _ in clients)
    return f"Read-only clients (read scope only, with the secrets you gave): {ids}\n"


_NAMED_IDS = 20  # ids named at start; beyond them, how many more


def _served_ids(invites: Mapping[str, object]) -> str:
    """The ids it serves, so a first `reconcile export ID` has one to ask for."""
    ids = list(invites)
    named = ", ".join(safetext.escape(i) for i in ids[:_NAMED_IDS]) or "none"
    more = len(ids) - _NAMED_IDS
    return f"Invite ids: {named}" + (f", and {more} more." if more > 0 else ".")
