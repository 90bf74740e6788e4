"""The run's one picture of the server's capacity: the rate it allows, learned from
every answer, and turns to start a request, handed out in arrival order.

The platform does not publish its limit, and a gateway in front of it may enforce
one the way nginx's ``limit_req`` does: a steady rate, no burst, a 429 (or a bare
503) without ``Retry-After`` for every request that comes too early. So the rate
is found as TCP finds its window, and one object owns it:

- **Slow start**: a run begins paced at ``START_RATE`` and, until the server
  first refuses a request, multiplies the rate by ``SLOW_START_GAIN`` for each
  start the rate held back, never past ``STARTUP_GAIN`` times what the last few
  starts came to: an unknown limit is met within a few round trips, and a server
  with none is soon paced no tighter than its answers come back.
- **A refusal** (a 429, or a gateway's bare 503) cuts the rate to a share of the
  rate the refused request was sent at, and that rate becomes the ceiling.
  Answers to requests sent before the cut are the same news: they do not cut
  again. A ``Retry-After`` also pauses every turn until then.
- **Then** the rate climbs back within seconds to just under the ceiling, and beyond it
  slowly at first and faster the longer nothing is refused, so a limit that rose
  is found again while a steady one refuses about one request in a hundred or more.

Turns go in arrival order (FIFO): the first in line starts one interval (1/rate)
after the previous start. How long a request waited behind others is returned
with its turn, so that a retry budget is charged only with the server's share of
the wait (a pause it asked for, one interval of its rate), never with our queue.
``servable()`` says how many requests that rate keeps busy (Little's law): more
in flight would only wait in the queue.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import NamedTuple

from reconciler.api.http.starts import RecentStarts
from reconciler.stop import Stop

log = logging.getLogger("reconciler.pacing")

START_RATE = 10.0  # requests/second before anything is known
SLOW_START_GAIN = 2.0  # rate multiplied by this per held start until the first refusal
# ... but never past this many times the rate of the last few starts: BBR's startup
# gain (2/ln 2), the least that still doubles what is sent every round trip. More
# only runs ahead of what is sent: when a token bucket's burst runs dry, every
# request then in flight is refused (issue 23's scenario b: 4 gave 1.2% refused).
STARTUP_GAIN = 2.89
IN_FLIGHT_GAIN = 2.0  # in slow start, in flight: this times what the last starts keep busy
# Tuned against a simulated nginx limit_req (5 and 10 r/s no burst, 20 r/s burst 10):
# deeper cuts and a slower climb cost a little rate but refuse half as many requests.
FIRST_CUT = 0.5  # share of the refused request's rate kept after a refusal far off the mark
CUT = 0.85  # ... after one near it: refused above the rate of the last cut
RECOVERY = 0.97  # share of the ceiling the rate climbs back to quickly
RECOVERY_TIME = 2.0  # seconds: time constant of that climb
# Beyond it: rate × (1 + PROBE × k²), k answers since, so a steady limit refuses about
# one request in a hundred and more (+3% after 100 answers, +12% after 200).
PROBE = 3e-6
MIN_RATE = 0.2  # requests/second: pacing never stops work altogether
MAX_RATE = 1e5  # requests/second: in practice unpaced
SETTLE = 5.0  # seconds without a cut before the rate is worth reporting
_LATENCY_WEIGHT = 0.2  # share of each answer's time in the moving average
SLEEP_SLICE = 0.25  # longest single sleep: a pause or a stop is noticed this soon


class NoTurn(Exception):
    """The caller's turn would not come in time, or its run stopped while it waited."""

    def __init__(self, wait: float, stopped: bool) -> None:
        super().__init__()  # no text: its one catcher (exchange) says what happened
        self.wait = wait  # seconds until the turn would have come
        self.stopped = stopped


class Turn(NamedTuple):
    """A request's start: the rate it was sent at, and what its wait cost."""

    rate: float  # requests/second when it started
    epoch: int  # cuts of the rate before it started: a refusal cuts only once
    queued: float  # seconds it waited behind other requests (not the server's doing)


class RequestPacer:
    def __init__(
        self,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
        start_rate: float = START_RATE,
    ) -> None:
        self._clock = clock
        self._sleep = sleep
        self._lock = threading.Lock()
        self._turned = threading.Condition(self._lock)  # a turn was taken or given up
        self._line: deque[object] = deque()  # tickets, first in line first
        self._rate = start_rate
        self._ceiling: float | None = None  # rate of the last refused request
        self._epoch = 0
        self._last_start = -math.inf
        self._starts = RecentStarts()
        self._pause = (0.0, 0.0)  # (from, until): a Retry-After, for every turn
        self._updated = clock()  # last change of the rate
        self._cut_at = self._updated  # last cut
        self._reached: int | None = None  # answers when the rate got back under the ceiling
        self._cut_rate = 0.0  # the rate the last cut set
        self._level = 0.0  # what the rate climbs back to after a cut
        self._streak = 0  # answers in a row not refused
        self._good_rate = 0.0  # rate of the latest answer that followed another one
        self._held = False  # the first in line is waiting for the rate's interval
        self._held_starts = 0  # starts the rate held back, not yet answered by a rise
        self._first_refusal: float | None = None
        self._accepted_since_cut = 0
        self._latency: float | None = None  # moving average of answered attempts
        self.answers = 0
        self.refusals = 0
        self.rate_limited_events = 0  # cuts of the rate
        self.said_limited = False  # the run has told the user of the limit (progress does)

    # -- what the rest of the run reads ------------------------------------------

    @property
    def rate(self) -> float | None:
        """The allowed rate in requests/second, once a refusal has shown there is one."""
        return self._rate if self._ceiling is not None else None

    @property
    def limited(self) -> bool:
        return self._ceiling is not None

    def settled_rate(self, *, early: bool = False) -> float | None:
        """The rate it settles at, once SETTLE seconds have passed without a cut (or at
        once when ``early``: a run ending sooner)."""
        if self._ceiling is None:
            return None
        if early:  # still climbing, perhaps to a level a burst made look too high
            return min(self._level, self._rate)
        if self._clock() - self._cut_at < SETTLE:
            return None
        return self._level

    def servable(self) -> int:
        """Requests in flight the rate keeps busy: rate × latency, and one waiting.

        In slow start the rate runs ahead of what is sent (STARTUP_GAIN times it), so
        the number in flight follows twice what the last starts came to (BBR's cwnd
        gain), which still doubles it every round trip: when a token bucket's burst
        runs dry, every request then in flight is refused.
        """
        with self._lock:
            rate = self._rate
            if self._ceiling is None:
                rate = min(rate, IN_FLIGHT_GAIN * self._starts.recent_rate()) or rate
            latency = self._latency or 0.0
        return max(1, math.ceil(min(rate, MAX_RATE) * latency) + 1)

    def describe(self) -> str:
        if self._ceiling is None:
            return f"no refusal in {self.answers} answers; paced at up to {self._rate:.3g}/s"
        return (
            f"{self.refusals} of {self.answers} answers refused; rate {self._rate:.3g}/s "
            f"(ceiling {self._ceiling:.3g}/s, cut {self.rate_limited_events} times)"
        )

    # -- turns -------------------------------------------------------------------

    def wait_turn(self, *, stop: Stop | None = None, budget_left: float | None = None) -> Turn:
        """Block until this request may start, in arrival order.

        Raises NoTurn once ``stop`` is set while a wait is still needed, or when a
        pause the server asked for outlasts ``budget_left`` (seconds; None: no budget
        running yet, as for a request not yet sent).
        """
        ticket = object()
        entered = self._clock()
        with self._lock:
            self._line.append(ticket)
        try:
            while True:
                with self._lock:
                    now = self._clock()
                    first = self._line[0] is ticket
                    stopped = stop is not None and stop.is_set()
                    if first:
                        spaced = self._last_start + 1.0 / self._rate
                        if spaced > now:
                            self._held = True  # the rate, not the caller, set this start
                        start = max(self._pause[1], spaced)
                        if stopped and self._ceiling is None and self._pause[1] <= now:
                            start = now  # slow start is ours: a stopping run's last calls go
                        if start <= now:
                            return self._start(ticket, entered, now)
                    wait = (start - now) if first else SLEEP_SLICE
                    paused = self._pause[1] - now
                    too_long = budget_left is not None and paused > budget_left
                    if not first and not stopped and not too_long:
                        # Woken by each turn taken; the slice only bounds a missed wake-up.
                        self._turned.wait(SLEEP_SLICE)
                        continue
                if stop is not None and stop.is_set():
                    raise NoTurn(max(wait, 0.0), stopped=True)
                if budget_left is not None and paused > budget_left:
                    raise NoTurn(paused, stopped=False)
                # Sleep outside the lock, then look again: a 429 may have paused us.
                self._sleep(min(wait, SLEEP_SLICE))
        except BaseException:
            with self._lock:
                if ticket in self._line:
                    self._line.remove(ticket)
                self._turned.notify_all()
            raise

    def _start(self, ticket: object, entered: float, now: float) -> Turn:
        """Hold the lock."""
        self._line.popleft()
        self._last_start = now
        if self._held:
            self._held = False
            self._held_starts += 1
        self._starts.add(now)
        self._turned.notify_all()
        waited = now - entered
        paused_from, paused_until = self._pause
        pause = max(0.0, min(now, paused_until) - max(entered, paused_from))
        # The server's share of the wait: its pause, and one interval of its rate.
        own = pause + (1.0 / self._rate if self._ceiling is not None else 0.0)
        return Turn(self._rate, self._epoch, max(0.0, waited - own))

    # -- answers -----------------------------------------------------------------

    def on_answer(
        self, turn: Turn, seconds: float, *, refused: bool, retry_after: float | None = None
    ) -> None:
        """One attempt's answer: ``refused`` when it was a rate signal (429, a bare 503)."""
        with self._lock:
            now = self._clock()
            self.answers += 1
            if refused:
                self.refusals += 1
                self._streak = 0
                if turn.epoch == self._epoch:  # sent at the rate now in force: news
                    self._cut(turn, now, retry_after)
                if retry_after:  # after the cut, which measures what came since the last pause
                    until = now + retry_after
                    if until > self._pause[1]:
                        self._pause = (now, until)
                return
            self._accepted_since_cut += 1
            self._streak += 1
            if self._streak >= 2 and turn.epoch == self._epoch:
                # Two in a row let through at this rate: a limit with no burst allows it.
                self._good_rate = turn.rate
            seconds = max(0.0, seconds)
            if self._latency is None:
                self._latency = seconds
            else:
                self._latency += _LATENCY_WEIGHT * (seconds - self._latency)
            self._raise(now)

    def _cut(self, turn: Turn, now: float, retry_after: float | None) -> None:
        """Hold the lock."""
        ceiling = turn.rate
        # Since the server's last pause ended: time it made us wait says nothing of
        # its rate, and counted, a storm of refusals with Retry-After would drive the
        # rate to its floor.
        offered = self._starts.offered(now, since=self._pause[1])
        if offered is not None:
            ceiling = min(ceiling, offered)  # the rate was not always the bottleneck
        # Nothing let through since the last cut is no cycle but the same storm of
        # refusals: measured as one, it would put the ceiling at the floor for good.
        cycle_known = (
            bool(retry_after) and self._first_refusal is not None and self._accepted_since_cut > 0
        )
        if cycle_known:
            # A pause then a burst: only a whole cycle says what the server lets through.
            cycle = self._accepted_since_cut / max(now - self._cut_at, SLEEP_SLICE)
            ceiling = min(ceiling, max(cycle, MIN_RATE))
        # Refused at no more than the last cut's rate: that cut was not deep enough, the
        # limit is far below; refused above it: the climb or the probe found the limit.
        near = self._ceiling is not None and turn.rate > self._cut_rate * 1.001
        share = CUT if near else FIRST_CUT
        self._ceiling = max(MIN_RATE, ceiling)
        self._reached = None
        self._rate = self._cut_rate = max(MIN_RATE, self._ceiling * share)
        self._level = RECOVERY * self._ceiling
        if retry_after and cycle_known:
            # The server named its pause and a whole cycle measured its rate: go
            # straight to just under it when the pause ends, no climb to wait for.
            self._rate = self._cut_rate = self._level
            self._reached = self.answers
        if near and self._good_rate:
            # Refused on the way back up: the last rate let through twice in a row is as
            # close as the limit is known; climbing to 97% of a refused rate would
            # only be refused again, a few percent lower each time.
            self._level = min(self._level, max(self._good_rate, self._rate))
        self._epoch += 1
        self._updated = self._cut_at = now
        self._good_rate = 0.0
        self._accepted_since_cut = 0
        self.rate_limited_events += 1
        if self._first_refusal is None:
            self._first_refusal = now
        log.debug(
            "refused at %.3g/s: rate %.3g/s, ceiling %.3g/s", turn.rate, self._rate, self._ceiling
        )

    def _raise(self, now: float) -> None:
        """Hold the lock."""
        if self._ceiling is None:
            # Slow start, raised only for starts the rate held back: when the run sends
            # no faster (the in-flight cap, a slow server), a higher rate says nothing
            # and would only be cut from far above when a limit shows (TCP's cwnd
            # validation, RFC 7661).
            if self._held_starts:
                self._held_starts -= 1
                # And never far past what the last few starts came to: one answer
                # must not double a rate that the run does not reach anyway.
                cap = max(START_RATE, STARTUP_GAIN * self._starts.recent_rate())
                self._rate = max(self._rate, min(self._rate * SLOW_START_GAIN, cap, MAX_RATE))
            return
        level = self._level
        if self._reached is None:
            elapsed = now - self._updated
            self._rate += (level - self._rate) * (1 - math.exp(-elapsed / RECOVERY_TIME))
            self._updated = now
            if self._rate >= level * 0.995:
                self._rate = level
                self._reached = self.answers
            return
        if not self._held_starts:
            return  # the run sends no faster than this: probing would say nothing
        self._held_starts -= 1
        probing = self.answers - self._reached
        self._rate = min(MAX_RATE, level * (1 + PROBE * probing * probing))
