"""RecentStarts: what the run actually sends, and what the server let through of it."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reconciler.api.capacity.starts import KEPT, RECENT, RecentStarts


def started(*times: float) -> RecentStarts:
    starts = RecentStarts()
    for t in times:
        starts.add(t)
    return starts


def test_fewer_than_two_starts_or_answers_tell_no_rate() -> None:
    starts = started(10.0)
    starts.answered(10.1)

    assert starts.recent_rate() == 0.0
    assert starts.delivery_rate() == 0.0


def test_let_through_counts_the_starts_before_a_refused_one_less_those_refused() -> None:
    # 9.5 to 9.8: four started, 9.6 refused; those still in flight count as let
    # through, as they left before the refused one.
    starts = started(8.0, 9.5, 9.6, 9.7, 9.8, 9.9)
    starts.refused(9.6)

    count, first, last, gap = starts.let_through(9.9, since=9.0)

    assert (count, first, last) == (3, 9.5, 9.8)
    assert gap == pytest.approx(0.1)


def test_let_through_counts_requests_that_left_at_the_same_instant_apart() -> None:
    starts = started(5.0, 5.0, 5.0)
    starts.refused(5.0)

    assert starts.let_through(6.0, since=4.0)[:3] == (2, 5.0, 5.0)


def test_starts_are_kept_long_enough_for_a_queues_refusal() -> None:
    # A queue refuses a request a second or more after it left.
    starts = started(*(10.0 + i * 0.1 for i in range(40)))

    count = starts.let_through(12.0, since=11.0)[0]

    assert KEPT >= 2.0 and count == 10


def test_the_delivery_rate_is_over_the_last_answers() -> None:
    starts = RecentStarts()
    for i in range(20):
        starts.answered(i * 0.15)

    assert starts.delivery_rate() == pytest.approx(1 / 0.15)


def test_slow_start_measures_only_the_last_few_starts() -> None:
    early = [9.0 + i * 0.1 for i in range(5)]  # 10 a second
    late = [9.5 + i * 0.01 for i in range(RECENT)]  # then 100 a second

    assert started(*early, *late).recent_rate() == pytest.approx(100.0)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(min_value=0, max_value=0.05), max_size=30))
def test_the_recent_rate_is_that_of_the_last_recent_starts(gaps: list[float]) -> None:
    times = list(itertools.accumulate(gaps, initial=100.0))
    recent = times[::-1][:RECENT]  # newest first, as the rate is read
    expected = 0.0
    if len(recent) >= 2 and recent[0] > recent[-1]:
        expected = (len(recent) - 1) / (recent[0] - recent[-1])

    assert started(*times).recent_rate() == pytest.approx(expected)
