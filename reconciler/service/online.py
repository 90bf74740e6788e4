"""The service online: one run's API session (``Service``), and the plan made with it.

Kept apart from ``service.offline`` because importing it pulls in requests, which
`validate`, `schema` and `--version` do not need.
"""

from __future__ import annotations

from collections.abc import Generator, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass

import click

from reconciler.api.auth import Grant
from reconciler.api.capacity import Limiter, capacity_for
from reconciler.api.client import ApiClient, read_current
from reconciler.api.concurrency import ordered_map
from reconciler.api.exceptions import ApiError
from reconciler.apply.applier import GracefulInterrupt, saved_plan_state
from reconciler.desired.state import DesiredState
from reconciler.errors import ReconcilerError
from reconciler.model.invite import (
    CurrentInvite,
    DesiredInvite,
    Done,
    Failed,
    Outcome,
    stop_if_run_fatal,
)
from reconciler.output.console import Progress, echo_err
from reconciler.plan.make import make_plan
from reconciler.plan.model import Plan
from reconciler.safetext import redact_and_escape
from reconciler.sandbox import SANDBOX_CLIENT_ID, SANDBOX_CLIENT_SECRET
from reconciler.settings.config import Settings
from reconciler.settings.contract import Contract

Reading = tuple[DesiredInvite, Outcome[CurrentInvite, ApiError]]


@dataclass
class Service:
    """One run against the API: its settings, its client, and how many requests are in
    flight (the limiter of the capacity learned from the server's answers)."""

    settings: Settings  # the run's: its limits, its audit log, its secret
    client: ApiClient  # its own settings are the sandbox's under --sandbox
    limiter: Limiter | int

    @property
    def base_url(self) -> str:
        return self.client.base_url

    @contextmanager
    def readings(self, invites: list[DesiredInvite]) -> Iterator[Generator[Reading, None, None]]:
        """The server's copy of each invite, in file order, with a progress line."""
        client = self.client
        progress = Progress("Reading invites", len(invites), pace=client.pacer)
        readings = read_current(
            client,
            invites,
            self.limiter,
            client.stop,
            on_read=lambda failed: progress.advance(failed=failed),
        )
        try:
            yield readings
        finally:
            # Closed here, not when garbage is collected: the progress line comes before
            # any error the caller prints, so the error is the last line of the log.
            readings.close()
            progress.finish()

    def read_invites(
        self, ids: Sequence[str]
    ) -> tuple[list[CurrentInvite], list[tuple[str, ApiError]]]:
        """The invites of ``ids`` the platform has, in order, and each id it could not
        read with its answer; an error that would fail every read stops the run."""
        client = self.client
        found: list[CurrentInvite] = []
        failed: list[tuple[str, ApiError]] = []
        for invite_id, outcome in ordered_map(client.get_invite, ids, self.limiter, client.stop):
            match outcome:
                case Done(invite):
                    found.append(invite)
                case Failed(error):
                    stop_if_run_fatal(error)
                    failed.append((invite_id, error))
        return found, failed

    def plan(self, state: DesiredState) -> Plan:
        """The plan of the desired ``state`` against the invites read now."""
        settings = self.settings
        with self.readings(state.invites) as readings:
            plan = make_plan(
                self.base_url,
                readings,
                settings.max_changes,
                max_resends=settings.max_resends,
                changed_since=state.changed_since,
            )
        # The client's own paths (the sandbox speaks the published ones), named in the plan.
        plan.invite_urls = self.client.settings.contract.invite_urls(self.base_url)
        return plan

    def check_saved(self, plan: Plan, path: str) -> frozenset[str]:
        """The ids of a saved plan's changes already made; refuses a plan the server has
        left since it was reviewed."""
        client = self.client
        with GracefulInterrupt("checks", client.stop):
            urls = client.settings.contract.invite_urls(client.base_url)
            state = saved_plan_state(
                plan,
                client.base_url,
                client.get_invite,
                self.limiter,
                client.stop,
                invite_urls=urls,
            )
        drift = state.drift
        if drift:
            lines = "\n".join(f"  {line}" for line in drift)
            raise ReconcilerError(
                f"{path}: refusing the whole plan, nothing was changed: the server no longer "
                f"matches what was reviewed:\n{lines}\nMake and review a new plan."
            )
        return state.done

    def _narrow_grant(self) -> tuple[Grant, str] | None:
        """The token's grant when narrower than asked for, and the scopes missing (escaped)."""
        grant = self.client.grant()
        if grant is None or not grant.missing:
            return None
        return grant, ", ".join(redact_and_escape(s) for s in grant.missing)

    def say_grant(self) -> None:
        """`plan`: says when the token was granted less than asked for. Information when
        only a writing scope is missing (a read-only client: a plan reads), else a warning."""
        narrow = self._narrow_grant()
        if narrow is None:
            return
        grant, scopes = narrow
        if all("write" in s.lower() for s in grant.missing):
            click.echo(
                f"Note: the token was granted {grant.shown()}, not {scopes}: a read-only "
                "client, which is enough for a plan; `apply` would refuse before writing.",
                err=True,
            )
        else:
            echo_err(
                f"warning: the token was granted {grant.shown()}, without {scopes}, asked for "
                "with RECONCILER_SCOPE; requests needing it will be refused (403)"
            )

    def refuse_narrow_grant(self) -> None:
        """`apply`, `resend`: refuses, before the first write, a token granted less than
        asked for."""
        narrow = self._narrow_grant()
        if narrow is None:
            return
        asked = redact_and_escape(self.client.settings.contract.scope)
        raise ReconcilerError(
            f"the token was granted {narrow[0].shown()}, without {narrow[1]}, which writing needs "
            f"(asked for with RECONCILER_SCOPE: '{asked}'); "
            "nothing was written. Use the write client (RECONCILER_CLIENT_ID and "
            "RECONCILER_CLIENT_SECRET of a client granted that scope)"
        )


@contextmanager
def open_service(
    settings: Settings, sandbox: bool = False, *, paced: bool = True
) -> Iterator[Service]:
    """The service for the configured API, or for a sandbox started for this run.

    ``paced``: requests take their turns from one pacer, and the in-flight limiter hears
    of every HTTP attempt (``capacity_for``); else one request at a time (`resend`).
    """
    capacity = capacity_for(settings) if paced else None
    limiter: Limiter | int = capacity.limiter if capacity else 1
    pacer = capacity.pacer if capacity else None
    observer = capacity.limiter.observe if capacity else None
    with ExitStack() as stack:
        local = settings
        if sandbox:
            from reconciler.sandbox import Sandbox  # its HTTP server: only for --sandbox

            server = stack.enter_context(Sandbox())
            click.echo(
                f"Using a sandbox at {server.url} seeded with the bundled example state "
                "(nothing real is read or changed).",
                err=True,
            )
            # The sandbox speaks the contract as published: a deployment's renamed
            # fields, paths or scopes in reconciler.yaml do not apply to it.
            local = settings.with_overrides(
                base_url=server.url,
                client_id=SANDBOX_CLIENT_ID,
                client_secret=SANDBOX_CLIENT_SECRET,
            ).with_contract(Contract())
        client = stack.enter_context(ApiClient(local, pacer=pacer, observer=observer))
        yield Service(settings, client, limiter)


def signing_secret(settings: Settings, sandbox: bool) -> str | None:
    """The secret that signs and verifies plans of this run: the sandbox's own for --sandbox."""
    return SANDBOX_CLIENT_SECRET if sandbox else settings.client_secret
