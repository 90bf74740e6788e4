"""Pacing at its edges: the first request, a deadline met exactly, the last second's count.

A fake clock makes each edge exact: the worker that would be refused a turn it
can still take, or a rate learned from one success too few, is what a user sees
as a run slower than the server allows or a request given up too early.
"""

from __future__ import annotations

import pytest

from reconciler.api.http.pacing import NoTurn, RequestPacer


class FakeTime:
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


def make(start: float = 100.0) -> tuple[RequestPacer, FakeTime]:
    fake = FakeTime(start)
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
