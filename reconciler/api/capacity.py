"""The rate the server allows, learned from every answer (``RateControl``), from what
the run sent and the server let through (``RecentStarts``) and what answers take
(``Latencies``).

The platform does not publish its limit, and what stands in front of it may set one
in several ways, each refusing with a 429 or a bare 503: nginx's ``limit_req`` on
spacing (a request sooner than 1/rate after the last one let through is refused),
HAProxy's stick table on a sliding window (over N in the last second are refused,
and the refused ones count too), a token bucket (a burst, then a steady rate; with
``Retry-After`` or without), a server queue (HAProxy's ``maxconn``: every request
goes in, one that waited too long is answered 503). One rate rides all of them:

- **Slow start**: a run begins paced at ``START_RATE`` and, until the server first
  refuses a request, multiplies the rate by ``SLOW_START_GAIN`` for each start the
  rate held back, never past ``STARTUP_GAIN`` times what the last few starts came to.
  In flight: no more than twice what the last answers keep busy at the latency the
  server answers with unloaded (BBR's startup), so a queue is not filled far ahead of
  its answers.
- **A refusal that is news** sets the ceiling to what the server *let through* in the
  second before the refused request left (those not refused, still in flight ones
  included: they left first), not to the rate it was sent at: the fastest spacing let
  through when none came closer (a limit on spacing; not far below the spacing
  refused either, which crossed it), or what the second held when some came in a
  burst (a window, a bucket); after a wait in a queue, what the server answered
  lately. The rate is cut to ``CUT`` of the ceiling; one steady refusal leaves at
  least ``FLOOR`` of the last ceiling. Refusals of requests sent before the cut are
  the same news: no second cut; nor is one a late arrival explains (it, or the one
  before it, reached the server late, closer to the other than any two let through).
- **Nothing starts** for two intervals of that rate (``HOLD``), so no request, the
  refused one least, goes again before the window it was refused in can have moved.
  Refused again with nothing let through since is the same window (HAProxy counts
  the refused requests too): no cut, the hold doubles, up to ``MAX_HOLD``. A
  ``Retry-After`` holds every turn until then.
- **Then** the rate climbs back to just under the ceiling (``RECOVERY``) within
  seconds (``RECOVERY_TIME``), and beyond it slowly at first and faster the longer
  nothing is refused (``PROBE``): a limit that rose is found again, a steady one
  refuses about one request in a hundred or fewer. After a pause the server named
  the rate goes straight back (the pause emptied the limit), and probes as much more
  slowly as each refusal's pause costs; a late request holds the next one longer.
- **A run's first second** has not seen a whole window. When none went through in a
  burst, the limit is on spacing and what went through is a lower bound: the rate
  grows from it, doubling each second (``GROWTH``), until the next refusal sets the
  ceiling where the rate was. When some came in a burst, what went through is a
  window's rate, or a token bucket's burst: a lower bound too, until the window shows
  by refusing again with nothing let through (a bucket refills). With a pause named,
  refused at the spacing of the fastest let through (the client's own pace) is a
  window's or a bucket's count, kept; refused closer, the fastest spacing goes on
  trial after the pause (growth waits a window): a window shows by refusing again
  at an even spacing, and its count stands. Growth steps are as fine as the refused
  rate was near what went through.
- **One request refused again** while others were let through since is no news of
  the rate: a limit on all refuses the others too, and they say so. The second time
  it only holds; from the third (``OWN``) it is that request's own (a path limited on
  its own, a broken record): it backs off alone, as after a fault, and the others go
  on; a cut its first refusal made said nothing of the limit: the rate grows again.
- **A pause the server named** (``Retry-After``), then a refusal again at a spacing
  it let through, within ``CYCLE`` seconds: a token bucket refilled in the pause, so the whole
  cycle, pause included, says what it lets through in the long run; the rate goes
  straight to just under that when the pause ends.

- **A gateway's block** (its own 403, not the platform's: Apache's mod_evasive, a WAF's
  rate rule) is no window that moves: a burst blocker refuses everything for a while
  and restarts the while with each request it refuses. So nothing starts for a quiet
  period (``QUIET``, from the last refusal: those in flight extend it), then one
  request alone probes; refused, the quiet doubles (up to ``MAX_QUIET``); let through,
  the run resumes at ``BLOCK_CUT`` of what the gateway let through in the second
  before it blocked (in the refused request's own whole second of the wall clock too:
  ``_blocked_at``), and does not probe above it (each probe past a blocker's limit
  costs a whole block) until ``REGROW_AFTER`` seconds pass with nothing refused: then
  it grows again as from a lower bound (one block early in a run, a false positive,
  is no ceiling for good), and each later block doubles that wait.
- **``max_rate``**, the user's: the rate never goes above it.

``servable()`` says how many requests that rate keeps busy (Little's law): more
in flight would only wait for their turns (``pacing``).

Turns to start a request, handed out in arrival order, at the rate the server
allows (learned in ``rate``; with the in-flight limit it makes the run's
``concurrency.Capacity``).

Turns go in arrival order (FIFO): the first in line starts one interval (1/rate)
after the previous request reached the server, and never while the server has asked
for a pause or the hold after its refusals lasts. A request reached the server when it
left, unless its answer came late (a connection opened, a thread scheduled late): then
about as late, and one not answered yet and late already holds the next one by up to
one more interval, or a limit on spacing (nginx's ``limit_req``) sees the two too
close. How long a request waited behind others is returned with its turn, so that a
retry budget is charged only with the server's share of the wait (its pause, the hold
after its refusals, one interval of its rate), never with our queue.

How many requests may be in flight: at most ``parallelism`` (or ``max_parallelism``),
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

import bisect
import logging
import math
import threading
import time
from collections import Counter, deque
from collections.abc import Callable
from statistics import median_high  # the upper of two middle ones: sorted[n // 2]
from typing import TYPE_CHECKING, NamedTuple, Protocol

from reconciler.settings.config import Settings

if TYPE_CHECKING:
    from reconciler.api.concurrency import Stop  # it imports this module

# -- rate ----------------------------------------------------------------------

log = logging.getLogger("reconciler.pacing")

START_RATE = 10.0  # requests/second before anything is known
SLOW_START_GAIN = 2.0  # rate multiplied by this per held start until the first refusal
# ... but never past this many times the rate of the last few starts: BBR's startup
# gain (2/ln 2), the least that still doubles what is sent every round trip. More
# only runs ahead of what is sent: when a token bucket's burst runs dry, every
# request then in flight is refused (issue 23's scenario b: 4 gave 1.2% refused).
STARTUP_GAIN = 2.89
IN_FLIGHT_GAIN = 2.0  # in slow start, in flight: this times what the last answers keep busy
QUEUEING = 1.5  # a refusal this many times slower than the fastest answer waited in a queue
QUEUED = 0.1  # ... and this many seconds slower: a late thread, a new connection costs less
FLOOR = 0.5  # share of the ceiling a steady refusal leaves at least
CUT = 0.85  # share of what the server let through that a refusal leaves
RECOVERY = 0.97  # share of the ceiling the rate climbs back to quickly
RECOVERY_TIME = 2.0  # seconds: time constant of that climb
# Beyond it: rate × (1 + PROBE × k²), k answers since, so a steady limit refuses about
# one request in a hundred and fewer (+3% after 100 answers, +12% after 200).
PROBE = 3e-6
# Grown from a lower bound: this much per start the rate held back, so it doubles each
# second the run sends at it.
GROWTH = math.log(2)
FINEST = 0.1  # share of GROWTH at least, when the refused rate was just above the bound
HOLD = 2.0  # intervals of what the server let through: no start after a refusal ...
MAX_HOLD = 4.0  # seconds: ... doubled while refused with nothing let through, up to this
TIGHTER = 0.99  # the refused one this much closer than any let through: it crossed a spacing
BURST = 1.5  # let through this much faster than on average: a window or a token bucket
FIRST_CUT = 0.5  # share of the refused rate kept when nothing says how far off it was
OWN = 2  # refusals of one request, each after others were let through: its own
CYCLE = 3.0  # seconds: the longest cycle of pause and burst measured as one
MIN_RATE = 0.2  # requests/second: pacing never stops work altogether
MAX_RATE = 1e5  # requests/second: in practice unpaced
SETTLE = 5.0  # seconds without a cut before the rate is worth reporting
# A gateway's block: seconds of quiet first (mod_evasive's DOSBlockingPeriod counts in
# whole seconds from the last refused request; 5 s and 10 s are the settings guides give),
# doubled while the probe after it is refused, up to MAX_QUIET.
QUIET = 5.1
MAX_QUIET = 60.0
# Share of what a blocker let through in the second before it blocked: a fixed window of
# whole seconds (mod_evasive's) holds less than a sliding second before the refusal can
# (22 or 23 for DOSSiteCount 20: 90% of that tripped it again).
BLOCK_CUT = 0.8
# A block's rate is no ceiling for good: one refusal early in a run (a WAF's false
# positive, a block met in slow start, when the second before held two requests) would
# pace the rest of it at what that second held. After this many seconds with nothing
# refused, the rate grows again from where it is (as from a lower bound: doubling each
# second it is sent at), and the next block sets the ceiling anew; each block doubles
# the wait before the next growth (a real blocker's limit is then paid for ever less).
REGROW_AFTER = 15.0
_SHORTEST_CYCLE = 0.25  # seconds: the least a cycle is measured over
# Pauses and holds that ended, kept: a request still in line may have waited through
# them, and its retry budget is charged for them, not for its queueing (see ``closed``).
ENDED_KEPT = 64


class RateControl:
    """Not thread-safe: the pacer calls it under its lock."""

    def __init__(
        self,
        now: float,
        start_rate: float = START_RATE,
        max_rate: float | None = None,
        wall: float = 0.0,
    ) -> None:
        self._cap = min(max_rate, MAX_RATE) if max_rate else MAX_RATE  # the user's max_rate
        self._wall = wall  # the wall clock's time less this clock's: whole seconds
        self.rate = min(start_rate, self._cap)
        self.ceiling: float | None = None  # what the server let through when it refused
        self.epoch = 0  # cuts and holds so far: a request sent before the last is old news
        self.starts = RecentStarts()
        self.latency = Latencies()
        never = (-math.inf, -math.inf)
        self.pause = never  # (from, until): the server asked for it (Retry-After)
        self.hold = never  # (from, until): after a refusal, till its window can have moved
        self._ended: deque[tuple[float, float]] = deque(maxlen=ENDED_KEPT)
        self._hold = 0.0  # seconds of the last hold
        self._held = 0.0  # what the window held before the run's first refusal, per second
        self._trial = False  # the rate is the fastest spacing of the run's first second, on trial
        self._paused = 0.0  # seconds of the pause the last cut's refusal named
        self._fresh = -math.inf  # the end of the last cut's hold: what the limit let through since
        self._growth = GROWTH  # per start, grown from a lower bound
        self._passed = 0.0  # the fastest spacing the last refusal's limit let through
        self._late = -math.inf  # when the last request let through late reached the server
        self._lower_bound = False  # the ceiling is a lower bound: grow from it
        self._updated = now  # last change of the rate
        self._cut_at = now  # last cut
        self._reached: int | None = None  # answers when the rate got back under the ceiling
        self._level = 0.0  # what the rate climbs back to after a cut
        self._held_starts = 0  # starts the rate held back, not yet answered by a rise
        self._let_since_cut = 0  # answers let through since the last cut
        self._let_since = 0  # ... of requests sent since the last cut or hold
        self.answers = 0
        self.let = 0  # answers let through: a request refused again and again after some is its own
        self.refusals = 0
        self.cuts = 0
        self.blocks = 0  # gateway's blocks (its own 403s that were news)
        self.probing = False  # after a block's quiet: one request alone, till it is answered
        self.quiet = QUIET  # seconds of the next quiet period
        self._regrow_after = REGROW_AFTER  # seconds with nothing refused: grow past a block
        self._resumed = now  # when the last block's probe was let through
        self._first_block: tuple[int, float] | None = None  # let through before it, at what rate
        self._first_block_at = now  # when it came
        self._waited = 0.0  # the quiet waited before the last probe refused

    # -- what the pacer reads ----------------------------------------------------

    def settled_rate(self, now: float, *, early: bool = False) -> float | None:
        if self.ceiling is None or (not early and now - self._cut_at < SETTLE):
            return None
        # Early: still climbing, perhaps to a level a burst made look too high.
        return min(self._level, self.rate) if early else self._level

    def servable(self) -> int:
        rate = self.rate
        latency = self.latency.average or 0.0
        at_cap = self._cap < MAX_RATE and self.rate >= self._cap  # the user's max_rate
        if (self.ceiling is None or self._lower_bound) and not at_cap:
            # Still finding the rate, which runs ahead of what is sent: twice what the
            # last answers keep busy at the unloaded latency (BBR's startup). A queue
            # at the server (HAProxy's maxconn) is not filled far ahead of its answers.
            rate = min(rate, IN_FLIGHT_GAIN * self.starts.delivery_rate()) or rate
            latency = min(latency, self.latency.unloaded() or latency)
            if self._trial:
                # The fastest spacing is on trial: if a window or a bucket's burst ran dry
                # instead, each request then in flight is refused. Those its count keeps busy.
                rate = min(rate, self._held)
        return max(1, math.ceil(min(rate, self._cap) * latency) + 1)

    def late_hold(self) -> float:
        """How long a request not answered yet and late already may hold the next: one
        interval, or longer while a refusal costs a pause the server names."""
        return max(1.0 / self.rate, min(self._paused, QUEUED))

    def closed(self) -> tuple[tuple[float, float], ...]:
        """When no request may start, or could not: the server's pause and the hold after
        a refusal, and those that ended lately (a request in line may have waited
        through several, one right after another). They may overlap."""
        return (*self._ended, self.pause, self.hold)

    def _until(self, closed: tuple[float, float], now: float, until: float) -> tuple[float, float]:
        """``closed`` (from, until) extended to ``until``; one that has ended is kept on
        record (``closed()``) and a new one begins now."""
        if until <= closed[1]:
            return closed
        if closed[1] > now:
            return (closed[0], until)
        if closed[1] > closed[0]:  # not the empty one a run starts with
            self._ended.append(closed)
        return (now, until)

    def describe_block(self, now: float) -> str:
        """What a gateway's blocks came to, for a message: what went through first, how
        long it kept refusing, and the longest quiet waited before a refused request."""
        if self._first_block is None:
            return "it refused before any answer got through"
        let, rate = self._first_block
        waited = f", the last after a quiet of {self._waited:.3g} s" if self._waited else ""
        return (
            f"{let} answer{'s' if let != 1 else ''} got through before it first refused, "
            f"about {rate:.3g} a second in the second before; it kept refusing for "
            f"{max(now - self._first_block_at, 0.0):.3g} s{waited}"
        )

    def describe(self) -> str:
        if self.ceiling is None:
            return f"no refusal in {self.answers} answers; paced at up to {self.rate:.3g}/s"
        blocks = f", blocked {self.blocks} times by a gateway" if self.blocks else ""
        return (
            f"{self.refusals} of {self.answers} answers refused; rate {self.rate:.3g}/s "
            f"(ceiling {self.ceiling:.3g}/s, cut {self.cuts} times{blocks})"
        )

    # -- what the pacer tells ----------------------------------------------------

    def started(self, now: float, held: bool) -> None:
        """A request started; ``held``: the rate, not the caller, set when."""
        if held:
            self._held_starts += 1
        self.starts.add(now)

    def answered(
        self,
        turn: Turn,
        seconds: float,
        now: float,
        refused: bool,
        retry_after: float | None,
        again: Refusal | None,
        blocked: bool,
    ) -> Refusal | None:
        """One attempt's answer; ``again``: what its request's last refusal said. A
        refusal says whether it was the request's own (then it waits alone)."""
        epoch, started = turn.epoch, turn.at
        self.answers += 1
        if refused or blocked:
            return self._refused(turn, seconds, now, retry_after, again, blocked)
        self.let += 1
        self._let_since_cut += 1
        self._let_since += epoch == self.epoch
        if self.probing and epoch == self.epoch:  # sent after a block's quiet: it is over
            self.probing = False
            self._resumed = now
        arrived = self.latency.arrived(started, seconds, now)
        if arrived > started:  # it reached the server late: the next one soon after
            self._late = arrived
            self.starts.arrived(started, arrived)
        self.starts.answered(now)
        self.latency.add(seconds)
        self._raise(now)
        return None

    def _refused(
        self,
        turn: Turn,
        seconds: float,
        now: float,
        retry_after: float | None,
        again: Refusal | None,
        blocked: bool,
    ) -> Refusal:
        epoch, started = turn.epoch, turn.at
        self.refusals += 1
        self.starts.refused(started)
        if blocked:  # a gateway's own 403: see block_seen
            self.block_seen(turn.rate, epoch, started, now)
            return Refusal(self.let, 0, False)
        # Refused again while others were let through since: a strike.
        strikes = again.strikes + (self.let > again.let) if again is not None else 0
        if again is not None and strikes >= OWN:
            # Refused again and again while others were let through: this request's own
            # (a path refused on its own, a broken record), not a limit on all. It
            # waits alone; a limit on all refuses the others too, and they say so. (Once
            # is no news of the rate either, for the same reason: it only holds.) The
            # cut its first refusal made said nothing of the limit: the rate grows again
            # from where it is, as from a lower bound; not after a pause of 0, which sent
            # a retry at once into a server refusing a steady share.
            first = not again.own and again.cut == self.cuts
            if first and retry_after != 0 and self.ceiling is not None and not self.blocks:
                self._lower_bound, self._level, self._reached = True, self.rate, self.answers
            return Refusal(self.let, strikes, True, again.cut)
        cuts = self.cuts
        news = epoch == self.epoch and strikes <= 0  # sent since the last cut or hold
        explained = news and self._jitter(started, seconds, now)
        if news and not explained:
            if self.ceiling is not None and not self._let_since:
                self._hold_longer(now)  # nothing let through since: the same window
            else:
                self._cut(turn.rate, started, seconds, now, retry_after)
        # Whatever else: no request, the refused one least, goes before its window can
        # have moved (one interval of the rate), nor before a Retry-After.
        self.hold = self._until(self.hold, now, now + 1.0 / self.rate)
        if retry_after:
            self.pause = self._until(self.pause, now, now + retry_after)
        cut = again.cut if again is not None else self.cuts if self.cuts > cuts else -1
        # Explained by a late arrival: no strike, the next refusal of it is news again.
        return Refusal(self.let, -1 if explained else strikes, False, cut)

    def block_seen(self, rate: float, epoch: int, started: float, now: float) -> None:
        """A gateway's own 403 (or another pacer's, the re-send's) to a request that left
        at ``started`` at ``rate``: nothing starts for a quiet period from now. News (sent
        since the last block or cut): a probe refused doubles the quiet; otherwise the
        gateway blocked at what it let through in the second before, and the rate goes to
        BLOCK_CUT of that. Old news (in flight when the block began): the quiet starts
        again from now, as the gateway's block does on every request it refuses."""
        if epoch == self.epoch:
            if self.probing and not self._let_since:
                self._waited = self.quiet
                self.quiet = min(2 * self.quiet, MAX_QUIET)  # the block outlasted the quiet
            else:
                let = self.starts.let_through(started, started - WINDOW).number
                if self._first_block is None:
                    self._first_block = (self.let, let / WINDOW)
                    self._first_block_at = now
                measured = self._blocked_at(let, started) if let else FIRST_CUT * rate
                # Grown past a block's rate, that rate bounds nothing: this one measures.
                before = math.inf if self._lower_bound else self.ceiling or math.inf
                if self.blocks:
                    self._regrow_after *= 2
                self.ceiling = max(MIN_RATE, min(measured, rate, before))
                self.rate = self._level = max(MIN_RATE, BLOCK_CUT * self.ceiling)
                self._reached = self.answers
                self._lower_bound = False
                self.blocks += 1
                log.debug(
                    f"blocked by a gateway at {rate:.3g}/s, {let} let through in the second "
                    f"before: rate {self.rate:.3g}/s, nothing starts for {self.quiet:.2f}s, "
                    "then one probes"
                )
            self.probing = True
            self._close(now, self.quiet, cut=True)
        else:
            self.hold = self._until(self.hold, now, now + self.quiet)
            self._fresh = self.hold[1]

    def _blocked_at(self, let: int, started: float) -> float:
        """What a blocker allows a second, from the ``let`` let through in the second
        before the request that left at ``started``. A window of whole seconds of the
        clock (mod_evasive's) lets through up to twice its count in a second that
        straddles two of them (a burst at the turn of a second: 70 for DOSSiteCount 50),
        so what the refused request's own whole second let through counts too; never
        less than half the second before (a sliding window refusing just after the turn
        of a second let through little in it)."""
        second = math.floor(started + self._wall) - self._wall
        own = self.starts.let_through(started, max(second, started - WINDOW)).number
        return min(let, max(own, let / 2)) / WINDOW

    # -- refusals ----------------------------------------------------------------

    def _cut(
        self, rate: float, started: float, seconds: float, now: float, retry_after: float | None
    ) -> None:
        let, measured, cycled = self._measure(rate, started, seconds, now, retry_after)
        self.ceiling = max(MIN_RATE, min(measured, rate))  # refused at `rate`: it is above
        self.rate = max(MIN_RATE, CUT * self.ceiling)
        # No lower than the fastest spacing let through, if that was measured: it passed.
        self._level = min(self.ceiling, max(RECOVERY * self.ceiling, self._passed))
        self._passed = 0.0
        self._reached = None
        self._paused = retry_after or 0.0
        if cycled or retry_after:
            # A pause the server named empties the limit (a whole cycle measured a
            # bucket's rate): straight to just under it when the pause ends, no climb.
            self.rate = self._level
            self._reached = self.answers
        if self._lower_bound:
            self._level = self.rate  # grow from it at once
            self._reached = self.answers
            # ... in steps as fine as the refused rate is near what was let through.
            self._growth = GROWTH * (max(1.0 - self.ceiling / rate, FINEST) if let else 1.0)
        # Two intervals of the rate it was refused at, or of what it let through.
        self._hold = min(HOLD / max(self.ceiling, min(rate, measured)), MAX_HOLD)
        self._close(now, self._hold, cut=True)
        self.cuts += 1
        log.debug(
            f"refused at {rate:.3g}/s, {let} let through in the second before: rate "
            f"{self.rate:.3g}/s, ceiling {self.ceiling:.3g}/s"
            f"{' (at least)' if self._lower_bound else ''}, nothing starts for {self._hold:.2f}s"
        )

    def _close(self, now: float, seconds: float, *, cut: bool) -> None:
        """Nothing starts for ``seconds``: a refusal of a request sent before is old news
        (``epoch``); ``cut``: of the rate, or a block (not a hold doubled)."""
        self.hold = self._until(self.hold, now, now + seconds)
        self._fresh = self.hold[1]
        self.epoch += 1
        self._updated = now
        self._let_since = 0
        if cut:
            self._cut_at, self._let_since_cut = now, 0

    def _measure(
        self, rate: float, started: float, seconds: float, now: float, retry_after: float | None
    ) -> tuple[int, float, bool]:
        """What the server let through before it refused the request that left at
        ``started`` at ``rate``: how many in the second before, at what rate, and
        whether a cycle of pause and burst measured it."""
        held, self._held, self._trial = self._held, 0.0, False
        growing, self._lower_bound = self._lower_bound, False
        first = self.starts.first
        since = max(started - WINDOW, first, min(max(self.pause[1], self._fresh), started))
        let = self.starts.let_through(started, since)
        served = self._served(seconds)
        if not let.number:  # nothing let through lately
            self._lower_bound = not served
            return 0, served or min(rate, START_RATE), False
        # From the first one let through to the refused one: as many intervals.
        average = let.number / max(started - let.first, 1.0 / rate)
        # Some let through much faster than on the whole: the limit allows a burst (a
        # window, a token bucket). If not, it is on spacing (nginx's limit_req): none
        # went through closer than it allows, the refused one did.
        burst = bool(let.gap) and 1.0 / let.gap > BURST * average
        # A limit on spacing refuses only a request closer than any it let through: one
        # refused no closer than the fastest met a window, an empty bucket or a late one.
        before = self.starts.before(started)
        gap = started - before if before is not None else 0.0
        spaced = not let.gap or gap < TIGHTER * let.gap
        cycled = False
        if self.ceiling is None and started - first < WINDOW:
            even = not spaced and gap <= let.gap / TIGHTER  # as close as the fastest
            measured = self._young(let, burst, rate, retry_after, even)
        elif not spaced and self.pause[1] <= started < self.pause[1] + WINDOW:
            # Within a window of the server's pause, refused at a spacing it let through:
            # a window, which held what it let through after the pause, and nothing from
            # the pause (and no less than in the run's first second: HAProxy's still
            # counts some from before the pause).
            window = max(started - WINDOW, first)
            measured = self.starts.let_through(started, window).number / (started - window)
            measured = max(measured, held)
        elif growing:
            measured = self._crossed(let, started, average, rate)
        else:
            measured = self._steady(let, started - since, average, burst, rate, gap)
            if self.ceiling is not None:
                # One refusal (jitter, another pacer's requests) halves the ceiling at most.
                measured = max(measured, FLOOR * self.ceiling)
            if not spaced and retry_after and now - CYCLE <= self._cut_at <= self.pause[1]:
                # A pause the server named, then refused again at the spacing it let
                # through: a token bucket refilled in the pause, so only the whole cycle
                # says what it lets through in the long run. Over a longer cycle the
                # burst matters less than the pause, which says nothing of a window's rate.
                cycle = self._let_since_cut / max(now - self._cut_at, _SHORTEST_CYCLE)
                measured, cycled = min(measured, cycle), cycle < measured
        return let.number, min(measured, served or math.inf), cycled

    def _crossed(self, let: LetThrough, started: float, average: float, rate: float) -> float:
        """Refused while growing from a lower bound: a limit that refuses as soon as the
        rate crosses it (nginx's limit_req, an empty token bucket) is about where the
        rate was; a window is soon refused again, and measured then. Refused closer than
        any let through: between the fastest spacing let through and the refused one,
        the level climbed back to no lower than the fastest (``_passed``), nor far below
        the refused one (let through sparsely, others refused between)."""
        if not let.gap or started - let.last >= let.gap:
            return max(average, rate)
        self._passed, sent = 1.0 / let.gap, 1.0 / (started - let.last)
        return max(self._passed, min(sent, self._passed / RECOVERY), CUT * sent)

    def _jitter(self, started: float, seconds: float, now: float) -> bool:
        """Whether a late arrival explains the refusal: the request, or the one before
        it, reached the server late (a thread scheduled late), closer to the other than
        any two let through lately; a limit on spacing refuses it however slow the
        rate. A queue's wait is no jitter; a refusal in slow start or while the rate
        grows from a lower bound is most likely the limit: news."""
        if self.ceiling is None or self._lower_bound or self._served(seconds):
            return False
        before = self.starts.before(started)
        late = self.latency.arrived(started, seconds, now) > started
        if before is None or not (late or before == self._late):
            return False
        gap = self.starts.let_through(started, started - WINDOW).gap
        return not gap or started - before < TIGHTER * gap

    def _served(self, seconds: float) -> float:
        """What a server queue serves (0: no sign of one): a refusal later than answers
        come waited in a queue (HAProxy's maxconn), where everything went in."""
        fastest = self.latency.fastest()
        if fastest and seconds > max(QUEUEING * fastest, fastest + QUEUED):
            return self.starts.delivery_rate()
        return 0.0

    def _young(
        self, let: LetThrough, burst: bool, rate: float, retry_after: float | None, even: bool
    ) -> float:
        """A run younger than the window has not seen a whole one: a window let through a
        window's worth (its rate), a token bucket its burst and its rate since (more or
        less than its rate), a limit on spacing about its rate. A lower bound to grow
        from, unless a burst came with a pause named: a window's is what it let through,
        a bucket's shows in the next cycle; but unless refused at the spacing of the
        fastest let through (``even``: the client's own pace, which no spacing limit
        refuses), the fastest may be a spacing's rate: on trial after the pause
        (``_trial``), where a window lets as many through again at one spacing, then
        refuses."""
        self._held = let.number / WINDOW  # a window's rate, if it remembers (see _hold_longer)
        self._trial = burst and bool(retry_after) and not even
        self._lower_bound = self._trial or not (burst and retry_after)
        if self._trial:
            return 1.0 / let.gap
        if burst:
            return self._held
        return (let.number - 1) / (let.last - let.first) if let.number > 1 else FIRST_CUT * rate

    def _steady(
        self, let: LetThrough, span: float, average: float, burst: bool, rate: float, gap: float
    ) -> float:
        """A window or a bucket: what the window (``span`` seconds) before the refusal
        held. A limit on spacing: the fastest it let through, and not far below the rate
        refused, which crossed it (sent a little too fast, every other one is refused):
        ``gap`` after the start before it (0: none)."""
        if burst:
            return let.number / max(span, 1.0 / rate)
        sent = min(rate, 1.0 / gap) if gap else rate
        return max(average, 1.0 / let.gap if let.gap else 0.0, CUT * sent)

    def _hold_longer(self, now: float) -> None:
        """Refused again, nothing let through since the last cut: the same window, no
        news of the rate. Nothing starts for twice as long as the last hold."""
        self._hold = min(2 * self._hold, MAX_HOLD)
        self._close(now, self._hold, cut=False)
        # A limit that remembers what it was sent (a window, not a spacing): what it
        # let through in the window before it refused is its rate, not a lower bound.
        # (Only within that window: later, after a pause, it is a storm of refusals.)
        remembers = now - self._cut_at < WINDOW
        if self._lower_bound and self.ceiling is not None and self._held and remembers:
            self._lower_bound = False
            self.ceiling = max(MIN_RATE, min(self.ceiling, self._held))
            self.rate = max(MIN_RATE, min(self.rate, CUT * self.ceiling))
            self._level = RECOVERY * self.ceiling
            self._reached = None
        log.debug(f"refused again, nothing let through since: nothing starts for {self._hold:.2f}s")

    # -- answers let through -----------------------------------------------------

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
                self.rate = max(self.rate, min(self.rate * SLOW_START_GAIN, cap, self._cap))
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
        if self._lower_bound:
            if self._trial and now < self.pause[1] + WINDOW:
                return  # a window shows after the pause, refusing at an even spacing
            self._trial = False
            self.rate = self._level = min(self._cap, self.rate + self._growth)
            return
        if self.blocks:
            # Past a blocker's limit, a probe costs a whole block: not until a long
            # stretch with nothing refused says the rate may be far below it.
            clear = now - max(self._resumed, self._cut_at)
            if not self.probing and clear >= self._regrow_after and self.rate < self._cap:
                self._lower_bound = True
                log.debug(
                    f"nothing refused for {clear:.3g} s since the gateway's block: the rate "
                    f"({self.rate:.3g}/s) grows again"
                )
            return
        # Each refusal that names a pause costs the whole pause: probe as much slower.
        probing = (self.answers - self._reached) / (1.0 + self._paused * level)
        self.rate = min(self._cap, level * (1 + PROBE * probing * probing))


WINDOW = 1.0  # seconds: what was let through in the window before a refusal is the rate
STARTS_KEPT = 3.0  # seconds of starts kept: a queue refuses a request a second or more after
RECENT = 8  # starts that measure it during slow start, when it changes fast


class LetThrough(NamedTuple):
    """Requests let through in a span: how many, when the first and the last of them
    started, and the shortest time between two of them."""

    number: int
    first: float
    last: float
    gap: float


class RecentStarts:
    """Not thread-safe: the pacer calls it under its lock."""

    def __init__(self) -> None:
        self._times: deque[float] = deque()  # start times within the last STARTS_KEPT seconds
        self._refused: deque[float] = deque()  # start times of those refused, the same
        self._answered: deque[float] = deque(maxlen=RECENT)  # times of the last answers let through
        self.first = math.inf  # the run's first start

    def add(self, now: float) -> None:
        self.first = min(self.first, now)
        self._times.append(now)
        while self._times[0] < now - STARTS_KEPT:
            self._times.popleft()

    def arrived(self, started: float, at: float) -> None:
        """The request started at ``started`` reached the server later, at ``at``: what
        a limit on spacing saw."""
        times = self._times
        if started in times:
            times.remove(started)
            times.insert(bisect.bisect(times, at), at)

    def refused(self, started: float) -> None:
        """The request started at ``started`` was refused."""
        self._refused.append(started)
        while self._refused[0] < started - STARTS_KEPT:
            self._refused.popleft()

    def let_through(self, before: float, since: float) -> LetThrough:
        """Requests started in [``since``, ``before``) and not refused (so far: one still
        in flight that left before a refused one was let through), when the first and
        the last of them started (``before`` when none), and the shortest time between
        two of them (0 when fewer than two)."""
        refused = Counter(t for t in self._refused if since <= t < before)
        count, first, last, gap = 0, before, -math.inf, math.inf
        for t in self._times:
            if since <= t < before:
                if refused[t]:
                    refused[t] -= 1
                    continue
                count += 1
                first = min(first, t)
                gap = min(gap, t - last)
                last = t
        return LetThrough(count, first, last if count else before, gap if count > 1 else 0.0)

    def before(self, started: float) -> float | None:
        """When the start before the one at ``started`` was (None: none kept)."""
        earlier = [t for t in self._times if t < started]
        return earlier[-1] if earlier else None

    def answered(self, now: float) -> None:
        """An answer that was not a refusal came."""
        self._answered.append(now)

    def delivery_rate(self) -> float:
        """Answers let through per second over the last RECENT (0: too few to tell)."""
        answered = self._answered
        return _per_second(len(answered), answered[0], answered[-1]) if answered else 0.0

    def recent_rate(self) -> float:
        """Starts per second over the last RECENT starts (0: too few to tell)."""
        count = min(len(self._times), RECENT)  # read from the newest end
        return _per_second(count, self._times[-count], self._times[-1]) if count else 0.0


def _per_second(count: int, oldest: float, newest: float) -> float:
    """``count`` events from ``oldest`` to ``newest``, per second (0: too few to tell)."""
    return (count - 1) / (newest - oldest) if count > 1 and newest > oldest else 0.0


WEIGHT = 0.2  # share of each answer's time in the moving average
BLOCK = 16  # answers whose times are kept: a block
BLOCKS = 4  # blocks whose medians are kept
LATE = 1.25  # an answer this much slower than unloaded: it probably left late


class Latencies:
    """Not thread-safe: the pacer calls it under its lock."""

    def __init__(self) -> None:
        self.average: float | None = None
        self._last: deque[float] = deque(maxlen=BLOCK)
        self._medians: deque[float] = deque(maxlen=BLOCKS)  # of the last blocks
        self._counted = 0

    def add(self, seconds: float) -> None:
        """An answer that was not a refusal came ``seconds`` after its request left."""
        seconds = max(0.0, seconds)
        self._last.append(seconds)
        self._counted += 1
        if self._counted % BLOCK == 0:
            self._medians.append(median_high(self._last))
        average = self.average
        self.average = seconds if average is None else average + WEIGHT * (seconds - average)

    def unloaded(self) -> float:
        """What an answer takes when the server is not loaded: the lowest median of the
        last blocks of answers (and of the last answers), which neither a cache hit now
        and then nor a queue that builds up at the server moves (0: none yet)."""
        if not self._last:
            return 0.0
        return min(median_high(self._last), min(self._medians, default=math.inf))

    def forget_floor(self) -> None:
        """The server's latency changed: the answers kept say nothing of it now (the
        moving average, quick to follow, stays)."""
        self._last.clear()
        self._medians.clear()
        self._counted = 0

    def fastest(self) -> float:
        """The fastest of the last answers (0: none yet)."""
        return min(self._last, default=0.0)

    def arrived(self, started: float, seconds: float, now: float) -> float:
        """When a request that left at ``started`` and was answered ``seconds`` later (at
        ``now``) most likely reached the server: then, unless it was answered late (a
        connection opened, a thread scheduled late): then as late as its answer was."""
        unloaded = self.unloaded()
        if not unloaded or seconds <= LATE * unloaded:
            return started
        return max(started, now - unloaded)


# -- pacing --------------------------------------------------------------------

SLEEP_SLICE = 0.25  # longest single sleep: a pause or a stop is noticed this soon


class NoTurn(Exception):
    """The caller's turn would not come in time, or its run stopped while it waited."""

    def __init__(self, wait: float, stopped: bool, asked: bool = True) -> None:
        super().__init__()  # no text: its one catcher (exchange) says what happened
        self.wait = wait  # seconds until the turn would have come
        self.stopped = stopped
        self.asked = asked  # a pause the server asked for (Retry-After), not a hold


class Turn(NamedTuple):
    """A request's start: the rate it was sent at, and what its wait cost."""

    rate: float  # requests/second when it started
    epoch: int  # cuts of the rate before it started: a refusal cuts only once
    queued: float  # seconds it waited behind other requests (not the server's doing)
    at: float  # when it started (the pacer's clock)


class Refusal(NamedTuple):
    """What the pacer made of a refusal, told again if the same request is refused again."""

    let: int  # answers let through so far
    strikes: int  # times in a row this request was refused while others were let through
    own: bool  # the request's own, not the server's limit on all: it waits alone
    cut: int = -1  # the pacer's cuts once its first refusal cut the rate (-1: it did not)


class RequestPacer:
    def __init__(
        self,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
        start_rate: float = START_RATE,
        max_rate: float | None = None,
    ) -> None:
        self._clock = clock
        self._sleep = sleep
        self._lock = threading.Lock()
        self._turned = threading.Condition(self._lock)  # a turn was taken or given up
        self._line: deque[object] = deque()  # tickets, first in line first
        now = clock()
        # Whole seconds of the wall clock (a blocker's windows), on the pacer's clock; a
        # clock of the caller's own (a test's) is its own wall clock.
        wall = time.time() - now if clock is time.monotonic else 0.0
        self._control = RateControl(now, start_rate, max_rate, wall)
        self._probe: float | None = None  # when the probe after a block's quiet started
        self._last_start = -math.inf
        self._arrived = -math.inf  # when the latest start reached the server, if it was late
        self._pending = False  # the latest start is not answered yet
        self._held = False  # the first in line is waiting for the rate's interval
        self.said_limited = False  # the run has told the user of the limit (progress does)

    # -- what the rest of the run reads ------------------------------------------

    @property
    def rate(self) -> float | None:
        """The allowed rate in requests/second, once a refusal has shown there is one."""
        control = self._control
        return control.rate if control.ceiling is not None else None

    @property
    def answers(self) -> int:
        return self._control.answers

    @property
    def blocked(self) -> bool:
        """Whether a gateway blocked the client with its own 403 in this run."""
        return self._control.blocks > 0

    def describe_block(self) -> str:
        with self._lock:
            return self._control.describe_block(self._clock())

    def block_seen(self) -> None:
        """A gateway blocked the client on a request another pacer paced (the re-send's):
        the block is on the client, so this one keeps quiet too."""
        with self._lock:
            control = self._control
            now = self._clock()
            control.block_seen(control.rate, control.epoch, now, now)
            self._turned.notify_all()

    def settled_rate(self, *, early: bool = False) -> float | None:
        """The rate it settles at, once SETTLE seconds have passed without a cut (or at
        once when ``early``: a run ending sooner)."""
        return self._control.settled_rate(self._clock(), early=early)

    def servable(self) -> int:
        """Requests in flight the rate keeps busy: rate × latency, and one waiting.

        In slow start the rate runs ahead of what is sent (STARTUP_GAIN times it), so
        the number in flight follows twice what the last starts came to (BBR's cwnd
        gain), which still doubles it every round trip: when a token bucket's burst
        runs dry, every request then in flight is refused.
        """
        with self._lock:
            return self._control.servable()

    def forget_latency_floor(self) -> None:
        """The server's latency changed (see ``limiter.ProbedLimit``): the unloaded latency
        of the last answers, which the number in flight grows from in slow start, is not it."""
        with self._lock:
            self._control.latency.forget_floor()

    def describe(self) -> str:
        return self._control.describe()

    # -- turns -------------------------------------------------------------------

    def wait_turn(self, *, stop: Stop | None = None, budget_left: float | None = None) -> Turn:
        """Block until this request may start, in arrival order.

        Raises NoTurn once ``stop`` is set while a wait is still needed, or when a
        pause the server asked for, or a hold after its refusals, outlasts
        ``budget_left`` (seconds; None: no budget running yet, as for a request not
        yet sent).
        """
        ticket = object()
        entered = self._clock()
        with self._lock:
            self._line.append(ticket)
        try:
            while True:
                with self._lock:
                    step = self._step(ticket, entered, stop, budget_left)
                    if step is None:
                        # Woken by each turn taken; the slice only bounds a missed wake-up.
                        self._turned.wait(SLEEP_SLICE)
                        continue
                if isinstance(step, Turn):
                    return step
                # Sleep outside the lock, then look again: a 429 may have paused us.
                self._sleep(min(step, SLEEP_SLICE))
        except BaseException:
            with self._lock:
                if ticket in self._line:
                    self._line.remove(ticket)
                self._turned.notify_all()
            raise

    def _step(
        self, ticket: object, entered: float, stop: Stop | None, budget_left: float | None
    ) -> Turn | float | None:
        """The caller's turn, or how long to sleep before looking again (None: until a
        turn is taken: others are ahead of it in line). Hold the lock."""
        now = self._clock()
        control = self._control
        stopped = stop is not None and stop.is_set()
        closed = max(control.pause[1], control.hold[1])
        first = self._line[0] is ticket
        wait = SLEEP_SLICE
        if first and control.probing and self._probe is not None:
            pass  # the probe after a block's quiet is out: none starts till it is answered
        elif first:
            start = self._start_at(now, closed, stopped)
            if start <= now:
                return self._start(ticket, entered, now)
            wait = start - now
        if stopped:
            raise NoTurn(max(wait, 0.0), stopped=True)
        if budget_left is not None and closed - now > budget_left:
            raise NoTurn(closed - now, stopped=False, asked=control.pause[1] >= control.hold[1])
        return wait if first else None

    def _start_at(self, now: float, closed: float, stopped: bool) -> float:
        """When the first in line may start. Hold the lock."""
        spaced = self._spaced(now)
        if spaced > now:
            self._held = True  # the rate, not the caller, set this start
        if stopped and self._control.ceiling is None and closed <= now:
            return now  # slow start is ours: a stopping run's last calls go
        return max(closed, spaced)

    def _spaced(self, now: float) -> float:
        """When the next start may go, by the rate alone. Hold the lock."""
        interval = 1.0 / self._control.rate
        arrived = max(self._last_start, self._arrived)
        unloaded = self._control.latency.unloaded()
        if self._pending and unloaded and now - self._last_start > LATE * unloaded:
            # Not answered yet and late already: it reaches the server no sooner than
            # its answer could come back now. Waited for one more interval at most.
            latest = self._last_start + self._control.late_hold()
            arrived = min(max(arrived, now - unloaded), latest)
        return arrived + interval

    def _start(self, ticket: object, entered: float, now: float) -> Turn:
        """Hold the lock."""
        control = self._control
        self._line.popleft()
        self._last_start = now
        self._pending = True
        control.started(now, self._held)
        self._held = False
        if control.probing and self._probe is None:
            self._probe = now  # the first start after a block's quiet: it goes alone
        self._turned.notify_all()
        waited = now - entered
        # The server's share of the wait: its pauses, the holds after its refusals (those
        # that ended while it waited too), and one interval of its rate.
        closed = control.closed()
        own = sum(max(0.0, min(now, until) - max(entered, since)) for since, until in closed)
        own += 1.0 / control.rate if control.ceiling is not None else 0.0
        return Turn(control.rate, control.epoch, max(0.0, waited - own), now)

    # -- answers -----------------------------------------------------------------

    def on_answer(
        self,
        turn: Turn,
        seconds: float,
        *,
        refused: bool,
        retry_after: float | None = None,
        again: Refusal | None = None,
        blocked: bool = False,
    ) -> Refusal | None:
        """One attempt's answer: ``refused`` when it was a rate signal (429, a bare 503,
        a gateway's 403: ``blocked``); ``again``: what this said when the same request
        was last refused. A refusal says whether it was the request's own (see
        ``rate``): then it waits alone."""
        with self._lock:
            now = self._clock()
            self._answered(turn)
            if turn.at == self._last_start:
                # Answered late, it probably reached the server late (a connection opened,
                # a thread scheduled late): the next start is one interval after that,
                # or a limit on spacing (nginx's limit_req) sees the two too close.
                self._arrived = self._control.latency.arrived(turn.at, seconds, now)
                self._pending = False
            return self._control.answered(turn, seconds, now, refused, retry_after, again, blocked)

    def on_no_answer(self, turn: Turn) -> None:
        """An attempt that got no answer (or was never sent): a probe it was is over."""
        with self._lock:
            self._answered(turn)

    def _answered(self, turn: Turn) -> None:
        """Hold the lock."""
        if self._probe is not None and turn.at == self._probe:
            self._probe = None  # answered: the next starts (or probes again after a quiet)
            self._turned.notify_all()


# -- limiter -------------------------------------------------------------------


class FixedLimit:
    """``--parallelism N``: N in flight, whatever the answers. Every limiter is one
    (``Limiter``): what ``ordered_map`` reads before starting a call, and tells after each."""

    def __init__(self, limit: int) -> None:
        self.cap = max(1, limit)

    @property
    def limit(self) -> int:
        return self.cap

    def sample(self, seconds: float, refused: bool) -> None:
        """One whole call: its duration and whether it failed with a refusal."""

    def observe(self, seconds: float, status: int | None) -> None:
        """One HTTP attempt: its duration and status (None: no answer)."""

    def describe(self) -> str:
        return f"fixed at {self.cap} in flight"


Limiter = FixedLimit


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
            self._misses += 1
            self._waits = min(WAIT, 2 ** (self._misses + 1))
            return False
        self._kept = None if phase.limit >= count else phase.limit
        self._last, self._misses = pace, 0
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


# -- capacity_for ------------------------------------------------------------


class Capacity(NamedTuple):
    """What the server takes: the rate (the pacer, learned from every answer) and the
    number in flight (the limiter, never above what that rate can serve)."""

    pacer: RequestPacer
    limiter: Limiter


def capacity_for(settings: Settings) -> Capacity:
    """One pacer, and at most ``parallelism`` in flight when it was set (option,
    environment or config: no fewer, what the user said), else ``max_parallelism``,
    fewer where fewer are answered as fast (``ProbedLimit``); never more than the
    pacer's rate can serve."""
    pacer = RequestPacer(max_rate=settings.max_rate)
    cap = settings.parallelism or settings.max_parallelism
    limiter = PacedLimit(cap, pacer) if settings.parallelism else ProbedLimit(cap, pacer)
    return Capacity(pacer, limiter)
