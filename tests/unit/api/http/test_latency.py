"""Latency: the time a request in flight is counted for, queues at the server left out."""

from __future__ import annotations

import pytest

from reconciler.api.http.latency import BASE_WINDOW, QUEUE_GAIN, Latency


def test_nothing_answered_yet_counts_as_no_latency() -> None:
    assert Latency().seconds == 0.0


def test_a_steady_server_is_counted_at_its_average() -> None:
    latency = Latency()
    for i, seconds in enumerate([0.050, 0.060, 0.055, 0.050]):
        latency.add(float(i), seconds)

    assert 0.050 < latency.seconds < 0.060


def test_answers_slowed_by_a_queue_at_the_server_count_at_most_twice_the_fastest() -> None:
    # A local server busy with our own requests: 1 ms alone, 4 ms with a queue.
    # Counting 4 ms would put more in flight, and lengthen the queue further.
    latency = Latency()
    latency.add(0.0, 0.001)
    for i in range(20):
        latency.add(0.1 + i / 100, 0.004)

    assert latency.seconds == pytest.approx(QUEUE_GAIN * 0.001)


def test_a_server_that_got_slower_for_good_is_believed_within_the_window() -> None:
    latency = Latency()
    latency.add(0.0, 0.001)
    for i in range(1, 40):
        latency.add(i * BASE_WINDOW / 20, 0.050)  # for two windows: the 1 ms is forgotten

    assert latency.seconds == pytest.approx(0.050, rel=1e-3)
