"""RecentStarts: what the run actually sends, as the pacer measures it."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reconciler.api.http.starts import RECENT, RecentStarts


def started(*times: float) -> RecentStarts:
    starts = RecentStarts()
    for t in times:
        starts.add(t)
    return starts


def test_fewer_than_two_starts_tell_no_rate() -> None:
    assert started(10.0).offered(10.0, since=0.0) is None
    assert started(10.0).recent_rate() == 0.0


def test_the_rate_offered_counts_the_starts_of_the_last_second() -> None:
    starts = started(8.0, 9.5, 9.6, 9.7, 9.8)  # 8.0 is over a second old: dropped

    assert starts.offered(9.8, since=0.0) == pytest.approx(4 / 0.3)


def test_time_before_a_pause_ended_is_left_out() -> None:
    # A Retry-After paused the run until 9.7: the slow starts before it are the
    # server's doing, not a measure of what it lets through.
    starts = started(9.1, 9.7, 9.75, 9.8)

    assert starts.offered(9.8, since=9.7) == pytest.approx(3 / 0.1)


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
