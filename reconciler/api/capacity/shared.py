"""What a command asks for: the run's capacity, one pacer and one in-flight limit shared
by every request of the run, built from the settings."""

from __future__ import annotations

from typing import NamedTuple

from reconciler.api.capacity.limiter import Limiter, limiter_for
from reconciler.api.capacity.pacing import RequestPacer
from reconciler.settings.config import Settings


class Capacity(NamedTuple):
    """What the server takes: the rate (the pacer, learned from every answer) and the
    number in flight (the limiter, never above what that rate can serve)."""

    pacer: RequestPacer
    limiter: Limiter


def capacity_for(settings: Settings) -> Capacity:
    pacer = RequestPacer()
    return Capacity(pacer, limiter_for(settings, pacer))
