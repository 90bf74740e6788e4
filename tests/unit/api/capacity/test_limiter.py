"""The in-flight limit: at most parallelism (or max_parallelism), never more than the
allowed rate keeps busy; ordered_map obeys it."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from reconciler.api.capacity.concurrency import ordered_map
from reconciler.api.capacity.limiter import FixedLimit, PacedLimit, limiter_for
from reconciler.api.capacity.pacing import RequestPacer
from reconciler.api.exceptions import NotFound, RateLimited
from reconciler.errors import ConfigError
from reconciler.model.outcome import Done
from reconciler.settings.config import Settings, load_settings


class Rate:
    """A pacer's answer to how many in flight its rate keeps busy."""

    def __init__(self, servable: int) -> None:
        self.count = servable

    def servable(self) -> int:
        return self.count

    def forget_latency_floor(self) -> None:
        pass


def test_fixed_limit_ignores_every_answer() -> None:
    limiter = FixedLimit(5)
    for status in (200, 429, 503):
        for _ in range(100):
            limiter.begin()
            limiter.observe(0.001, status)
            limiter.sample(0.001, status != 200)
    assert (limiter.limit, limiter.cap) == (5, 5)


def test_the_rate_bounds_the_number_in_flight_below_the_cap() -> None:
    rate = Rate(3)
    limiter = PacedLimit(FixedLimit(64), rate)
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
    pacer = RequestPacer(sleep=lambda seconds: None)
    limiter = limiter_for(Settings(), pacer)
    assert limiter.limit == 1  # nothing known: one request, then as the answers say
    for _ in range(20):
        pacer.on_answer(pacer.wait_turn(), 0.05, refused=False)
    assert limiter.limit > 4


def test_parallelism_set_anywhere_is_the_most_in_flight(tmp_path: Path) -> None:
    assert limiter_for(Settings()).limit == 64  # max_parallelism
    assert limiter_for(Settings(max_parallelism=100)).cap == 100
    explicit_16 = Settings().with_overrides(parallelism=16)  # --parallelism 16
    assert limiter_for(explicit_16).limit == 16
    from_env = load_settings(None, env={"RECONCILER_PARALLELISM": "4"})
    assert limiter_for(from_env).limit == 4
    config = tmp_path / "reconciler.yaml"
    config.write_text("parallelism: 16\nmax_parallelism: 32\n", encoding="utf-8")
    assert limiter_for(load_settings(str(config), env={})).limit == 16
    no_option = limiter_for(load_settings(str(config), env={}).with_overrides(parallelism=None))
    assert no_option.limit == 16  # an option left out overrides nothing


def test_max_parallelism_from_the_environment_is_checked() -> None:
    settings = load_settings(None, env={"RECONCILER_MAX_PARALLELISM": "128"})
    assert limiter_for(settings).cap == 128
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

    results = list(ordered_map(call, list(range(6)), PacedLimit(FixedLimit(64), Rate(4))))
    assert [item for item, _ in results] == list(range(6))
    values = [outcome.value if isinstance(outcome, Done) else None for _, outcome in results]
    assert values == [0, 2, 4, None, 8, None]
    assert most <= 4
