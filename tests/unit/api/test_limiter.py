"""The in-flight limit: at most parallelism (or max_parallelism), never more than the
allowed rate keeps busy; ordered_map obeys it.

Fewer in flight where a busy client gets its answers as fast with fewer: probing, in
fake time, against servers whose pace depends on the number in flight.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from support.limits import FakeTime, answered

from reconciler.api.capacity import FixedLimit, PacedLimit, ProbedLimit, RequestPacer, capacity_for
from reconciler.api.concurrency import ordered_map
from reconciler.api.exceptions import NotFound, RateLimited
from reconciler.errors import ConfigError
from reconciler.model.invite import Done
from reconciler.settings.config import Settings, load_settings


class Count:
    """A pacer's answer to how many in flight its rate keeps busy (its servable), and
    whether it was told to forget its latency floor."""

    def __init__(self, count: int) -> None:
        self.count = count
        self.forgotten = False

    def servable(self) -> int:
        return self.count

    def forget_latency_floor(self) -> None:
        self.forgotten = True


def test_fixed_limit_ignores_every_answer() -> None:
    limiter = FixedLimit(5)
    for status in (200, 429, 503):
        for _ in range(100):
            limiter.observe(0.001, status)
            limiter.sample(0.001, status != 200)
    assert (limiter.limit, limiter.cap) == (5, 5)


def test_the_rate_bounds_the_number_in_flight_below_the_cap() -> None:
    rate = Count(3)
    limiter = PacedLimit(64, rate)
    assert (limiter.limit, limiter.cap) == (3, 64)  # a slow start, or a rate limit
    rate.count = 500
    assert limiter.limit == 64  # a fast server: the cap
    rate.count = 0
    assert limiter.limit == 1  # never none at all
    assert limiter.highest == 64
    assert limiter.describe() == (
        "settled at 1 in flight (highest 64, at most 64: as many as the allowed rate keeps busy)"
    )


def test_a_fresh_pacer_starts_with_one_in_flight_and_grows_with_its_answers() -> None:
    time = FakeTime()
    pacer = RequestPacer(clock=time.clock, sleep=time.sleep)
    limiter = ProbedLimit(64, pacer)
    assert limiter.limit == 1  # nothing known: one request, then as the answers say
    answered(pacer, 20, latency=0.05)
    assert limiter.limit > 4


def cap(settings: Settings) -> int:
    return capacity_for(settings).limiter.cap


def test_parallelism_set_anywhere_is_the_most_in_flight(tmp_path: Path) -> None:
    assert cap(Settings()) == 64  # max_parallelism
    assert cap(Settings(max_parallelism=100)) == 100
    assert cap(Settings().with_overrides(parallelism=16)) == 16  # --parallelism 16
    assert cap(load_settings(None, env={"RECONCILER_PARALLELISM": "4"})) == 4
    config = tmp_path / "reconciler.yaml"
    config.write_text("parallelism: 16\nmax_parallelism: 32\n", encoding="utf-8")
    assert cap(load_settings(str(config), env={})) == 16
    no_option = load_settings(str(config), env={}).with_overrides(parallelism=None)
    assert cap(no_option) == 16  # an option left out overrides nothing


def test_max_parallelism_from_the_environment_is_checked() -> None:
    settings = load_settings(None, env={"RECONCILER_MAX_PARALLELISM": "128"})
    assert cap(settings) == 128
    for bad in ("0", "257", "lots"):
        with pytest.raises(ConfigError, match="RECONCILER_MAX_PARALLELISM"):
            load_settings(None, env={"RECONCILER_MAX_PARALLELISM": bad})


def test_ordered_map_obeys_the_limit_and_keeps_item_order() -> None:
    lock = threading.Lock()
    in_flight = most = 0
    release = threading.Event()

    def call(item: int) -> int:
        nonlocal in_flight, most
        with lock:
            in_flight += 1
            most = max(most, in_flight)
        release.wait(0.01)
        with lock:
            in_flight -= 1
        if item == 3:
            raise RateLimited("slow down", status=429)
        if item == 5:
            raise NotFound("gone", status=404)
        return item * 2

    results = list(ordered_map(call, list(range(6)), PacedLimit(64, Count(4))))
    assert [item for item, _ in results] == list(range(6))
    values = [outcome.value if isinstance(outcome, Done) else None for _, outcome in results]
    assert values == [0, 2, 4, None, 8, None]
    assert most <= 4


Pace = Callable[[int], float]  # answers per second with so many in flight
Cost = Callable[[int], float]  # the client's CPU seconds per answer, the same


class Client:
    """A client whose answers come at ``pace(limit)`` a second, each taking ``limit``
    intervals (Little's law) and ``cost(limit)`` of its CPU."""

    def __init__(self, count: int = 15) -> None:
        self.now = 0.0
        self.cpu_used = 0.0
        self.count = Count(count)
        self.limiter = ProbedLimit(64, self.count, clock=lambda: self.now, cpu=self.cpu)
        self.limits: list[int] = []  # the limit read before each answer

    def cpu(self) -> float:
        return self.cpu_used

    def answer(self, pace: Pace, answers: int, cost: Cost = lambda limit: 0.00095) -> None:
        for _ in range(answers):
            limit = self.limiter.limit
            self.limits.append(limit)
            interval = 1.0 / pace(limit)
            self.now += interval
            self.cpu_used += cost(limit)
            self.limiter.sample(limit * interval, refused=False)


def one_at_a_time(limit: int) -> float:
    """A server answering one request at a time on the client's machine, the client busy:
    one in flight, on the consumer's thread, is about as fast; more only queue."""
    return 970.0 if limit == 1 else 1000.0


def threads_cost(limit: int) -> float:
    """The client's CPU per answer (busy 0.95 at 1,000 a second): a third more with
    worker threads than on its own thread."""
    return 0.0007 if limit == 1 else 0.00095


def no_queue(limit: int) -> float:
    """A server answering any number at once in 10 ms: the more in flight, the faster."""
    return limit / 0.010


def test_a_busy_client_before_a_queue_settles_at_one_made_on_its_own_thread() -> None:
    client = Client(count=15)
    client.answer(one_at_a_time, 3000, threads_cost)
    assert client.limiter.limit == 1  # 3% slower than 2 or 15, for a quarter less CPU
    assert client.limits[:63] == [15] * 63  # nothing tried before the first answers
    assert client.limits[-1000:].count(1) > 900  # held there, tries of more aside
    assert client.limiter.describe() == (
        "settled at 1 in flight (highest 15, at most 64: as many as a busy client got "
        "its answers as fast with)"
    )


def test_fewer_as_fast_are_kept_and_slower_ones_for_no_cpu_are_not() -> None:
    client = Client(count=15)
    client.answer(lambda limit: 850.0 if limit == 1 else 1000.0, 4000)  # CPU: the same
    # 15 -> 11 -> 8 -> 1 (from a few, one first: not kept) -> 6 -> 4 -> 3 -> 2, and
    # there, tries of 1 and 3 aside.
    assert client.limits[-1000:].count(2) > 900


def test_fewer_that_are_slower_are_not_kept() -> None:
    client = Client(count=12)
    client.answer(no_queue, 3000, lambda limit: 0.0007)
    assert client.limiter.limit == 12
    tried = {limit for limit in client.limits if limit != 12}
    assert tried == {9}  # a quarter fewer, tried and given up ever less often ...
    assert client.now <= 1.03 * 3000 / no_queue(12)  # ... at a cost of under 3% of the time


def test_a_client_that_waits_for_its_answers_tries_nothing() -> None:
    client = Client(count=15)
    client.answer(one_at_a_time, 3000, lambda limit: 0.0003)  # 30% of its time
    assert set(client.limits) == {15}
    assert client.limiter.describe() == PacedLimit.describe(client.limiter)


def test_what_probing_found_goes_within_a_few_answers_once_the_client_waits() -> None:
    client = Client(count=15)
    client.answer(one_at_a_time, 2000, threads_cost)
    assert client.limiter.limit == 1
    assert not client.count.forgotten
    slowed = client.now
    # The server answers in 100 ms now, not 1: the client waits for it. Its phase at one
    # in flight ends on that, not after 32 answers (3 s): back to the count at once ...
    while client.limiter.limit == 1:
        client.answer(lambda limit: one_at_a_time(limit) / 100, 1, threads_cost)
    assert client.limiter.limit == 15
    assert client.now - slowed < 0.5
    # ... and the latency the count grows from, measured at one in flight, is forgotten.
    assert client.count.forgotten


def test_a_busy_client_that_comes_to_wait_has_the_latency_floor_forgotten_at_once() -> None:
    client = Client(count=12)
    client.answer(no_queue, 1000, lambda limit: 0.0007)  # busy, and nothing fewer kept
    assert client.limiter.limit == 12 and not client.count.forgotten
    slowed = client.now
    # The server now answers in 200 ms, not 10: the client waits for it.
    client.answer(lambda limit: no_queue(limit) / 20, 40, lambda limit: 0.0007)
    assert client.count.forgotten
    assert client.now - slowed < 1.5  # 40 answers at 60 a second: no phase held longer


def test_a_server_slowing_down_during_a_try_is_seen_in_the_next_phase_not_seconds_later() -> None:
    client = Client(count=2)
    while client.limiter.limit == 2:  # busy at the count, until a try of one begins
        client.answer(lambda limit: 1000.0, 1)
    slowed = client.now
    while not client.count.forgotten:  # 100 ms now, however many in flight
        client.answer(lambda limit: limit / 0.1, 1)
    assert client.now - slowed < 0.8  # the phase after the try ends once it waits


def test_more_are_tried_again_and_kept_when_answers_come_faster() -> None:
    client = Client(count=15)
    client.answer(one_at_a_time, 2000, threads_cost)
    assert client.limiter.limit == 1
    # The server has 8 workers now, 2 ms each: more in flight are answered faster.
    client.answer(lambda limit: 500.0 * min(limit, 8), 6000, threads_cost)
    assert client.limiter.limit >= 8


def test_a_refusal_leaves_the_number_in_flight_to_the_rate() -> None:
    client = Client(count=15)
    client.answer(one_at_a_time, 2000, threads_cost)
    assert client.limiter.limit == 1
    client.limiter.sample(0.001, refused=True)
    client.answer(one_at_a_time, 2000, threads_cost)
    assert set(client.limits[-2000:]) == {15}


def test_probing_only_when_parallelism_is_not_set() -> None:
    assert isinstance(capacity_for(Settings()).limiter, ProbedLimit)
    fixed = capacity_for(Settings().with_overrides(parallelism=16)).limiter
    assert type(fixed) is PacedLimit  # --parallelism 16: what the user said, no fewer


def fixed_40ms(limit: int) -> float:
    """A server answering any number at once in 40 ms, to a client whose CPU caps it at
    1,000 answers a second (busy 0.95): fewer than 40 in flight are slower."""
    return min(limit / 0.040, 1000.0)


def test_a_try_of_fewer_is_measured_against_the_limit_it_lowers_not_the_slow_start() -> None:
    client = Client(count=4)
    for count in (4, 8, 16, 32):  # slow start: a phase or two at each count, the client waiting
        client.count.count = count
        client.answer(fixed_40ms, 164 if count == 4 else 100)
    client.count.count = 64
    started, begun = client.now, len(client.limits)
    client.answer(fixed_40ms, 3000)
    # The slow start's phases answered 100-800 a second: at their median, 24, 18, 13 and 9
    # in flight (600 to 225 a second) looked "as fast as usual" and were kept in turn.
    assert min(client.limits[begun + 100 :]) >= 36  # a quarter fewer than 48: not kept
    assert client.now - started <= 1.05 * 3000 / fixed_40ms(64)
