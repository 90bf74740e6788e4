"""How many requests may be in flight: at most ``parallelism`` (or ``max_parallelism``),
and never more than the allowed rate keeps busy.

The number in flight follows from the pacer's rate (``pacing``, learned in ``rate``
from every answer, slow start included) (Little's law: rate × latency, and one waiting for its
turn), capped here. A Vegas-style adaptive limit used to move the
number in flight on its own, reacting to the same 429s as the pacer; the
benchmarks (scenario l: a server whose latency rises with load; scenario a: a
steady 50 ms) showed it gained nothing over this simpler design, so it went.
"""

from __future__ import annotations

import threading
from typing import Protocol

from reconciler.settings.config import Settings


class Limiter(Protocol):
    """What ``ordered_map`` reads before starting a call, and tells after each."""

    @property
    def limit(self) -> int: ...

    @property
    def cap(self) -> int: ...

    def begin(self) -> None:
        """A call starts (``sample`` follows when it ends)."""

    def sample(self, seconds: float, refused: bool) -> None:
        """One whole call: its duration and whether it failed with a refusal."""

    def observe(self, seconds: float, status: int | None) -> None:
        """One HTTP attempt: its duration and status (None: no answer)."""

    def describe(self) -> str: ...


class FixedLimit:
    """``--parallelism N``: N in flight, whatever the answers."""

    def __init__(self, limit: int) -> None:
        self._limit = max(1, limit)

    @property
    def limit(self) -> int:
        return self._limit

    @property
    def cap(self) -> int:
        return self._limit

    def begin(self) -> None:
        pass

    def sample(self, seconds: float, refused: bool) -> None:
        pass

    def observe(self, seconds: float, status: int | None) -> None:
        pass

    def describe(self) -> str:
        return f"fixed at {self._limit} in flight"


class Servable(Protocol):
    def servable(self) -> int:
        """How many requests in flight the allowed rate keeps busy."""

    def forget_latency_floor(self) -> None:
        """The server's latency changed: what answers took lately is not it."""


class PacedLimit:
    """Another limit, never above what the pacer's rate can serve: under a rate limit,
    more workers would only queue for turns (and hold memory for their answers)."""

    def __init__(self, inner: Limiter, pacer: Servable) -> None:
        self.inner = inner
        self._pacer = pacer
        self._lock = threading.Lock()
        self.highest = 0  # the most the rate allowed at once during the run

    @property
    def limit(self) -> int:
        limit = max(1, min(self.inner.limit, self._pacer.servable()))
        if limit > self.highest:  # a new high is rare: the lock only for it
            with self._lock:
                self.highest = max(self.highest, limit)
        return limit

    @property
    def cap(self) -> int:
        return self.inner.cap

    def begin(self) -> None:
        self.inner.begin()

    def sample(self, seconds: float, refused: bool) -> None:
        self.inner.sample(seconds, refused)

    def observe(self, seconds: float, status: int | None) -> None:
        self.inner.observe(seconds, status)

    def forget_latency_floor(self) -> None:
        self._pacer.forget_latency_floor()

    def describe(self) -> str:
        return (
            f"settled at {self.limit} in flight (highest {self.highest}, at most "
            f"{self.inner.cap}: as many as the allowed rate keeps busy)"
        )


def limiter_for(settings: Settings, pacer: Servable | None = None) -> Limiter:
    """At most ``parallelism`` when it was set (option, environment or config), else
    ``max_parallelism``; with a ``pacer``, never more than its rate can serve, and
    unless ``parallelism`` was set, fewer where fewer are answered as fast (``probe``)."""
    from reconciler.api.capacity.probe import ProbedLimit  # it builds on PacedLimit

    limiter = FixedLimit(settings.parallelism or settings.max_parallelism)
    if pacer is None:
        return limiter
    paced = PacedLimit(limiter, pacer)
    return paced if settings.parallelism else ProbedLimit(paced)
