"""What plan, apply and export share: settings, the API session, reading invites."""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import click

from reconciler.api.client import ApiClient
from reconciler.config import Settings, load_settings
from reconciler.current import read_current
from reconciler.desired import DesiredState, load_desired_state
from reconciler.errors import ReconcilerError
from reconciler.limiter import limiter_for
from reconciler.plan import Plan, make_plan
from reconciler.sandbox import SANDBOX_CLIENT_ID, SANDBOX_CLIENT_SECRET, Sandbox

F = TypeVar("F", bound=Callable[..., Any])


def config_option(f: F) -> F:
    return click.option(
        "--config",
        "config_file",
        type=click.Path(dir_okay=False),
        help="Config file (default: ./reconciler.yaml if present).",
    )(f)


def verbose_option(f: F) -> F:
    return click.option(
        "-v", "--verbose", is_flag=True, help="More detail on stderr (never a secret or token)."
    )(f)


def run_options(f: F) -> F:
    """Options of plan and apply that pick invites and shape the run."""
    for option in reversed(
        [
            click.argument("paths", nargs=-1, type=click.Path()),
            config_option,
            click.option(
                "--target",
                "targets",
                multiple=True,
                metavar="ID",
                help="Only this invite id (repeatable).",
            ),
            click.option(
                "--parallelism",
                type=click.IntRange(1, 256),
                help="Requests in flight at once (default 16).",
            ),
            click.option(
                "--max-changes",
                type=click.IntRange(0),
                help="Refuse to apply a plan that updates more invites than this.",
            ),
            click.option(
                "--sandbox",
                is_flag=True,
                help="Run against an in-process sandbox seeded with the bundled example state.",
            ),
            verbose_option,
        ]
    ):
        f = option(f)
    return f


def setup_logging(verbose: bool) -> None:
    if not verbose:
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(name)s: %(message)s", "%H:%M:%S"))
    logger = logging.getLogger("reconciler")
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)


def settings_for(config_file: str | None, **overrides: Any) -> Settings:
    return load_settings(config_file).with_overrides(**overrides)


def use_color() -> bool:
    return sys.stdout.isatty() and "NO_COLOR" not in os.environ


def read_desired(
    settings: Settings, paths: tuple[str, ...], targets: tuple[str, ...]
) -> DesiredState:
    state = load_desired_state(list(paths or settings.paths))
    if targets:
        known = {invite.id for invite in state.invites}
        unknown = [t for t in targets if t not in known]
        if unknown:
            raise ReconcilerError(
                f"--target {', '.join(unknown)}: no invite with this id in the files read "
                f"({', '.join(paths or settings.paths)})"
            )
        wanted = set(targets)
        state.invites = [invite for invite in state.invites if invite.id in wanted]
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
        contract = Settings()
        local = settings.with_overrides(
            base_url=server.url,
            client_id=SANDBOX_CLIENT_ID,
            client_secret=SANDBOX_CLIENT_SECRET,
            scope=contract.scope,
            token_path=contract.token_path,
            get_invite_path=contract.get_invite_path,
            update_invite_path=contract.update_invite_path,
            resend_invite_path=contract.resend_invite_path,
            field_names=contract.field_names,
        )
        with ApiClient(local) as client:
            yield client


def compute_plan(client: ApiClient, state: DesiredState, settings: Settings) -> Plan:
    readings = read_current(client, state.invites, limiter_for(settings), client.halt)
    return make_plan(client.base_url, readings, settings.max_changes)
