"""Turns to start a request, handed out in arrival order, at the rate the server
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
"""

from __future__ import annotations

import math
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import NamedTuple

from reconciler.api.capacity.rate import LATE, START_RATE, RateControl
from reconciler.stop import Stop

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
    def limited(self) -> bool:
        return self._control.ceiling is not None

    @property
    def answers(self) -> int:
        return self._control.answers

    @property
    def refusals(self) -> int:
        return self._control.refusals

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

    @property
    def rate_limited_events(self) -> int:
        """Cuts of the rate."""
        return self._control.cuts

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
            arrived = min(max(arrived, now - unloaded), self._last_start + interval)
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
            control = self._control
            if blocked:
                control.blocked(turn.rate, turn.epoch, turn.at, now)
                return Refusal(control.let, 0, False)
            strikes = 0
            if again is not None:
                strikes = again.strikes + (control.let > again.let)
            own = control.answered(
                turn.rate,
                turn.epoch,
                turn.at,
                seconds,
                now,
                refused=refused,
                retry_after=retry_after,
                strikes=strikes,
            )
            return Refusal(control.let, strikes, own) if refused else None

    def on_no_answer(self, turn: Turn) -> None:
        """An attempt that got no answer (or was never sent): a probe it was is over."""
        with self._lock:
            self._answered(turn)

    def _answered(self, turn: Turn) -> None:
        """Hold the lock."""
        if self._probe is not None and turn.at == self._probe:
            self._probe = None  # answered: the next starts (or probes again after a quiet)
            self._turned.notify_all()
