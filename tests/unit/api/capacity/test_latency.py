"""Latencies: the moving average, what answers take unloaded, and when a late answer's
request most likely reached the server."""

from __future__ import annotations

import pytest

from reconciler.api.capacity.latency import KEPT, Latencies


def answered(*times: float) -> Latencies:
    latencies = Latencies()
    for seconds in times:
        latencies.add(seconds)
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


def test_a_floor_forgotten_is_what_the_next_answers_take_the_average_kept() -> None:
    latencies = answered(*[0.002] * (4 * KEPT))
    latencies.forget_floor()  # the server slowed down, seen at one in flight (probe)

    assert latencies.unloaded() == 0.0  # nothing known: the count reads the average
    assert latencies.average == pytest.approx(0.002)
    latencies.add(0.1)
    assert latencies.unloaded() == pytest.approx(0.1)  # not 2 ms for 64 answers more


def test_a_request_answered_late_reached_the_server_as_late() -> None:
    latencies = answered(*[0.02] * KEPT)

    assert latencies.arrived(10.0, 0.08, 10.08) == pytest.approx(10.06)
    assert latencies.arrived(10.0, 0.024, 10.024) == 10.0  # not much slower: on time


def test_before_any_answer_a_request_reached_the_server_when_it_left() -> None:
    assert Latencies().arrived(10.0, 0.08, 10.08) == 10.0
    assert Latencies().arrived(10.0, 5.0, 15.0) == 10.0  # however long its answer took


def test_the_fastest_is_of_the_last_sixteen_answers_and_none_before_any() -> None:
    assert answered(0.001, *[0.2] * KEPT).fastest() == pytest.approx(0.2)
    assert Latencies().fastest() == 0.0


def test_a_block_is_sixteen_answers_and_its_median_the_ninth_fastest() -> None:
    # Seven of sixteen from a cache, at 5 ms: the block's median is still the server's.
    assert answered(*[0.005] * 7, *[0.2] * 9).unloaded() == pytest.approx(0.2)
    # Half of the first block fast: a block of eight, or of fifteen, would take them
    # for the server's pace, and the number in flight worked out from it with them.
    latencies = answered(*[0.01] * 8, *[0.2] * (KEPT + 8))
    assert latencies.unloaded() == pytest.approx(0.2)


def test_an_answer_up_to_a_quarter_slower_than_unloaded_is_on_time() -> None:
    latencies = answered(*[0.5] * KEPT)  # 0.5 s and 1.25 x 0.5 s are exact in binary

    assert latencies.arrived(10.0, 0.625, 10.625) == 10.0
    assert latencies.arrived(10.0, 0.75, 10.75) == pytest.approx(10.25)
