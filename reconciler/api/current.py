"""Current state in: the server's copy of each desired invite, read with bounded concurrency."""

from __future__ import annotations

from collections.abc import Generator

from reconciler.api.client import ApiClient, CurrentInvite
from reconciler.api.concurrency import Outcome, ordered_map
from reconciler.api.limiter import Limiter
from reconciler.desired.state import DesiredInvite
from reconciler.output.progress import Progress
from reconciler.stop import Stop


def read_current(
    client: ApiClient,
    invites: list[DesiredInvite],
    parallelism: int | Limiter,
    stop: Stop | None = None,
) -> Generator[tuple[DesiredInvite, Outcome[CurrentInvite]], None, None]:
    """The server's copy of each desired invite, in file order, with progress.

    ``parallelism``: a fixed number in flight, or a limiter (``limiter_for(settings)``).
    """
    progress = Progress("Reading invites", len(invites), pace=client.pacer)
    try:
        for invite, outcome in ordered_map(
            lambda i: client.get_invite(i.id), invites, parallelism, stop
        ):
            if outcome.ran:  # an invite never read is not counted as read
                progress.advance(failed=outcome.error is not None)
            yield invite, outcome
    finally:
        progress.finish()
