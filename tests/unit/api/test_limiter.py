"""The in-flight limit: rises while answers stay fast, falls on refusals and slowing answers."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from reconciler.api.concurrency import ordered_map
from reconciler.api.exceptions import NotFound, RateLimited, ServerError
from reconciler.api.limiter import AdaptiveLimit, FixedLimit, limiter_for
from reconciler.errors import ConfigError
from reconciler.settings.config import Settings, load_settings


def answers(limiter: AdaptiveLimit, count: int, seconds: float, status: int | None = 200) -> None:
    """``count`` calls sent together, each answered once after ``seconds``."""
    for _ in range(count):
        limiter.begin()
    for _ in range(count):
        limiter.observe(seconds, status)  # the API client's report of the attempt
        limiter.sample(seconds, status in (429, 503, None))  # ordered_map's, of the call


def test_starts_at_16_and_rises_while_latency_holds() -> None:
    limiter = AdaptiveLimit(cap=64)
    assert limiter.limit == 16
    seen = [limiter.limit]
    for _ in range(10):
        answers(limiter, limiter.limit, 0.050)
        seen.append(limiter.limit)
    assert seen == sorted(seen)
    assert limiter.limit == 64  # reached the cap, and stays there
    answers(limiter, 500, 0.050)
    assert limiter.limit == 64


def test_a_503_cuts_the_limit_at_once_and_once_per_window() -> None:
    limiter = AdaptiveLimit(cap=64)
    for _ in range(6):
        answers(limiter, limiter.limit, 0.050)
    high = limiter.limit
    answers(limiter, limiter.limit - 1, 0.050)
    limiter.observe(0.001, 503)  # closes the window
    assert limiter.limit < high
    assert limiter.limit >= high // 2  # one cut for the window, not one per answer
    assert limiter.refusals == 1


def test_a_429_is_the_pacers_not_the_in_flight_limits() -> None:
    # One picture of the server's capacity (issue 23): the rate answers a 429, and the
    # number in flight follows the rate (PacedLimit); two controllers cutting for the
    # same 429 is what sent a run to a crawl.
    limiter = AdaptiveLimit(cap=64)
    for _ in range(5):
        answers(limiter, limiter.limit, 0.010, 429)
    assert limiter.limit > 16 and limiter.refusals == 0


@pytest.mark.parametrize("status", [502, 503, None])
def test_refusals_and_lost_answers_keep_the_limit_falling(status: int | None) -> None:
    limiter = AdaptiveLimit(cap=64)
    for _ in range(5):
        answers(limiter, limiter.limit, 0.010, status)
    assert limiter.limit < 16 // 2


def test_slowing_answers_bring_the_limit_down() -> None:
    limiter = AdaptiveLimit(cap=64)
    for _ in range(8):
        answers(limiter, limiter.limit, 0.050)
    high = limiter.limit
    for _ in range(3):
        answers(limiter, limiter.limit, 0.150)  # three times slower: a queue built up
    assert limiter.limit < high * 0.6
    assert "refused" not in limiter.describe()


def test_a_few_slow_answers_in_a_window_do_not_move_it_down() -> None:
    limiter = AdaptiveLimit(cap=64)
    answers(limiter, 16, 0.050)
    before = limiter.limit
    answers(limiter, before - 3, 0.050)
    answers(limiter, 3, 2.0)  # stragglers, not a queue
    assert limiter.limit >= before


def test_no_rise_while_the_calls_in_flight_stay_far_below_the_limit() -> None:
    limiter = AdaptiveLimit(cap=64)
    for _ in range(200):  # one call at a time: the client, not the server, is the bottleneck
        answers(limiter, 1, 0.002)
    assert limiter.limit == 16
    answers(limiter, 16, 0.002)  # the limit used in full: now it may rise
    assert limiter.limit > 16


def test_the_cap_bounds_the_start_and_the_rise() -> None:
    limiter = AdaptiveLimit(cap=8)
    assert limiter.limit == 8
    answers(limiter, 200, 0.020)
    assert limiter.limit == 8


def test_fixed_limit_ignores_every_answer() -> None:
    limiter = FixedLimit(5)
    for status in (200, 429, 503):
        for _ in range(100):
            limiter.begin()
            limiter.observe(0.001, status)
            limiter.sample(0.001, status != 200)
    assert (limiter.limit, limiter.cap) == (5, 5)


def test_parallelism_set_anywhere_fixes_the_limit(tmp_path: Path) -> None:
    assert isinstance(limiter_for(Settings()), AdaptiveLimit)
    assert limiter_for(Settings()).limit == 16
    assert limiter_for(Settings(max_parallelism=100)).cap == 100
    explicit_16 = Settings().with_overrides(parallelism=16)  # --parallelism 16
    assert isinstance(limiter_for(explicit_16), FixedLimit)
    from_env = load_settings(None, env={"RECONCILER_PARALLELISM": "4"})
    assert (type(limiter_for(from_env)), limiter_for(from_env).limit) == (FixedLimit, 4)
    config = tmp_path / "reconciler.yaml"
    config.write_text("parallelism: 16\nmax_parallelism: 32\n", encoding="utf-8")
    from_file = limiter_for(load_settings(str(config), env={}))
    assert (type(from_file), from_file.limit) == (FixedLimit, 16)
    no_option = limiter_for(load_settings(str(config), env={}).with_overrides(parallelism=None))
    assert isinstance(no_option, FixedLimit)  # an option left out overrides nothing


def test_max_parallelism_from_the_environment_is_checked() -> None:
    settings = load_settings(None, env={"RECONCILER_MAX_PARALLELISM": "128"})
    assert limiter_for(settings).cap == 128
    for bad in ("0", "257", "lots"):
        with pytest.raises(ConfigError, match="RECONCILER_MAX_PARALLELISM"):
            load_settings(None, env={"RECONCILER_MAX_PARALLELISM": bad})


def test_ordered_map_reports_each_call_and_obeys_the_limit() -> None:
    limiter = AdaptiveLimit(cap=64, start=4)
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

    results = list(ordered_map(call, list(range(6)), limiter))
    assert [item for item, _ in results] == list(range(6))
    assert [outcome.value for _, outcome in results] == [0, 2, 4, None, 8, None]
    assert most <= 4
    assert limiter.answers == 6
    assert limiter.refusals == 1  # the 429, not the 404


def test_per_attempt_answers_replace_per_call_timings() -> None:
    limiter = AdaptiveLimit(cap=64)
    limiter.observe(0.05, 200)
    limiter.sample(9.0, True)  # a whole call, retries included: not counted twice
    assert (limiter.answers, limiter.refusals) == (1, 0)


def test_a_server_error_from_a_call_counts_as_refused() -> None:
    limiter = AdaptiveLimit(cap=64)

    def call(item: int) -> int:
        raise ServerError("unavailable", status=503)

    list(ordered_map(call, [1, 2], limiter))
    assert limiter.refusals == 2


# From test_review_wording.py: Counts read as English: one answer, one invite.
def test_the_settled_line_says_one_answer() -> None:
    limiter = AdaptiveLimit()
    limiter.observe(0.010, 200)
    assert limiter.describe().endswith("; 1 answer)")
    limiter.observe(0.010, 503)
    assert limiter.describe().endswith("; 2 answers, 1 refused)")
