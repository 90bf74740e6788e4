"""ordered_map: results in item order, a thread per call in flight at most, a stop or an
abandoned iteration starting nothing more, and what is in flight then waited for."""

from __future__ import annotations

import threading
import time

import pytest

from reconciler.api.capacity import PacedLimit
from reconciler.api.concurrency import Stop, ordered_map
from reconciler.api.exceptions import NotFound
from reconciler.model.invite import Done, Failed, NotRun
from unit.api.test_limiter import Count


def test_no_more_threads_than_calls_in_flight() -> None:
    names: set[str] = set()

    def call(item: int) -> int:
        names.add(threading.current_thread().name)
        time.sleep(0.001)
        return item

    # At most 3 in flight of a cap of 64: a thread for each of the 64 would only wait.
    limit = PacedLimit(64, Count(3))
    results = [outcome for _, outcome in ordered_map(call, list(range(200)), limit)]

    assert results == [Done(i) for i in range(200)]
    assert 1 <= len(names) <= 3


def test_no_thread_is_left_running_once_the_map_is_done() -> None:
    before = set(threading.enumerate())

    list(ordered_map(lambda item: item, list(range(50)), 8))

    assert set(threading.enumerate()) <= before


def test_an_abandoned_iteration_starts_nothing_more_and_waits_for_what_is_in_flight() -> None:
    started: list[int] = []
    finished: list[int] = []
    release = threading.Event()
    stop = Stop()

    def call(item: int) -> int:
        started.append(item)
        if item > 0:
            release.wait(5)
        finished.append(item)
        return item

    mapped = ordered_map(call, list(range(100)), 4, stop)
    first = next(mapped)
    threading.Timer(0.2, release.set).start()
    mapped.close()  # the consumer gives up: waits for the three still in flight

    assert first[0] == 0
    assert stop.is_set()
    assert sorted(finished) == sorted(started)  # nothing left running
    assert len(started) <= 1 + 4 * 8  # at most what was in flight or queued when it gave up
    time.sleep(0.05)
    assert len(finished) == len(started)  # and nothing started after


def test_after_a_stop_the_items_never_started_are_not_run() -> None:
    stop = Stop()

    def call(item: int) -> int:
        if item == 2:
            stop.set("test")
        return item

    outcomes = [outcome for _, outcome in ordered_map(call, list(range(40)), 1, stop)]

    assert outcomes[:3] == [Done(0), Done(1), Done(2)]
    assert outcomes[3:] == [NotRun()] * 37


def test_an_api_error_is_an_outcome_and_any_other_failure_reaches_the_consumer() -> None:
    def call(item: int) -> int:
        if item == 1:
            raise NotFound("gone", status=404)
        if item == 3:
            raise KeyError(item)
        return item

    mapped = ordered_map(call, list(range(5)), 2)
    assert next(mapped)[1] == Done(0)
    failed = next(mapped)[1]
    assert isinstance(failed, Failed) and isinstance(failed.error, NotFound)
    assert next(mapped)[1] == Done(2)
    with pytest.raises(KeyError):
        next(mapped)


def test_calls_at_one_in_flight_still_go_to_a_worker() -> None:
    threads: set[str] = set()

    def call(item: int) -> int:
        threads.add(threading.current_thread().name)
        return item

    list(ordered_map(call, list(range(5)), 1))
    assert threading.current_thread().name not in threads


def test_at_one_in_flight_failures_are_outcomes_and_an_interrupt_stops_the_map() -> None:
    stop = Stop()
    calls: list[int] = []

    def call(item: int) -> int:
        calls.append(item)
        if item == 1:
            raise NotFound("gone", status=404)
        if item == 3:
            raise KeyboardInterrupt
        return item

    mapped = ordered_map(call, list(range(10)), 1, stop)
    assert next(mapped) == (0, Done(0))
    item, outcome = next(mapped)
    assert item == 1 and isinstance(outcome, Failed)
    assert next(mapped) == (2, Done(2))
    with pytest.raises(KeyboardInterrupt):
        next(mapped)
    assert stop.is_set() and calls == [0, 1, 2, 3]  # nothing after it started
