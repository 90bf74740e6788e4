"""What plan, apply and export share: settings, the API session, reading invites."""

from __future__ import annotations

import errno
import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import click

from reconciler.api.client import ApiClient, Observer
from reconciler.changed import changed_invite_ids
from reconciler.config import Contract, Settings, load_settings
from reconciler.current import read_current
from reconciler.desired import DesiredState, load_desired_state
from reconciler.errors import ReconcilerError
from reconciler.invite_entries import refuse_bad_ids
from reconciler.limiter import Limiter
from reconciler.plan import Plan, make_plan
from reconciler.render.common import plural
from reconciler.safetext import escape
from reconciler.sandbox import SANDBOX_CLIENT_ID, SANDBOX_CLIENT_SECRET, Sandbox
from reconciler.selection import EVERYTHING, Selection, select_invites


def settings_for(config_file: str | None, **overrides: Any) -> Settings:
    return load_settings(config_file).with_overrides(**overrides)


def check_writable(path: str | None, action: str) -> None:
    """Refuse, before any request, a file that could not be written once the work is done.

    ``action`` says what would fail, as the later error would: "write plan file".
    """
    if not path:
        return
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        raise ReconcilerError(
            f"{escape(path)}: cannot {action}: {os.strerror(errno.ENOENT)} "
            f"(no directory {escape(directory)}); nothing was read"
        )
    target = path if os.path.exists(path) else directory
    if os.path.isdir(path) or not os.access(target, os.W_OK):
        problem = errno.EISDIR if os.path.isdir(path) else errno.EACCES
        raise ReconcilerError(
            f"{escape(path)}: cannot {action}: {os.strerror(problem)}; nothing was read"
        )


def read_desired(
    settings: Settings, paths: tuple[str, ...], selection: Selection = EVERYTHING
) -> DesiredState:
    """The desired state of the files read, narrowed to the invites selected."""
    refuse_bad_ids(selection.targets, "--target")
    refuse_bad_ids(selection.excludes, "--exclude")
    where = list(paths or settings.paths)
    state = load_desired_state(where)
    if selection.is_everything:
        return state
    changed = None
    if selection.changed_since:
        changed = changed_invite_ids(selection.changed_since, where, state.invites)
        if changed is None:
            click.echo(
                f"--changed-since {selection.changed_since}: no base commit (a branch's "
                "first push); planning every invite.",
                err=True,
            )
    total = len(state.invites)
    state.invites = select_invites(state.invites, selection, ", ".join(where), changed)
    if changed is not None:
        _say_changed(selection, changed, len(state.invites), total)
    return state


def _say_changed(selection: Selection, changed: set[str], selected: int, total: int) -> None:
    ref = escape(selection.changed_since or "")
    for target in dict.fromkeys(selection.targets):
        if target not in changed:  # else the run would print a bare "No changes."
            click.echo(
                f"--target {target}: unchanged since {ref}; nothing to plan for it", err=True
            )
    click.echo(
        f"--changed-since {ref}: {plural(selected, 'invite')} of {total:,} added or changed; "
        "reading only those.",
        err=True,
    )


@contextmanager
def api_client(
    settings: Settings, sandbox: bool, observer: Observer | None = None
) -> Iterator[ApiClient]:
    """A client for the configured API, or for a sandbox started for this run.

    ``observer`` hears of every HTTP attempt: the in-flight limiter learns from it.
    """
    if not sandbox:
        with ApiClient(settings, observer=observer) as client:
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
        with ApiClient(local, observer=observer) as client:
            yield client


def compute_plan(
    client: ApiClient, state: DesiredState, settings: Settings, limiter: Limiter
) -> Plan:
    readings = read_current(client, state.invites, limiter, client.halt)
    try:
        return make_plan(client.base_url, readings, settings.max_changes)
    finally:
        # Closed here, not when garbage is collected: the progress line comes before
        # any error the caller prints, so the error is the last line of the log.
        readings.close()
