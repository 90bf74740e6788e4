"""Current state in: the server's copy of each desired invite, read with bounded concurrency."""

from __future__ import annotations

from collections.abc import Callable, Generator

from reconciler.api.capacity.concurrency import ordered_map
from reconciler.api.capacity.limiter import Limiter
from reconciler.api.client import ApiClient
from reconciler.api.exceptions import ApiError
from reconciler.model.invite import CurrentInvite, DesiredInvite
from reconciler.model.outcome import Failed, NotRun, Outcome
from reconciler.stop import Stop

# Told of each invite read (True: the read failed), as the answers come, in file order:
# the command shows progress with it.
OnRead = Callable[[bool], None]


def read_current(
    client: ApiClient,
    invites: list[DesiredInvite],
    parallelism: int | Limiter,
    stop: Stop | None = None,
    on_read: OnRead | None = None,
) -> Generator[tuple[DesiredInvite, Outcome[CurrentInvite, ApiError]], None, None]:
    """The server's copy of each desired invite, in file order.

    ``parallelism``: a fixed number in flight, or a limiter (``limiter_for(settings)``).
    """
    for invite, outcome in ordered_map(
        lambda i: client.get_invite(i.id), invites, parallelism, stop, inline=True
    ):
        if on_read is not None and not isinstance(outcome, NotRun):
            on_read(isinstance(outcome, Failed))  # an invite never read is not counted
        yield invite, outcome
