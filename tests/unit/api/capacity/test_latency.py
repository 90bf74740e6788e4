"""Latencies: the moving average, what answers take unloaded, and when a late answer's
request most likely reached the server."""

from __future__ import annotations

import pytest

from reconciler.api.capacity.latency import FLOOR_WINDOW, KEPT, Latencies


def answered(*times: float) -> Latencies:
    latencies = Latencies()
    for at, seconds in enumerate(times):
        latencies.add(seconds, now=at * 0.01)
    return latencies


def test_the_average_moves_a_fifth_of_the_way_to_each_answer() -> None:
    assert answered(0.1, 0.2).average == pytest.approx(0.12)


def test_unloaded_is_not_moved_by_a_cache_hit_now_and_then() -> None:
    # One answer in ten from a cache, at 5 ms; the rest 200 ms.
    latencies = answered(*[0.005 if i % 10 == 0 else 0.2 for i in range(100)])

    assert latencies.unloaded() == pytest.approx(0.2)
    assert latencies.fastest() == pytest.approx(0.005)


def test_unloaded_is_not_moved_by_a_queue_building_at_the_server() -> None:
    # 300 ms while nothing waits, then later and later as a queue builds.
    latencies = answered(*[0.3] * KEPT, *[0.3 + 0.05 * i for i in range(2 * KEPT)])

    assert latencies.unloaded() == pytest.approx(0.3)


def test_unloaded_follows_a_server_that_slowed_down_for_good() -> None:
    latencies = answered(*[0.02] * KEPT, *[0.2] * (6 * KEPT))

    assert latencies.unloaded() == pytest.approx(0.2)


def test_a_request_answered_late_reached_the_server_as_late() -> None:
    latencies = answered(*[0.02] * KEPT)

    assert latencies.arrived(10.0, 0.08, 10.08) == pytest.approx(10.06)
    assert latencies.arrived(10.0, 0.024, 10.024) == 10.0  # not much slower: on time


def test_before_any_answer_a_request_reached_the_server_when_it_left() -> None:
    assert Latencies().arrived(10.0, 0.08, 10.08) == 10.0
    assert Latencies().arrived(10.0, 5.0, 15.0) == 10.0  # however long its answer took


def test_the_floor_is_not_moved_by_a_queue_the_run_keeps() -> None:
    # 1 ms with few in flight, then 30 ms for as long as a queue is kept at the server
    # (seconds of it): unloaded takes the queue for the server's pace, the floor does not.
    latencies = answered(*[0.001] * KEPT, *[0.03] * (20 * KEPT))

    assert latencies.unloaded() == pytest.approx(0.03)
    assert latencies.floor() == pytest.approx(0.001)


def test_the_floor_follows_a_server_that_slowed_down_once_its_window_has_passed() -> None:
    latencies = Latencies()
    for at in range(KEPT):
        latencies.add(0.001, now=at * 0.01)
    slower_from = KEPT * 0.01
    for at in range(KEPT * 4):  # within the window
        latencies.add(0.05, now=slower_from + at * 0.01)
    assert latencies.floor() == pytest.approx(0.001)

    for at in range(KEPT):  # a block later than FLOOR_WINDOW after the fast one
        latencies.add(0.05, now=slower_from + FLOOR_WINDOW + at * 0.01)

    assert latencies.floor() == pytest.approx(0.05)


def test_the_floor_is_the_lowest_block_of_the_window_not_the_last() -> None:
    latencies = Latencies()
    medians = [0.02, 0.005, 0.04, 0.01]  # a block each, a second apart
    for block, median in enumerate(medians):
        for _ in range(KEPT):
            latencies.add(median, now=float(block))

    assert latencies.floor() == pytest.approx(0.005)
    assert Latencies().floor() == 0.0


def test_a_block_is_sixteen_answers_and_its_median_the_ninth_fastest() -> None:
    # Seven of sixteen from a cache, at 5 ms: the block's median is still the server's.
    assert answered(*[0.005] * 7, *[0.2] * 9).unloaded() == pytest.approx(0.2)
    # Half of the first block fast: a block of eight, or of fifteen, would take them
    # for the server's pace, and the number in flight worked out from it with them.
    latencies = answered(*[0.01] * 8, *[0.2] * (KEPT + 8))
    assert latencies.unloaded() == pytest.approx(0.2)
    assert latencies.floor() == pytest.approx(0.2)


def test_a_block_counts_towards_the_floor_for_the_whole_window_to_its_edge() -> None:
    latencies = Latencies()
    for _ in range(KEPT):
        latencies.add(0.001, now=0.0)
    for _ in range(KEPT):
        latencies.add(0.05, now=FLOOR_WINDOW)  # exactly FLOOR_WINDOW after the fast block

    assert latencies.floor() == pytest.approx(0.001)


def test_an_answer_up_to_a_quarter_slower_than_unloaded_is_on_time() -> None:
    latencies = answered(*[0.5] * KEPT)  # 0.5 s and 1.25 x 0.5 s are exact in binary

    assert latencies.arrived(10.0, 0.625, 10.625) == 10.0
    assert latencies.arrived(10.0, 0.75, 10.75) == pytest.approx(10.25)
