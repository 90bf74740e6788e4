"""How many requests may be in flight: fixed, or found as the run goes.

The adaptive limit follows TCP Vegas as Netflix's concurrency-limits applies it
to requests: the best latency seen is what an answer costs with no queue, and
``limit × (1 − best / latency)`` estimates how many requests wait in a queue
somewhere. While that queue is short and nothing is refused, the limit rises;
when the queue grows, the limit shrinks by the excess; a refusal (429, 503,
a gateway error, no answer) cuts it by a quarter at once, as AIMD does.

Samples are grouped in windows of about one limit's worth of answers (one
"round trip" of the pipe), so one slow answer or a burst of 429s from requests
sent together moves the limit once, not once per answer. The limit rises only
in a window where the calls in flight reached at least half of it: a client
that cannot fill its limit (its own CPU is the bottleneck) learns nothing about
the server by raising it, as TCP validates its window (RFC 7661).
"""

from __future__ import annotations

import logging
import math
import threading
from typing import Protocol

from reconciler.settings.config import Settings
from reconciler.wording import plural

log = logging.getLogger("reconciler.limiter")

START = 16
# The server says: fewer at once. A 429 is about the rate: the pacer's to answer.
REFUSALS = frozenset({502, 503, 504})
_BACKOFF = 0.75  # share of the limit kept after a refusal
_MIN_WINDOW = 8  # answers per decision, at least
# Below this, a latency difference is loopback jitter rather than a queue.
_JITTER = 0.002


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


class AdaptiveLimit:
    """A Vegas-style limit between 1 and ``cap``, starting at ``start``.

    Thread-safe: answers are reported from the worker threads.
    """

    def __init__(self, cap: int = 64, start: int = START) -> None:
        self._cap = max(1, cap)
        self._limit = float(min(start, self._cap))
        self._start = int(self._limit)
        self._lock = threading.Lock()
        self._window: list[float] = []
        self._refused = False
        self._best: float | None = None  # lowest window median: latency with no queue
        self._per_attempt = False  # observe() was called: per-call samples are ignored
        self._in_flight = 0  # calls begun and not yet sampled
        self._busiest = 0  # most calls in flight during the current window
        self.answers = 0
        self.refusals = 0
        self.highest = self._start

    @property
    def limit(self) -> int:
        return max(1, int(self._limit))

    @property
    def cap(self) -> int:
        return self._cap

    def begin(self) -> None:
        with self._lock:
            self._in_flight += 1
            self._busiest = max(self._busiest, self._in_flight)

    def sample(self, seconds: float, refused: bool) -> None:
        with self._lock:
            self._in_flight = max(0, self._in_flight - 1)
        if not self._per_attempt:
            self._add(seconds, refused)

    def observe(self, seconds: float, status: int | None) -> None:
        # Per-attempt answers from the API client are finer than whole calls
        # (which include retries and waits): once they arrive, they alone count.
        self._per_attempt = True
        self._add(seconds, status is None or status in REFUSALS)

    def describe(self) -> str:
        refused = f", {self.refusals} refused" if self.refusals else ""
        return (
            f"settled at {self.limit} in flight (started at {self._start}, highest "
            f"{self.highest}, cap {self._cap}; {plural(self.answers, 'answer')}{refused})"
        )

    def _add(self, seconds: float, refused: bool) -> None:
        with self._lock:
            self.answers += 1
            self._window.append(max(0.0, seconds))
            if refused:
                self.refusals += 1
                self._refused = True
            if len(self._window) >= max(_MIN_WINDOW, self.limit):
                self._decide()

    def _decide(self) -> None:
        """Move the limit once for the window just closed. Hold the lock."""
        window = sorted(self._window)
        latency = window[len(window) // 2]
        before = self.limit
        if self._refused:
            self._limit = max(1.0, self._limit * _BACKOFF)
            why = "a refusal"
        else:
            self._best = latency if self._best is None else min(self._best, latency)
            vegas = self._vegas(latency, self._best)
            if vegas < self._limit or self._busiest * 2 >= before:
                self._limit = vegas  # a rise only if the limit was used
            why = f"median {latency * 1000:.0f} ms, best {self._best * 1000:.0f} ms"
        self._limit = min(float(self._cap), max(1.0, self._limit))
        self.highest = max(self.highest, self.limit)
        self._window.clear()
        self._refused = False
        self._busiest = self._in_flight
        if self.limit != before:
            log.debug("in-flight limit %d -> %d (%s)", before, self.limit, why)

    def _vegas(self, latency: float, best: float) -> float:
        limit = self._limit
        excess = max(0.0, latency - best - _JITTER)
        queue = limit * excess / latency if latency > 0 else 0.0
        step = max(1.0, math.log10(limit))
        alpha, beta = 3 * step, 6 * step
        if queue <= step:
            return limit + beta  # no queue at all: grow quickly
        if queue < alpha:
            return limit + step
        if queue > beta:
            return limit - (queue - alpha)  # drain the queue back to alpha
        return limit


class Servable(Protocol):
    def servable(self) -> int:
        """How many requests in flight the allowed rate keeps busy."""


class PacedLimit:
    """Another limit, never above what the pacer's rate can serve: under a rate limit,
    more workers would only queue for turns (and hold memory for their answers)."""

    def __init__(self, inner: Limiter, pacer: Servable) -> None:
        self.inner = inner
        self._pacer = pacer

    @property
    def limit(self) -> int:
        return max(1, min(self.inner.limit, self._pacer.servable()))

    @property
    def cap(self) -> int:
        return self.inner.cap

    def begin(self) -> None:
        self.inner.begin()

    def sample(self, seconds: float, refused: bool) -> None:
        self.inner.sample(seconds, refused)

    def observe(self, seconds: float, status: int | None) -> None:
        self.inner.observe(seconds, status)

    def describe(self) -> str:
        return self.inner.describe()


def limiter_for(settings: Settings, pacer: Servable | None = None) -> Limiter:
    """Fixed when parallelism was set (option, environment or config), else adaptive;
    with a ``pacer``, never more than its rate can serve."""
    limiter: Limiter
    if settings.parallelism is not None:
        limiter = FixedLimit(settings.parallelism)
    else:
        limiter = AdaptiveLimit(cap=settings.max_parallelism)
    return limiter if pacer is None else PacedLimit(limiter, pacer)
