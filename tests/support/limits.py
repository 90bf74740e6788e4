"""The limits a gateway or the platform sets, as arithmetic in fake time, and a run of
requests through one of them driven by the real RequestPacer (no network, no threads):
what the unit tests of the pacer measure it against. The same limits for real are in
nginx.py, haproxy.py and apache.py."""

from __future__ import annotations

import heapq
import math
import random
from dataclasses import dataclass, field
from typing import Protocol

from reconciler.api.capacity import Refusal, RequestPacer, Turn

# What a limit answers a request that reaches it at a time: the seconds the server holds
# it before its answer (let through), or (status, Retry-After or None, seconds it
# waited first) when refused.
Refused = tuple[int, float | None, float]
Answer = float | Refused


class FakeTime:
    """A clock that only moves when the code under test sleeps (or the test says)."""

    # Past these, the code under test is taken to wait for ever: here it would, where
    # only its sleeps move the clock. Reads of a clock that has not moved: it waits on
    # something else (a lock, a condition with a timeout); the pacer's and the rate's
    # tests read it at most 6 times at one instant. Sleeps: a wait that never ends (an
    # interval of infinity), spinning the CPU; a test of a whole run sleeps about 1,500
    # times.
    STILL_READS = 40
    SLEEPS = 100_000

    def __init__(self, start: float = 100.0) -> None:
        self.now = start
        self.sleeps: list[float] = []
        self._read_at = start
        self._reads = 0

    def clock(self) -> float:
        if self.now != self._read_at:
            self._read_at, self._reads = self.now, 0
        self._reads += 1
        assert self._reads <= self.STILL_READS, (
            f"the clock read {self._reads} times at {self.now} without a sleep: a wait that "
            "does not sleep"
        )
        return self.now

    def sleep(self, seconds: float) -> None:
        # A worker whose turn has come must take it, not spin on sleeps of nothing.
        assert seconds > 0, "slept for nothing"
        assert len(self.sleeps) < self.SLEEPS, (
            f"slept {self.SLEEPS:,} times: a wait that never ends"
        )
        self.sleeps.append(seconds)
        self.now += seconds


class Limit(Protocol):
    def arrive(self, now: float, request: int) -> Answer:
        """What the limit answers request number ``request`` reaching it at ``now``."""


class Unlimited:
    def arrive(self, now: float, request: int = 0) -> Answer:
        return 0.0


@dataclass
class LeakyBucket(Unlimited):
    """nginx's ``limit_req``: the excess over ``rate`` drains at the rate; a request that
    would take it over ``burst`` is refused (and does not count), with ``Retry-After``
    when the gateway adds one (nginx's ``add_header Retry-After ... always``)."""

    rate: float
    burst: int = 0
    retry_after: float | None = None
    status: int = 429
    excess: float = 0.0
    last: float | None = None

    def arrive(self, now: float, request: int = 0) -> Answer:
        excess = 0.0
        if self.last is not None:
            excess = max(0.0, self.excess - self.rate * (now - self.last) + 1)
        if excess > self.burst + 1e-9:
            return (self.status, self.retry_after, 0.0)
        self.excess, self.last = excess, now
        return 0.0


@dataclass
class SlidingWindow(Unlimited):
    """HAProxy's stick table rate (``freq_ctr``): this period's count plus the last
    period's, weighted by the share of it still in the window, rounded down. Every
    request tracked counts (``http_req_rate``, refused when over ``limit``), or only
    those let through (``counts_refused=False``: ``gpc0_rate``, refused at ``limit``)."""

    limit: int
    period: float = 1.0
    counts_refused: bool = True
    retry_after: float | None = None
    status: int = 429
    tick: float | None = None
    current: int = 0
    previous: int = 0

    def _rate(self, now: float) -> int:
        if self.tick is None:
            self.tick = now
        periods = math.floor((now - self.tick) / self.period)
        if periods >= 1:
            self.previous = self.current if periods == 1 else 0
            self.current = 0
            self.tick += periods * self.period
        share = (self.period - (now - self.tick)) / self.period
        return math.floor(self.current + self.previous * share)

    def arrive(self, now: float, request: int = 0) -> Answer:
        if self.counts_refused:
            self._rate(now)
            self.current += 1
            over = self._rate(now) > self.limit
        else:
            over = self._rate(now) >= self.limit
            self.current += not over
        return (self.status, self.retry_after, 0.0) if over else 0.0


@dataclass
class TokenBucket(Unlimited):
    """A burst of ``burst`` (a second's worth unless said), then ``rate`` a second; 429
    with ``Retry-After`` in whole seconds, as the platform's own limit, or without."""

    rate: float
    burst: float | None = None
    retry_after: bool = True
    tokens: float = field(default=-1.0)
    filled: float | None = None

    def arrive(self, now: float, request: int = 0) -> Answer:
        capacity = self.burst if self.burst is not None else max(1.0, self.rate)
        if self.filled is None:
            self.tokens, self.filled = capacity, now
        self.tokens = min(capacity, self.tokens + (now - self.filled) * self.rate)
        self.filled = now
        if self.tokens >= 1:
            self.tokens -= 1
            return 0.0
        wait = (1 - self.tokens) / self.rate
        return (429, float(max(1, math.ceil(wait))) if self.retry_after else None, 0.0)


@dataclass
class ServerQueue(Unlimited):
    """HAProxy's ``maxconn``: ``servers`` requests at once, each ``service`` seconds; the
    others wait in line, and one that would wait over ``timeout`` is answered 503 then."""

    servers: int = 2
    service: float = 0.3
    timeout: float = 1.0
    free: list[float] = field(default_factory=list)

    def arrive(self, now: float, request: int = 0) -> Answer:
        if not self.free:
            self.free = [0.0] * self.servers
        first = min(range(self.servers), key=self.free.__getitem__)
        begins = max(now, self.free[first])
        if begins - now > self.timeout:
            return (503, None, self.timeout)
        self.free[first] = begins + self.service
        return begins + self.service - now


@dataclass
class OneRequestRefused(Unlimited):
    """Request number ``refused`` always refused (a path refused on its own), the others
    answered as ``inner`` answers them."""

    inner: Limit
    refused: int

    def arrive(self, now: float, request: int = 0) -> Answer:
        if request == self.refused:
            return (429, None, 0.0)
        return self.inner.arrive(now, request)


class BurstBlocker(Unlimited):
    """Apache's mod_evasive, in whole seconds of the clock as it counts: more than
    ``count`` requests in one second (the count starts again after a second with none)
    and every request is refused 403 for ``period`` seconds, a period each refused
    request starts again."""

    def __init__(self, count: int = 50, period: int = 5) -> None:
        self.count = count
        self.period = period
        self._last: int | None = None  # the second of the last request counted
        self._hits = 0
        self._blocked_at = -math.inf  # the second of the last request refused

    def arrive(self, now: float, request: int = 0) -> Answer:
        second = math.floor(now)
        if second - self._blocked_at < self.period:
            self._blocked_at = second  # blocked, it waits longer in 403 land
            return (403, None, 0.0)
        if self._last is None or second - self._last >= 1:
            self._hits = 0
        self._last = second
        self._hits += 1
        if self._hits > self.count + 1:  # its first request is counted from the second
            self._blocked_at = second
            return (403, None, 0.0)
        return 0.0


@dataclass
class Run:
    seconds: float
    sent: int
    refused: int
    refused_early: int  # in the first five seconds
    pacer: RequestPacer


@dataclass(order=True)
class _Event:
    due: float
    order: int
    request: int = field(compare=False)
    turn: Turn = field(compare=False)
    left: float = field(compare=False)  # when its request left the client
    answer: Answer | None = field(compare=False, default=None)  # None: it arrives


@dataclass
class _Request:
    attempts: int = 0
    refusal: Refusal | None = None  # what the pacer made of its last refusal
    ready: float = 0.0  # when it may take a turn again (after a wait of its own)


def run_behind(
    limit: Limit,
    count: int,
    *,
    latency: float = 0.02,
    parallelism: int = 64,
    overhead: float = 0.001,
    late: tuple[float, float, float] | None = None,
    seed: int = 1,
    give_up: float = 3600.0,
    attempts: int = 10**6,
    max_rate: float | None = None,
) -> Run:
    """``count`` requests through ``limit`` in fake time: as many in flight as the pacer's
    rate keeps busy (at most ``parallelism``), ``overhead`` seconds of client work to
    send each, answered ``latency`` after the limit lets it through; a refused one is
    sent again by the same worker (after a wait of its own when the pacer finds the
    refusal its own, as exchange does), at most ``attempts`` times. ``late``: (share,
    least, most) of requests that reach the limit that many seconds after they left (a
    connection opened, a thread scheduled late). Answers come in while a worker sleeps
    for its turn."""
    fake = FakeTime(start=0.0)
    events: list[_Event] = []
    chance = random.Random(seed)
    requests: dict[int, _Request] = {}
    retries: list[int] = []
    tally = {"done": 0, "refused": 0, "early": 0, "in_flight": 0}
    order = 0

    def happen(event: _Event) -> None:
        nonlocal order
        if event.answer is None:  # it reaches the limit
            answer = limit.arrive(fake.now, event.request)
            took = latency + answer if isinstance(answer, float) else answer[2] + 0.002
            order += 1
            heapq.heappush(
                events,
                _Event(fake.now + took, order, event.request, event.turn, event.left, answer),
            )
            return
        request = requests[event.request]
        refusal = event.answer if isinstance(event.answer, tuple) else None
        request.refusal = pacer.on_answer(
            event.turn,
            fake.now - event.left,
            refused=refusal is not None,
            retry_after=refusal[1] if refusal else None,
            again=request.refusal,
            blocked=refusal is not None and refusal[0] == 403,  # exchange: a gateway's own
        )
        if refusal is None or request.attempts >= attempts:
            tally["done"] += 1
            tally["in_flight"] -= 1
        if refusal is None:
            return
        tally["refused"] += 1
        tally["early"] += fake.now < 5.0
        if request.attempts < attempts:
            if request.refusal is not None and request.refusal.own:  # exchange's backoff
                request.ready = fake.now + min(8.0, 0.5 * 2 ** (request.attempts - 1)) / 2
            retries.append(event.request)

    def sleep(seconds: float) -> None:
        assert seconds > 0, "slept for nothing"
        end = fake.now + seconds
        while events and events[0].due <= end:
            fake.now = max(fake.now, events[0].due)
            happen(heapq.heappop(events))
        fake.now = end

    pacer = RequestPacer(clock=fake.clock, sleep=sleep, max_rate=max_rate)
    sent = 0
    while tally["done"] < count and fake.now < give_up:
        while events and events[0].due <= fake.now:
            happen(heapq.heappop(events))
        ready = [r for r in retries if requests[r].ready <= fake.now]
        room = tally["in_flight"] < max(1, min(parallelism, pacer.servable()))
        if ready or (len(requests) < count and room):
            if ready:
                number = ready[0]
                retries.remove(number)
            else:
                number = len(requests)
                requests[number] = _Request()
                tally["in_flight"] += 1
            requests[number].attempts += 1
            turn = pacer.wait_turn()
            delay = 0.0
            if late is not None and chance.random() < late[0]:
                delay = chance.uniform(late[1], late[2])
            order += 1
            heapq.heappush(events, _Event(fake.now + delay, order, number, turn, fake.now))
            sent += 1
            fake.now += overhead
        else:
            due = [events[0].due] if events else []
            due += [requests[r].ready for r in retries]
            fake.now = min(due) if due else fake.now + 0.001
    return Run(fake.now, sent, tally["refused"], tally["early"], pacer)


def answered(pacer: RequestPacer, count: int, latency: float = 0.0) -> list[Turn]:
    """``count`` requests, each answered (not refused) once it has started."""
    turns = []
    for _ in range(count):
        turn = pacer.wait_turn()
        pacer.on_answer(turn, latency, refused=False)
        turns.append(turn)
    return turns


def refuse(pacer: RequestPacer, turn: Turn | None = None, retry_after: float | None = None) -> None:
    """A refusal at the door (1 ms), of ``turn`` or of the next request."""
    pacer.on_answer(turn or pacer.wait_turn(), 0.001, refused=True, retry_after=retry_after)


def start_times(pacer: RequestPacer, fake_time: FakeTime, count: int) -> list[float]:
    times = []
    for _ in range(count):
        pacer.wait_turn()
        times.append(fake_time.now)
    return times
