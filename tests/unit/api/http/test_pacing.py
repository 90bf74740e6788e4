"""RequestPacer: the rate learned from every answer, turns in arrival order, and what a
wait costs a request's retry budget. A fake clock makes every step exact; the FIFO
tests use real threads and real time (short)."""

from __future__ import annotations

import heapq
import itertools
import threading
import time

import pytest

from reconciler.api.http import rate
from reconciler.api.http.pacing import NoTurn, RequestPacer, Turn
from reconciler.stop import Stop


class FakeTime:
    """A clock that only moves when the code under test sleeps (or the test says)."""

    def __init__(self, start: float = 100.0) -> None:
        self.now = start
        self.sleeps: list[float] = []

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        # A worker whose turn has come must take it, not spin on sleeps of nothing.
        assert seconds > 0, "slept for nothing"
        self.sleeps.append(seconds)
        self.now += seconds


@pytest.fixture
def fake_time() -> FakeTime:
    return FakeTime()


@pytest.fixture
def pacer(fake_time: FakeTime) -> RequestPacer:
    return RequestPacer(clock=fake_time.clock, sleep=fake_time.sleep)


def answered(pacer: RequestPacer, count: int, latency: float = 0.0) -> list[Turn]:
    """``count`` requests, each answered (not refused) once it has started."""
    turns = []
    for _ in range(count):
        turn = pacer.wait_turn()
        pacer.on_answer(turn, latency, refused=False)
        turns.append(turn)
    return turns


def refuse(pacer: RequestPacer, turn: Turn | None = None, retry_after: float | None = None) -> None:
    pacer.on_answer(turn or pacer.wait_turn(), 0.001, refused=True, retry_after=retry_after)


def start_times(pacer: RequestPacer, fake_time: FakeTime, count: int) -> list[float]:
    times = []
    for _ in range(count):
        pacer.wait_turn()
        times.append(fake_time.now)
    return times


# -- slow start ------------------------------------------------------------------


def test_a_run_starts_paced_and_speeds_up_with_every_answer(
    pacer: RequestPacer, fake_time: FakeTime
) -> None:
    times = []
    for _ in range(8):
        turn = pacer.wait_turn()
        times.append(fake_time.now)
        pacer.on_answer(turn, 0.0, refused=False)

    gaps = [b - a for a, b in itertools.pairwise(times)]
    assert gaps[0] == pytest.approx(1 / rate.START_RATE)
    assert gaps[1] == pytest.approx(1 / (rate.START_RATE * rate.SLOW_START_GAIN))
    assert all(b < a for a, b in itertools.pairwise(gaps))  # faster and faster
    assert pacer.rate is None and not pacer.limited  # nothing refused: no limit known


def test_slow_start_never_runs_far_ahead_of_what_is_sent(
    pacer: RequestPacer, fake_time: FakeTime
) -> None:
    # A slow server: answers come, but starts stay few. The rate may not run off to
    # thousands a second and meet a limit from there.
    for _ in range(40):
        turn = pacer.wait_turn()
        fake_time.now += 0.5
        pacer.on_answer(turn, 0.5, refused=False)

    assert pacer._control.rate <= rate.START_RATE * rate.SLOW_START_GAIN


def test_the_first_request_never_waits_whatever_the_clock_reads() -> None:
    # A monotonic clock has no fixed origin: it may read 0.2 s just after boot.
    fake = FakeTime(start=0.0)
    pacer = RequestPacer(clock=fake.clock, sleep=fake.sleep)

    pacer.wait_turn()

    assert fake.sleeps == []


# -- refusals --------------------------------------------------------------------


def test_a_refusal_cuts_the_rate_to_a_share_of_the_refused_requests_rate(
    pacer: RequestPacer,
) -> None:
    turn = pacer.wait_turn()

    refuse(pacer, turn)

    assert pacer.limited
    assert pacer.rate == pytest.approx(turn.rate * rate.FIRST_CUT)
    assert pacer.rate_limited_events == 1


def test_a_refusal_cuts_from_the_rate_actually_sent_when_that_is_lower(
    pacer: RequestPacer, fake_time: FakeTime
) -> None:
    # Paced at 1,000/s but sending 4 a second (the in-flight limit held it back).
    pacer._control.rate = 1000.0
    for _ in range(4):
        turn = pacer.wait_turn()
        fake_time.now += 0.25

    refuse(pacer, turn)

    assert pacer.rate == pytest.approx(4 * rate.FIRST_CUT, rel=0.1)


def test_a_later_refusal_cuts_by_a_tenth(pacer: RequestPacer, fake_time: FakeTime) -> None:
    refuse(pacer)
    fake_time.now += 5
    answered(pacer, 30)
    turn = pacer.wait_turn()

    refuse(pacer, turn)

    assert pacer.rate == pytest.approx(turn.rate * rate.CUT)


def test_refusals_of_requests_sent_before_a_cut_do_not_cut_again(
    pacer: RequestPacer, fake_time: FakeTime
) -> None:
    # Sent together before the server first said no: one piece of news, one cut.
    in_flight = [pacer.wait_turn() for _ in range(5)]
    refuse(pacer, in_flight[0])
    rate = pacer.rate

    for turn in in_flight[1:]:
        refuse(pacer, turn)

    assert pacer.rate == rate
    assert pacer.rate_limited_events == 1
    assert pacer.refusals == 5


def test_the_rate_climbs_back_to_just_under_the_ceiling_within_a_few_seconds(
    pacer: RequestPacer, fake_time: FakeTime
) -> None:
    refuse(pacer)
    fake_time.now += 5
    answered(pacer, 20)
    turn = pacer.wait_turn()
    refuse(pacer, turn)  # the ceiling: this request's rate
    ceiling = turn.rate

    for _ in range(60):  # about four seconds of answers
        answered(pacer, 1)

    assert pacer.rate == pytest.approx(rate.RECOVERY * ceiling, rel=0.01)


def test_without_refusals_the_rate_probes_beyond_the_ceiling_ever_faster(
    pacer: RequestPacer, fake_time: FakeTime
) -> None:
    refuse(pacer)
    ceiling = pacer._control.ceiling
    assert ceiling is not None
    fake_time.now += 20.0  # long after the cut: back under the ceiling at the next answer
    answered(pacer, 1)
    assert pacer._control.rate == pytest.approx(rate.RECOVERY * ceiling)
    rates = []
    for _ in range(5):
        answered(pacer, 60)  # one after another, each held back by the rate
        rates.append(pacer._control.rate)

    steps = [b - a for a, b in itertools.pairwise(rates)]
    assert all(s > 0 for s in steps) and all(b > a for a, b in itertools.pairwise(steps))
    assert rates[0] < ceiling * 1.05  # slowly near a known limit


def test_a_run_sending_slower_than_its_rate_does_not_probe(
    pacer: RequestPacer, fake_time: FakeTime
) -> None:
    refuse(pacer)
    fake_time.now += 20.0
    answered(pacer, 1)
    level = pacer._control.rate
    for _ in range(200):
        fake_time.now += 1.0  # far slower than the rate: it holds nothing back
        answered(pacer, 1)

    assert pacer._control.rate == level


def test_a_server_refusing_everything_brings_the_rate_to_its_floor_not_zero(
    pacer: RequestPacer, fake_time: FakeTime
) -> None:
    for _ in range(100):
        refuse(pacer)

    assert pacer.rate == rate.MIN_RATE
    times = start_times(pacer, fake_time, 3)
    assert [b - a for a, b in itertools.pairwise(times)] == pytest.approx([1 / rate.MIN_RATE] * 2)


def test_retry_after_pauses_every_turn_until_then(pacer: RequestPacer, fake_time: FakeTime) -> None:
    refuse(pacer, retry_after=5.0)
    limited_at = fake_time.now

    first, second = start_times(pacer, fake_time, 2)

    assert first == pytest.approx(limited_at + 5.0)  # and not much longer
    assert second > first


def test_a_waiting_worker_looks_up_at_least_four_times_a_second(
    pacer: RequestPacer, fake_time: FakeTime
) -> None:
    refuse(pacer, retry_after=5.0)

    pacer.wait_turn()

    assert fake_time.sleeps and max(fake_time.sleeps) <= 0.25
    assert sum(fake_time.sleeps) == pytest.approx(5.0)


def test_a_token_bucket_cycle_measures_the_rate_let_through(
    pacer: RequestPacer, fake_time: FakeTime
) -> None:
    # A pause, then a burst: the rate at the next refusal is what a whole cycle
    # let through (here 100 in two seconds), not how fast the burst went.
    refuse(pacer, retry_after=1.0)
    fake_time.now += 1.0
    for _ in range(100):
        turn = pacer.wait_turn()
        pacer.on_answer(turn, 0.0, refused=False)
    fake_time.now += 2.0 - (fake_time.now % 1)  # the cycle took about two seconds
    refuse(pacer, pacer.wait_turn(), retry_after=1.0)

    assert pacer._control.ceiling is not None and pacer._control.ceiling < 60


def test_a_storm_of_refusals_is_not_measured_as_a_cycle(
    pacer: RequestPacer, fake_time: FakeTime
) -> None:
    # A gateway refusing everything for a few seconds, Retry-After: 1 each time: no
    # request got through between two cuts, so no rate was measured; the rate is cut
    # as for any refusal, not set to the floor for the rest of the run.
    answered(pacer, 20)
    refuse(pacer, retry_after=1.0)
    after_one = pacer.rate
    fake_time.now += 1.0
    refuse(pacer, pacer.wait_turn(), retry_after=1.0)

    assert after_one is not None and after_one > 4 * rate.MIN_RATE
    assert pacer.rate == pytest.approx(after_one * rate.FIRST_CUT)


# -- what a wait costs -----------------------------------------------------------


def test_the_servers_pause_and_one_interval_are_not_queueing(
    pacer: RequestPacer, fake_time: FakeTime
) -> None:
    refuse(pacer, retry_after=3.0)

    turn = pacer.wait_turn()

    assert turn.queued == 0.0  # all of it the server's doing: charged to the budget


def test_a_pause_longer_than_the_budget_left_is_refused_at_once(
    pacer: RequestPacer, fake_time: FakeTime
) -> None:
    refuse(pacer, retry_after=100000.0)

    with pytest.raises(NoTurn) as caught:
        pacer.wait_turn(budget_left=60.0)

    assert not caught.value.stopped
    assert caught.value.wait == pytest.approx(100000.0)
    assert fake_time.sleeps == []


def test_a_pause_within_the_budget_is_waited(pacer: RequestPacer, fake_time: FakeTime) -> None:
    refuse(pacer, retry_after=5.0)

    pacer.wait_turn(budget_left=5.0)  # the pause ends as the budget does: in time

    assert fake_time.now == pytest.approx(105.0)


def test_a_request_not_yet_sent_waits_out_any_pause(
    pacer: RequestPacer, fake_time: FakeTime
) -> None:
    # Its budget has not started: our queue is not the server refusing it.
    refuse(pacer, retry_after=300.0)

    pacer.wait_turn(budget_left=None)

    assert fake_time.now == pytest.approx(400.0)


def test_a_stopped_run_leaves_no_worker_waiting(fake_time: FakeTime) -> None:
    stop = Stop()

    def sleep(seconds: float) -> None:
        fake_time.sleep(seconds)
        stop.set("interrupted")  # the run stops while this worker waits out a long pause

    pacer = RequestPacer(clock=fake_time.clock, sleep=sleep)
    refuse(pacer, retry_after=100000.0)

    with pytest.raises(NoTurn) as caught:
        pacer.wait_turn(stop=stop)

    assert caught.value.stopped
    assert len(fake_time.sleeps) == 1 and fake_time.sleeps[0] <= 0.25


def test_a_stopped_run_still_lets_a_worker_go_when_no_wait_is_needed(
    pacer: RequestPacer,
) -> None:
    # The re-send of a write already done must finish after an interrupt.
    stop = Stop()
    stop.set("interrupted")

    pacer.wait_turn(stop=stop)


# -- in arrival order, with real threads ------------------------------------------


def paced_at(rate: float) -> RequestPacer:
    pacer = RequestPacer()
    pacer._control.rate = pacer._control.ceiling = rate  # a limit already found
    pacer._control._reached = 10**9  # no probing during the test
    return pacer


def test_turns_are_given_in_arrival_order() -> None:
    pacer = paced_at(200.0)
    pacer.wait_turn()  # the next turn is 5 ms away: everyone below queues
    order: list[int] = []
    threads = []
    for i in range(8):
        thread = threading.Thread(target=lambda i=i: (pacer.wait_turn(), order.append(i)))
        thread.start()
        threads.append(thread)
        time.sleep(0.002)  # arrivals in a known order
    for thread in threads:
        thread.join(5)

    assert order == list(range(8))


def test_time_behind_other_requests_is_queueing(fake_time: FakeTime) -> None:
    pacer = paced_at(20.0)
    turns: list[Turn] = []
    threads = [threading.Thread(target=lambda: turns.append(pacer.wait_turn())) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(5)

    # The sixth waited about five intervals (0.25 s), four of them behind the others.
    last = max(turns, key=lambda t: t.queued)
    assert 0.15 < last.queued < 0.5


def test_a_worker_that_gives_up_does_not_hold_up_the_line() -> None:
    pacer = paced_at(2.0)
    pacer.wait_turn()
    stop = Stop()
    given_up: list[bool] = []

    def waits() -> None:
        try:
            pacer.wait_turn(stop=stop)
        except NoTurn:
            given_up.append(True)

    first = threading.Thread(target=waits)
    first.start()
    time.sleep(0.05)
    stop.set("interrupted")
    first.join(5)
    started = time.monotonic()
    pacer.wait_turn()  # the line is free again: one interval from the last start

    assert given_up == [True]
    assert time.monotonic() - started < 0.6


# -- in flight and what is said ------------------------------------------------------


def test_servable_is_what_the_rate_keeps_busy_and_one_waiting(pacer: RequestPacer) -> None:
    refuse(pacer)
    pacer._control.rate = 10.0
    pacer.on_answer(pacer.wait_turn(), 0.25, refused=False)
    pacer._control.rate = 10.0

    assert pacer.servable() == 4  # 10/s × 0.25 s = 2.5 busy, rounded up, and one waiting


def test_in_slow_start_no_more_in_flight_than_twice_what_is_sent_keeps_busy(
    pacer: RequestPacer, fake_time: FakeTime
) -> None:
    # Sending 100 a second, answers in 50 ms: 5 busy. The rate may already allow
    # far more; in flight follows what is sent, so a burst running dry meets few.
    pacer._control.rate = 1000.0  # no start held back: the starts are the test's own pace
    for _ in range(10):
        turn = pacer.wait_turn()
        pacer.on_answer(turn, 0.05, refused=False)
        fake_time.now += 0.01
    pacer._control.rate = 10_000.0

    assert pacer.servable() == 2 * 5 + 1


def test_the_rate_is_reported_only_once_it_has_settled(
    pacer: RequestPacer, fake_time: FakeTime
) -> None:
    refuse(pacer)
    assert pacer.settled_rate() is None

    fake_time.now += rate.SETTLE

    assert pacer.settled_rate() == pytest.approx(rate.RECOVERY * pacer._control.ceiling)


# -- against a simulated gateway ------------------------------------------------------


def behind_limit_req(rate: float, burst: int, count: int) -> tuple[float, int]:
    """``count`` requests one after another through nginx's limit_req arithmetic (in
    fake time, 2 ms an answer): the seconds it took and how many were refused."""
    fake = FakeTime(start=0.0)
    pacer = RequestPacer(clock=fake.clock, sleep=fake.sleep)
    last: float | None = None
    excess = 0.0
    done = refused = 0
    while done < count:
        turn = pacer.wait_turn()
        # nginx: the excess over the rate drains at the rate; over the burst: refused.
        now_excess = 0.0 if last is None else max(0.0, excess - rate * (fake.now - last) + 1)
        fake.now += 0.002
        if now_excess <= burst:
            excess, last, done = now_excess, fake.now - 0.002, done + 1
            pacer.on_answer(turn, 0.002, refused=False)
        else:
            refused += 1
            pacer.on_answer(turn, 0.002, refused=True)
    return fake.now, refused


@pytest.mark.parametrize(("rate", "burst"), [(5, 0), (10, 0), (20, 10)])
def test_a_gateway_limit_is_met_with_few_refusals(rate: float, burst: int) -> None:
    # Issue 23's targets, without the network: 300 requests finish close to
    # 300 / rate, and at most 2% of the requests sent are refused.
    seconds, refused = behind_limit_req(rate, burst, 300)

    assert seconds <= 1.1 * 300 / rate
    assert refused <= 0.02 * (300 + refused)


def behind_token_bucket(rate: float, count: int, latency: float) -> tuple[float, int]:
    """``count`` requests against the platform's own limit (a token bucket: a second's
    burst, then ``rate`` a second, 429 with ``Retry-After: 1``), in fake time: as
    many in flight as the pacer's rate keeps busy (at most 64, the default
    max_parallelism), 0.5 ms of client work to send each, answered ``latency``
    later; a refused one is sent again. The seconds it took, and the refusals."""
    fake = FakeTime(start=0.0)
    pacer = RequestPacer(clock=fake.clock, sleep=fake.sleep)
    tokens, filled = rate, 0.0
    answers: list[tuple[float, int, Turn, bool]] = []  # (due, order, turn, refused)
    to_send, done, refused = count, 0, 0
    while True:
        while answers and answers[0][0] <= fake.now:
            _, _, turn, was_refused = heapq.heappop(answers)
            retry_after = 1.0 if was_refused else None
            pacer.on_answer(turn, latency, refused=was_refused, retry_after=retry_after)
            refused += was_refused
            done += not was_refused
            to_send += was_refused
        if done == count:
            break
        paused_until = pacer._control.pause[1]  # the workers all sleep until then
        if paused_until <= fake.now and to_send and len(answers) < min(64, pacer.servable()):
            turn = pacer.wait_turn()
            tokens, filled = min(rate, tokens + (fake.now - filled) * rate), fake.now
            let_through = tokens >= 1
            tokens -= let_through
            fake.now += 0.0005
            heapq.heappush(answers, (fake.now + latency, to_send + done, turn, not let_through))
            to_send -= 1
        else:  # wait for the next answer, or for the pause to end
            waits = [answers[0][0]] if answers else []
            fake.now = min(waits + ([paused_until] if paused_until > fake.now else []))
    return fake.now, refused


def test_the_platforms_token_bucket_is_met_with_few_refusals() -> None:
    # Issue 23's target b, without the network: 800 requests to a near server
    # allowing 100 a second finish within 5% of 8 s, and under 1% are refused.
    seconds, refused = behind_token_bucket(100, 800, latency=0.002)

    assert seconds <= 1.05 * 800 / 100
    assert refused < 0.01 * (800 + refused)
