"""What plan, apply and export share: settings, the API session, reading invites."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import click

from reconciler.api.client import ApiClient, CurrentInvite
from reconciler.changed import changed_invite_ids
from reconciler.concurrency import Outcome, ordered_map
from reconciler.config import Contract, Settings, load_settings
from reconciler.desired import DesiredInvite, DesiredState, load_desired_state
from reconciler.plan import Plan, make_plan
from reconciler.progress import Progress
from reconciler.render.common import plural
from reconciler.sandbox import SANDBOX_CLIENT_ID, SANDBOX_CLIENT_SECRET, Sandbox
from reconciler.selection import EVERYTHING, Selection, select_invites


def settings_for(config_file: str | None, **overrides: Any) -> Settings:
    return load_settings(config_file).with_overrides(**overrides)


def read_desired(
    settings: Settings, paths: tuple[str, ...], selection: Selection = EVERYTHING
) -> DesiredState:
    """The desired state of the files read, narrowed to the invites selected."""
    where = list(paths or settings.paths)
    state = load_desired_state(where)
    if selection.is_everything:
        return state
    changed = None
    if selection.changed_since:
        changed = changed_invite_ids(selection.changed_since, where, state.invites)
    total = len(state.invites)
    state.invites = select_invites(state.invites, selection, ", ".join(where), changed)
    if selection.changed_since:
        click.echo(
            f"--changed-since {selection.changed_since}: "
            f"{plural(len(state.invites), 'invite')} of {total:,} added or changed; "
            "reading only those.",
            err=True,
        )
    return state


@contextmanager
def api_client(settings: Settings, sandbox: bool) -> Iterator[ApiClient]:
    """A client for the configured API, or for a sandbox started for this run."""
    if not sandbox:
        with ApiClient(settings) as client:
            yield client
        return
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
        with ApiClient(local) as client:
            yield client


def read_current(
    client: ApiClient,
    invites: list[DesiredInvite],
    parallelism: int,
    stop: threading.Event | None = None,
) -> Iterator[tuple[DesiredInvite, Outcome[CurrentInvite]]]:
    """The server's copy of each desired invite, in file order, with progress."""
    progress = Progress("Reading invites", len(invites))
    try:
        for invite, outcome in ordered_map(
            lambda i: client.get_invite(i.id), invites, parallelism, stop
        ):
            if outcome.ran:  # an invite never read is not counted as read
                progress.advance(failed=outcome.error is not None)
            yield invite, outcome
    finally:
        progress.finish()


def compute_plan(client: ApiClient, state: DesiredState, settings: Settings) -> Plan:
    readings = read_current(client, state.invites, settings.parallelism, client.halt)
    try:
        return make_plan(client.base_url, readings, settings.max_changes)
    finally:
        # Closed here, not when garbage is collected: the progress line comes before
        # any error the caller prints, so the error is the last line of the log.
        readings.close()
