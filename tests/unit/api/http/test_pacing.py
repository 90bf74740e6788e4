"""RequestPacer with a fake clock: pauses on 429, then paces at a learned rate."""

from __future__ import annotations

import itertools
import threading

import pytest

from reconciler.api.http.pacing import NoTurn, RequestPacer


class FakeTime:
    """A clock that only moves when the code under test sleeps."""

    def __init__(self, start: float = 100.0) -> None:
        self.now = start
        self.sleeps: list[float] = []

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        assert seconds >= 0
        self.sleeps.append(seconds)
        self.now += seconds


@pytest.fixture
def fake_time() -> FakeTime:
    return FakeTime()


@pytest.fixture
def pacer(fake_time: FakeTime) -> RequestPacer:
    return RequestPacer(clock=fake_time.clock, sleep=fake_time.sleep)


def succeed(pacer: RequestPacer, fake_time: FakeTime, count: int, over: float) -> None:
    """``count`` successes spread evenly over the ``over`` seconds ending now."""
    end = fake_time.now
    for i in range(count):
        fake_time.now = end - over + over * (i + 1) / count
        pacer.on_success()
    fake_time.now = end


def starts(pacer: RequestPacer, fake_time: FakeTime, count: int) -> list[float]:
    times = []
    for _ in range(count):
        pacer.wait_turn()
        times.append(fake_time.now)
    return times


def test_no_pacing_before_any_429(pacer: RequestPacer, fake_time: FakeTime) -> None:
    for _ in range(200):
        pacer.wait_turn()
        pacer.on_success()

    assert fake_time.sleeps == []
    assert pacer.rate is None
    assert pacer.rate_limited_events == 0


def test_429_pauses_every_caller_until_retry_after(
    pacer: RequestPacer, fake_time: FakeTime
) -> None:
    pacer.on_rate_limited(5.0)
    limited_at = fake_time.now

    first, second, third = starts(pacer, fake_time, 3)

    assert first >= limited_at + 5.0
    assert second >= limited_at + 5.0 and third >= limited_at + 5.0
    assert first == pytest.approx(limited_at + 5.0)  # and not much longer
    assert pacer.rate_limited_events == 1


def test_429_without_retry_after_still_pauses(pacer: RequestPacer, fake_time: FakeTime) -> None:
    pacer.on_rate_limited(None)
    limited_at = fake_time.now

    pacer.wait_turn()

    assert fake_time.now > limited_at


def test_429s_during_a_pause_count_as_one_event(pacer: RequestPacer, fake_time: FakeTime) -> None:
    succeed(pacer, fake_time, 20, over=1.0)
    pacer.on_rate_limited(4.0)
    rate = pacer.rate
    limited_at = fake_time.now

    # Answers to requests that were already in flight when the pause began.
    for offset in (0.1, 0.5, 2.0, 3.9):
        fake_time.now = limited_at + offset
        pacer.on_rate_limited(4.0)

    assert pacer.rate_limited_events == 1
    assert pacer.rate == rate  # the rate is not cut again for the same event
    fake_time.now = limited_at + 3.9
    pacer.wait_turn()
    assert fake_time.now == pytest.approx(limited_at + 4.0)  # the pause was not extended


def test_429_after_the_pause_is_a_new_event(pacer: RequestPacer, fake_time: FakeTime) -> None:
    pacer.on_rate_limited(2.0)
    fake_time.now += 2.5

    pacer.on_rate_limited(2.0)

    assert pacer.rate_limited_events == 2


def test_rate_after_429_is_ninety_percent_of_last_seconds_successes(
    pacer: RequestPacer, fake_time: FakeTime
) -> None:
    succeed(pacer, fake_time, 50, over=5.0)  # 10 per second for five seconds...
    fake_time.now += 1.5
    succeed(pacer, fake_time, 20, over=1.0)  # ...then 20 in the last second

    pacer.on_rate_limited(1.0)

    assert pacer.rate == pytest.approx(18.0, rel=0.06)


def test_request_starts_are_spaced_at_one_over_rate(
    pacer: RequestPacer, fake_time: FakeTime
) -> None:
    succeed(pacer, fake_time, 20, over=1.0)
    pacer.on_rate_limited(2.0)
    rate = pacer.rate
    assert rate is not None

    times = starts(pacer, fake_time, 6)

    gaps = [b - a for a, b in itertools.pairwise(times)]
    assert gaps == pytest.approx([1.0 / rate] * 5, rel=1e-6)


def test_rate_creeps_up_while_requests_succeed(pacer: RequestPacer, fake_time: FakeTime) -> None:
    succeed(pacer, fake_time, 10, over=1.0)
    pacer.on_rate_limited(1.0)
    after_429 = pacer.rate
    assert after_429 is not None

    rates = []
    for _ in range(50):
        pacer.wait_turn()
        pacer.on_success()
        rates.append(pacer.rate)

    assert all(b > a for a, b in itertools.pairwise([after_429, *rates]))
    assert rates[-1] > after_429


def test_a_later_429_lowers_the_rate_again(pacer: RequestPacer, fake_time: FakeTime) -> None:
    succeed(pacer, fake_time, 10, over=1.0)
    pacer.on_rate_limited(1.0)
    for _ in range(30):
        pacer.wait_turn()
        pacer.on_success()
    before = pacer.rate
    assert before is not None

    pacer.on_rate_limited(1.0)

    assert pacer.rate is not None and pacer.rate < before
    assert pacer.rate_limited_events == 2


def test_rate_never_drops_to_zero(pacer: RequestPacer, fake_time: FakeTime) -> None:
    # A 429 on the very first request: nothing succeeded, yet work must go on.
    pacer.on_rate_limited(1.0)

    assert pacer.rate is not None and pacer.rate > 0
    times = starts(pacer, fake_time, 3)
    assert times[-1] - times[0] < 10


def test_a_429_without_retry_after_pauses_one_second(
    pacer: RequestPacer, fake_time: FakeTime
) -> None:
    pacer.on_rate_limited(None)
    limited_at = fake_time.now

    pacer.wait_turn()

    assert fake_time.now == pytest.approx(limited_at + 1.0)


def test_a_second_429_while_paced_cuts_the_rate_by_a_tenth(
    pacer: RequestPacer, fake_time: FakeTime
) -> None:
    succeed(pacer, fake_time, 5, over=1.0)
    pacer.on_rate_limited(1.0)
    fake_time.now += 1.5  # the pause is over
    # More successes in the last second than the paced rate: the estimate would raise it.
    succeed(pacer, fake_time, 10, over=1.0)
    paced = pacer.rate
    assert paced is not None

    pacer.on_rate_limited(1.0)

    assert pacer.rate == pytest.approx(paced * 0.9)


def test_the_rate_never_falls_below_one_request_per_second(
    pacer: RequestPacer, fake_time: FakeTime
) -> None:
    pacer.on_rate_limited(1.0)
    for _ in range(30):  # 429 after 429, nothing ever succeeding
        fake_time.now += 2.0
        pacer.on_rate_limited(1.0)

    assert pacer.rate == 1.0
    pacer.wait_turn()
    times = starts(pacer, fake_time, 4)
    assert [b - a for a, b in itertools.pairwise(times)] == pytest.approx([1.0] * 3)


def test_a_waiting_worker_looks_up_at_least_four_times_a_second(
    pacer: RequestPacer, fake_time: FakeTime
) -> None:
    pacer.on_rate_limited(5.0)

    pacer.wait_turn()

    assert fake_time.sleeps and max(fake_time.sleeps) <= 0.25
    assert sum(fake_time.sleeps) == pytest.approx(5.0)


def test_a_stopped_run_leaves_no_worker_waiting(fake_time: FakeTime) -> None:
    stop = threading.Event()

    def sleep(seconds: float) -> None:
        fake_time.sleep(seconds)
        stop.set()  # the run stops while this worker waits out a long pause

    pacer = RequestPacer(clock=fake_time.clock, sleep=sleep)
    pacer.on_rate_limited(100000.0)

    with pytest.raises(NoTurn) as caught:
        pacer.wait_turn(stop=stop)

    assert caught.value.stopped
    assert len(fake_time.sleeps) == 1 and fake_time.sleeps[0] <= 0.25


def test_a_stopped_run_still_lets_a_worker_go_when_no_wait_is_needed(
    pacer: RequestPacer,
) -> None:
    # The re-send of a write already done must finish after an interrupt.
    stop = threading.Event()
    stop.set()

    pacer.wait_turn(stop=stop)


def test_a_turn_past_the_callers_deadline_is_refused_without_waiting(
    pacer: RequestPacer, fake_time: FakeTime
) -> None:
    pacer.on_rate_limited(100000.0)

    with pytest.raises(NoTurn) as caught:
        pacer.wait_turn(give_up_at=fake_time.now + 60)

    assert not caught.value.stopped
    assert caught.value.wait == pytest.approx(100000.0)
    assert fake_time.sleeps == []
    pacer.wait_turn(give_up_at=fake_time.now + 100001)  # a deadline after the pause: it waits


# From test_pacing_first_turns.py:
# Pacing at its edges: the first request, a deadline met exactly, the last second's count.
#
# A fake clock makes each edge exact: the worker that would be refused a turn it
# can still take, or a rate learned from one success too few, is what a user sees
# as a run slower than the server allows or a request given up too early.
class StrictFakeTime:
    """A clock that only moves when the code under test sleeps."""

    def __init__(self, start: float) -> None:
        self.now = start
        self.sleeps: list[float] = []

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        # A worker whose turn has come must take it, not spin on sleeps of nothing.
        assert seconds > 0, "slept for nothing"
        self.sleeps.append(seconds)
        self.now += seconds


def make(start: float = 100.0) -> tuple[RequestPacer, StrictFakeTime]:
    fake = StrictFakeTime(start)
    return RequestPacer(clock=fake.clock, sleep=fake.sleep), fake


def test_the_first_requests_never_wait_whatever_the_clock_reads():
    # A monotonic clock has no fixed origin: it may read 0.2 s just after boot.
    pacer, fake = make(start=0.0)

    for step in range(3):
        fake.now = step * 0.2
        pacer.wait_turn()
        pacer.on_success()

    assert fake.sleeps == []


def test_a_turn_that_comes_exactly_at_the_callers_deadline_is_taken():
    pacer, fake = make()
    pacer.on_rate_limited(5.0)

    pacer.wait_turn(give_up_at=105.0)  # the pause ends at 105.0: the turn is in time

    assert fake.now == pytest.approx(105.0)


def test_a_turn_just_after_the_deadline_is_refused_at_once():
    pacer, fake = make()
    pacer.on_rate_limited(5.0)

    with pytest.raises(NoTurn) as caught:
        pacer.wait_turn(give_up_at=104.99)

    assert caught.value.wait == pytest.approx(5.0)
    assert fake.sleeps == []


def test_a_success_exactly_one_second_before_the_429_counts_in_the_rate():
    pacer, fake = make()
    for at in (99.0, 99.5, 100.0):
        fake.now = at
        pacer.on_success()

    pacer.on_rate_limited(1.0)

    # Three successes in the last second, 90% kept: 2.7 requests a second.
    assert pacer.rate == pytest.approx(2.7)


def test_a_429_exactly_when_the_pause_ends_is_a_new_event():
    pacer, fake = make()
    pacer.on_rate_limited(2.0)

    fake.now = 102.0
    pacer.on_rate_limited(2.0)

    assert pacer.rate_limited_events == 2
    pacer.wait_turn()
    assert fake.now == pytest.approx(104.0)  # paused again for the new Retry-After
