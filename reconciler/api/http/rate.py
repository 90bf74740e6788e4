"""The rate the server allows, learned from every answer: slow start, a cut at each
refusal that is news, the climb back, and the probe beyond.

The platform does not publish its limit, and a gateway in front of it may enforce
one the way nginx's ``limit_req`` does: a steady rate, no burst, a 429 (or a bare
503) without ``Retry-After`` for every request that comes too early. So the rate
is found as TCP finds its window:

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

``servable()`` says how many requests that rate keeps busy (Little's law): more
in flight would only wait for their turns (``pacing``).
"""

from __future__ import annotations

import logging
import math

from reconciler.api.http.starts import RecentStarts

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
_SHORTEST_CYCLE = 0.25  # seconds: the least a cycle is measured over


class RateControl:
    """Not thread-safe: the pacer calls it under its lock."""

    def __init__(self, now: float, start_rate: float = START_RATE) -> None:
        self.rate = start_rate
        self.ceiling: float | None = None  # rate of the last refused request
        self.epoch = 0  # cuts so far: a request sent before the last one is old news
        self.starts = RecentStarts()
        self.pause = (0.0, 0.0)  # (from, until): a Retry-After, for every turn
        self._updated = now  # last change of the rate
        self._cut_at = now  # last cut
        self._reached: int | None = None  # answers when the rate got back under the ceiling
        self._cut_rate = 0.0  # the rate the last cut set
        self._level = 0.0  # what the rate climbs back to after a cut
        self._streak = 0  # answers in a row not refused
        self._good_rate = 0.0  # rate of the latest answer that followed another one
        self._held_starts = 0  # starts the rate held back, not yet answered by a rise
        self._first_refusal: float | None = None
        self._accepted_since_cut = 0
        self._latency: float | None = None  # moving average of answered attempts
        self.answers = 0
        self.refusals = 0
        self.cuts = 0

    def started(self, now: float, held: bool) -> None:
        """A request started; ``held``: the rate, not the caller, set when."""
        if held:
            self._held_starts += 1
        self.starts.add(now)

    def settled_rate(self, now: float, *, early: bool = False) -> float | None:
        if self.ceiling is None:
            return None
        if early:  # still climbing, perhaps to a level a burst made look too high
            return min(self._level, self.rate)
        if now - self._cut_at < SETTLE:
            return None
        return self._level

    def servable(self) -> int:
        rate = self.rate
        if self.ceiling is None:
            rate = min(rate, IN_FLIGHT_GAIN * self.starts.recent_rate()) or rate
        latency = self._latency or 0.0
        return max(1, math.ceil(min(rate, MAX_RATE) * latency) + 1)

    def describe(self) -> str:
        if self.ceiling is None:
            return f"no refusal in {self.answers} answers; paced at up to {self.rate:.3g}/s"
        return (
            f"{self.refusals} of {self.answers} answers refused; rate {self.rate:.3g}/s "
            f"(ceiling {self.ceiling:.3g}/s, cut {self.cuts} times)"
        )

    def answered(
        self,
        rate: float,
        epoch: int,
        seconds: float,
        now: float,
        *,
        refused: bool,
        retry_after: float | None,
    ) -> None:
        """One attempt's answer; ``rate`` and ``epoch`` are its turn's."""
        self.answers += 1
        if refused:
            self.refusals += 1
            self._streak = 0
            if epoch == self.epoch:  # sent at the rate now in force: news
                self._cut(rate, now, retry_after)
            if retry_after:  # after the cut, which measures what came since the last pause
                until = now + retry_after
                if until > self.pause[1]:
                    self.pause = (now, until)
            return
        self._accepted_since_cut += 1
        self._streak += 1
        if self._streak >= 2 and epoch == self.epoch:
            # Two in a row let through at this rate: a limit with no burst allows it.
            self._good_rate = rate
        seconds = max(0.0, seconds)
        if self._latency is None:
            self._latency = seconds
        else:
            self._latency += _LATENCY_WEIGHT * (seconds - self._latency)
        self._raise(now)

    def _cut(self, rate: float, now: float, retry_after: float | None) -> None:
        ceiling = rate
        # Since the server's last pause ended: time it made us wait says nothing of
        # its rate, and counted, a storm of refusals with Retry-After would drive the
        # rate to its floor.
        offered = self.starts.offered(now, since=self.pause[1])
        if offered is not None:
            ceiling = min(ceiling, offered)  # the rate was not always the bottleneck
        # Nothing let through since the last cut is no cycle but the same storm of
        # refusals: measured as one, it would put the ceiling at the floor for good.
        cycle_known = (
            bool(retry_after) and self._first_refusal is not None and self._accepted_since_cut > 0
        )
        if cycle_known:
            # A pause then a burst: only a whole cycle says what the server lets through.
            cycle = self._accepted_since_cut / max(now - self._cut_at, _SHORTEST_CYCLE)
            ceiling = min(ceiling, max(cycle, MIN_RATE))
        # Refused at no more than the last cut's rate: that cut was not deep enough, the
        # limit is far below; refused above it: the climb or the probe found the limit.
        near = self.ceiling is not None and rate > self._cut_rate * 1.001
        share = CUT if near else FIRST_CUT
        self.ceiling = max(MIN_RATE, ceiling)
        self._reached = None
        self.rate = self._cut_rate = max(MIN_RATE, self.ceiling * share)
        self._level = RECOVERY * self.ceiling
        if retry_after and cycle_known:
            # The server named its pause and a whole cycle measured its rate: go
            # straight to just under it when the pause ends, no climb to wait for.
            self.rate = self._cut_rate = self._level
            self._reached = self.answers
        if near and self._good_rate:
            # Refused on the way back up: the last rate let through twice in a row is as
            # close as the limit is known; climbing to 97% of a refused rate would
            # only be refused again, a few percent lower each time.
            self._level = min(self._level, max(self._good_rate, self.rate))
        self.epoch += 1
        self._updated = self._cut_at = now
        self._good_rate = 0.0
        self._accepted_since_cut = 0
        self.cuts += 1
        if self._first_refusal is None:
            self._first_refusal = now
        log.debug("refused at %.3g/s: rate %.3g/s, ceiling %.3g/s", rate, self.rate, self.ceiling)

    def _raise(self, now: float) -> None:
        if self.ceiling is None:
            # Slow start, raised only for starts the rate held back: when the run sends
            # no faster (the in-flight cap, a slow server), a higher rate says nothing
            # and would only be cut from far above when a limit shows (TCP's cwnd
            # validation, RFC 7661).
            if self._held_starts:
                self._held_starts -= 1
                # And never far past what the last few starts came to: one answer
                # must not double a rate that the run does not reach anyway.
                cap = max(START_RATE, STARTUP_GAIN * self.starts.recent_rate())
                self.rate = max(self.rate, min(self.rate * SLOW_START_GAIN, cap, MAX_RATE))
            return
        level = self._level
        if self._reached is None:
            elapsed = now - self._updated
            self.rate += (level - self.rate) * (1 - math.exp(-elapsed / RECOVERY_TIME))
            self._updated = now
            if self.rate >= level * 0.995:
                self.rate = level
                self._reached = self.answers
            return
        if not self._held_starts:
            return  # the run sends no faster than this: probing would say nothing
        self._held_starts -= 1
        probing = self.answers - self._reached
        self.rate = min(MAX_RATE, level * (1 + PROBE * probing * probing))
