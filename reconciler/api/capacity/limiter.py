"""How many requests may be in flight: at most ``parallelism`` (or ``max_parallelism``),
never more than the allowed rate keeps busy (``PacedLimit``), and fewer where a busy
client gets its answers as fast with fewer, found by probing (``ProbedLimit``).

The number in flight follows from the pacer's rate (``pacing``, learned in ``rate``
from every answer, slow start included) (Little's law: rate × latency, and one waiting
for its turn), capped here. A Vegas-style adaptive limit used to move the number in
flight on its own, reacting to the same 429s as the pacer; the benchmarks (scenario l:
a server whose latency rises with load; scenario a: a steady 50 ms) showed it gained
nothing over this simpler design, so it went.
"""

from __future__ import annotations

import math
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import NamedTuple, Protocol


class Limiter(Protocol):
    """What ``ordered_map`` reads before starting a call, and tells after each."""

    @property
    def limit(self) -> int: ...

    @property
    def cap(self) -> int: ...

    def sample(self, seconds: float, refused: bool) -> None:
        """One whole call: its duration and whether it failed with a refusal."""

    def observe(self, seconds: float, status: int | None) -> None:
        """One HTTP attempt: its duration and status (None: no answer)."""

    def describe(self) -> str: ...


class FixedLimit:
    """``--parallelism N``: N in flight, whatever the answers."""

    def __init__(self, limit: int) -> None:
        self.cap = max(1, limit)

    @property
    def limit(self) -> int:
        return self.cap

    def sample(self, seconds: float, refused: bool) -> None:
        pass

    def observe(self, seconds: float, status: int | None) -> None:
        pass

    def describe(self) -> str:
        return f"fixed at {self.cap} in flight"


class Servable(Protocol):
    def servable(self) -> int:
        """How many requests in flight the allowed rate keeps busy."""

    def forget_latency_floor(self) -> None:
        """The server's latency changed: what answers took lately is not it."""


class PacedLimit(FixedLimit):
    """At most ``cap``, and never more than the pacer's rate can serve: under a rate
    limit, more workers would only queue for turns (and hold memory for their answers)."""

    def __init__(self, cap: int, pacer: Servable) -> None:
        super().__init__(cap)
        self._pacer = pacer
        self.highest = 0  # the most the rate allowed at once during the run

    @property
    def limit(self) -> int:
        limit = max(1, min(self.cap, self._pacer.servable()))
        self.highest = max(self.highest, limit)
        return limit

    def describe(self) -> str:
        return (
            f"settled at {self.limit} in flight (highest {self.highest}, at most "
            f"{self.cap}: as many as the allowed rate keeps busy)"
        )


WARM_UP = 64  # answers before the first phase: slow start, the latency's first blocks
ROUNDS = 2  # answers a phase counts at least: this many times the limit (its rounds) ...
SHORTEST = 0.05  # ... over at least this many seconds, and ROUNDS times the slowest
SLOWEST_OF = 64  # ... of this many answers lately (one that ends before its slow
# answers come counts only the fast ones, and sees fewer in flight as fast as more)
LEAST = 32  # ... and this many answers, unless it has lasted LONG times that
LONG = 4
BUSY = 0.75  # the client's CPU seconds per second over a phase: busy (the GIL: one core)
IDLE = 0.5  # ... and waiting for its answers (between the two: as it was)
DOWN = 0.75  # a try lowers the limit to this share of it (to one from FEW or fewer)
FEW = 8
UP = 4 / 3  # ... or raises it by this much, below the rate's count
KEPT = 0.95  # answers at least this share as fast as usual lately: fewer stay ...
# ... or when the client's CPU per answer they save is at least TRADE times the share of
# the pace they lose, and that share is at most MOST_LOST: a busy client's CPU is what
# a run costs the machine (a CI runner's two cores run the server too), and at one in
# flight, on the consumer's own thread, the sandbox's answers cost it 30% less CPU
# each for a pace within a few percent either way.
TRADE = 1.5
MOST_LOST = 0.15
GAIN = 1.10  # answers at least this much faster with more: more stay
BEST_OF = 8  # phases whose pace is "lately" (their median: usual) ...
USUAL_FROM = 2  # ... once there are this many: no try before
WAIT = 32  # phases between tries at most (doubled after each try not kept)


FEWER, HELD, MORE = -1, 0, 1  # what a phase tries: fewer in flight, none, more


class _Phase(NamedTuple):
    limit: int  # in flight during the phase
    move: int  # FEWER, HELD or MORE than the limit kept
    began: float
    span: float  # seconds it lasts at least, once its own answers come


class _Pace(NamedTuple):
    answers: float  # per second
    busy: float  # the client's CPU seconds per second

    @property
    def cpu(self) -> float:
        """The client's CPU seconds per answer."""
        return self.busy / self.answers if self.answers else 0.0


class ProbedLimit(PacedLimit):
    """``PacedLimit``, lowered by probing where a busy client gets its answers as fast
    with fewer in flight."""

    def __init__(
        self,
        cap: int,
        pacer: Servable,
        clock: Callable[[], float] = time.monotonic,
        cpu: Callable[[], float] = time.process_time,
    ) -> None:
        super().__init__(cap, pacer)
        self._clock = clock
        self._cpu = cpu
        self._lock = threading.Lock()
        self._kept: int | None = None  # the limit probing found (None: the rate's count)
        self._phase: _Phase | None = None
        self._settled: tuple[float, float] | None = None  # its own first answer: when, CPU
        self._counted = 0  # answers since then
        self._answers = 0
        self._latencies: deque[float] = deque(maxlen=SLOWEST_OF)
        self._paces: deque[tuple[int, _Pace]] = deque(maxlen=BEST_OF)  # (in flight, pace)
        self._last = _Pace(0.0, 0.0)  # the last phase at the limit kept
        self._waits = 0  # phases still to wait before the next try
        self._misses = 0  # tries in a row not kept
        self._up_next = False  # tries alternate down and up while below the count
        self._one_missed = False  # one in flight was tried and not kept: a quarter fewer
        self._off = False  # a refusal came: the rate decides alone

    @property
    def limit(self) -> int:
        limit = super().limit
        phase = self._phase
        if phase is not None and phase.move != HELD:
            return min(limit, phase.limit)
        kept = self._kept
        return limit if kept is None else min(limit, kept)

    def sample(self, seconds: float, refused: bool) -> None:
        if self._off:
            return
        now = self._clock()
        with self._lock:
            if refused:
                self._off, self._kept, self._phase = True, None, None
            else:
                self._answered(seconds, now)

    def describe(self) -> str:
        kept = self._kept
        if kept is None or kept >= super().limit:
            return super().describe()
        return (
            f"settled at {self.limit} in flight (highest {self.highest}, at most "
            f"{self.cap}: as many as a busy client got its answers as fast with)"
        )

    # -- phases (the lock held) --------------------------------------------------

    def _begin(self, limit: int, move: int, now: float) -> None:
        span = max(SHORTEST, ROUNDS * max(self._latencies, default=0.0))
        self._phase = _Phase(limit, move, now, span)
        self._settled = None

    def _answered(self, seconds: float, now: float) -> None:
        self._answers += 1
        self._latencies.append(seconds)
        phase = self._phase
        if phase is None:
            if self._answers >= WARM_UP:
                # The run's first answers waited for a token and new connections.
                self._latencies.clear()
                self._begin(super().limit, HELD, now)
        elif self._settled is None:
            if now - seconds >= phase.began:  # the first answer of its own
                self._settled, self._counted = (now, self._cpu()), 0
        else:
            self._counted += 1
            pace = self._measured(phase, self._settled, now)
            if pace is not None:
                self._decide(phase, pace, now)

    def _measured(self, phase: _Phase, settled: tuple[float, float], now: float) -> _Pace | None:
        """The phase's pace, once it has lasted long enough to tell."""
        elapsed = now - settled[0]
        if self._counted < ROUNDS * phase.limit or elapsed < phase.span:
            return None
        busy = (self._cpu() - settled[1]) / elapsed
        if self._counted < LEAST and elapsed < LONG * phase.span and busy >= IDLE:
            return None  # (a client waiting for its answers has no pace to measure closely)
        return _Pace(self._counted / elapsed, busy)

    def _decide(self, phase: _Phase, pace: _Pace, now: float) -> None:
        count = super().limit
        current = self._current(count)
        # Phases at the limit a try lowers, or more: not slow start's, nor tries not kept.
        lately = sorted(p for limit, p in self._paces if limit >= current) or [self._last]
        usual = lately[len(lately) // 2]  # a median: one phase's luck moves no decision
        self._paces.append((phase.limit, pace))
        # A try the rate's count overtook (it fell below it) tried nothing: as if held.
        if phase.move == FEWER and phase.limit < count:
            if self._tried(phase, pace, count, _worth_fewer(pace, usual), now):
                return
        elif phase.move == MORE and current < count:
            # Faster with more, and worth what they cost.
            worth = pace.answers >= GAIN * self._last.answers and not _worth_fewer(self._last, pace)
            if self._tried(phase, pace, count, worth, now):
                return
        else:
            if pace.busy < IDLE and (self._kept is not None or self._last.busy >= BUSY):
                # Busy at the limit held, now waiting for its answers: the server slowed
                # down, and what probing found says nothing of it; nor does the latency
                # the rate's count grows from, measured at few in flight (a server fast
                # for half a second, then at 100 ms, was served by 1-3 for seconds).
                self._kept, self._misses, self._waits, self._one_missed = None, 0, 0, False
                self._paces.clear()
                self._pacer.forget_latency_floor()
            self._last = pace
        self._next(count, pace, now)

    def _tried(self, phase: _Phase, pace: _Pace, count: int, worth: bool, now: float) -> bool:
        """A try's verdict: kept, and the next try goes further the same way (True: it
        began), or missed."""
        if not worth:
            self._one_missed |= phase.move == FEWER and phase.limit == 1
            self._missed()
            return False
        self._keep(phase.limit, pace, count)
        if phase.move == FEWER and phase.limit > 1:
            self._begin(self._fewer(phase.limit), FEWER, now)
            return True
        if phase.move == MORE and self._kept is not None:
            self._begin(_more(phase.limit), MORE, now)
            return True
        return False

    def _fewer(self, limit: int) -> int:
        """A quarter fewer; from a few, one first: a read at one in flight is made on
        the consumer's own thread (``concurrency``), which two or three are not."""
        if limit <= FEW and not self._one_missed:
            return 1
        return max(1, min(limit - 1, int(limit * DOWN)))

    def _current(self, count: int) -> int:
        return count if self._kept is None else min(count, self._kept)

    def _keep(self, limit: int, pace: _Pace, count: int) -> None:
        self._kept = None if limit >= count else limit
        self._last = pace
        self._misses = 0

    def _missed(self) -> None:
        self._misses += 1
        self._waits = min(WAIT, 2 ** (self._misses + 1))

    def _next(self, count: int, pace: _Pace, now: float) -> None:
        """The phase after one that decided: the limit held, or a try."""
        current = self._current(count)
        idle = pace.busy < BUSY and self._kept is None
        if self._waits or idle or len(self._paces) < USUAL_FROM:
            self._waits = max(0, self._waits - 1)
            self._begin(current, HELD, now)
            return
        up = self._up_next and current < count
        self._up_next = not self._up_next
        if up:
            self._begin(min(count, _more(current)), MORE, now)
        elif current > 1:
            self._begin(self._fewer(current), FEWER, now)
        else:
            self._begin(current, HELD, now)


def _worth_fewer(fewer: _Pace, more: _Pace) -> bool:
    """Whether ``fewer`` in flight are worth keeping over ``more``: as fast (KEPT), or
    what they save of the client's CPU worth what they lose of the pace (TRADE)."""
    lost = 1.0 - fewer.answers / more.answers if more.answers else 0.0
    if lost <= 1.0 - KEPT:
        return True
    saved = 1.0 - fewer.cpu / more.cpu if more.cpu else 0.0
    return lost <= MOST_LOST and saved >= TRADE * lost


def _more(limit: int) -> int:
    return max(limit + 1, math.ceil(limit * UP))
