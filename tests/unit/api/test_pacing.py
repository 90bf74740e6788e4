"""RequestPacer's turns: in arrival order, one interval of the rate apart and one
interval after a request that reached the server late, never in a pause or a hold,
and what a wait costs a request's retry budget. A fake clock makes every step exact;
the FIFO tests use real threads and real time (short). The rate itself: test_rate.py."""

from __future__ import annotations

import threading
import time

import pytest
from pytest import approx
from support.limits import FakeTime

from reconciler.api.capacity import MAX_HOLD, START_RATE, NoTurn, RequestPacer, Turn
from reconciler.api.concurrency import Stop
from reconciler.output.console import Progress
from unit.api.test_rate import Scene


@pytest.fixture
def s() -> Scene:
    return Scene()


# -- spacing ---------------------------------------------------------------------


def test_the_first_request_never_waits_whatever_the_clock_reads():
    # A monotonic clock has no fixed origin: it may read 0.2 s just after boot.
    fake = FakeTime(start=0.0)
    RequestPacer(clock=fake.clock, sleep=fake.sleep).wait_turn()

    assert fake.sleeps == []


def limited(s: Scene, latency: float = 0.02) -> Scene:
    """Paced at 10/s, a limit known, answers coming ``latency`` after they leave."""
    s.control.rate = s.control.ceiling = s.control._level = 10.0
    s.control._reached = 0  # probing from here: 0.1% after these answers
    for _ in range(16):
        s.answer(s.turn(), latency)
        s.later(0.1)
    return s


@pytest.mark.parametrize(
    ("answered_in", "gap"),
    [
        (0.02, 0.1),  # on time: one interval of the rate
        # Answered 60 ms late (a connection opened, a thread scheduled late): it reached
        # nginx about 60 ms late too, and nginx's limit_req counts the spacing from there.
        (0.08, 0.1 + 0.06),
        (None, 0.2),  # late and not answered yet (it hangs): at most one interval more
    ],
    ids=["on time", "answered late", "hanging"],
)
def test_turns_are_one_interval_apart_from_when_the_last_reached_the_server(s, answered_in, gap):
    first = limited(s).later(-0.1).turn()
    if answered_in is not None:
        s.later(answered_in).answer(first, answered_in)

    assert s.turn().at - first.at == approx(gap, rel=0.01)


def test_a_worker_first_in_line_sleeps_until_its_turn_comes(s):
    # Its wait is a sleep (here the clock moves only then). Waiting on the line's lock
    # instead, it would wait for ever here, and in a run wake a quarter second late.
    s.refused(retry_after=1.0)
    turns: list[Turn] = []
    worker = threading.Thread(target=lambda: turns.append(s.turn()), daemon=True)

    worker.start()
    worker.join(5)

    assert not worker.is_alive(), "no turn within 5 s"
    assert [t.at for t in turns] == [approx(101.0)]


@pytest.mark.parametrize(
    ("latency", "out"),
    [(0.09375, 0.109375), (0.09375, 0.1171875), (0.125, 0.1875)],
    ids=["within", "at-the-edge", "arrived-already"],
)
def test_a_request_out_no_longer_than_late_allows_does_not_hold_the_next(s, latency, out):
    # Answers take 94 ms unloaded (3/32 s): one out for up to 1.25 times that (117 ms)
    # is not late yet, so it reached the server as it left, and the next may go one
    # interval (100 ms at 10/s) after that: now, without waiting. At 125 ms unloaded,
    # more than the interval, one out for 187.5 ms and not answered yet reached the
    # server 62.5 ms after it left at the latest (its answer could come now): one
    # interval after that is past, so the next goes now, not a whole interval later.
    first = limited(s, latency=latency).at(200.0).turn()  # a round instant: the edge is exact

    assert s.later(out).turn().at - first.at == approx(out)  # the first not answered yet


def test_requests_that_come_just_as_the_rate_allows_do_not_raise_it(s):
    # Each comes at the very instant its turn does: the rate held none of them back, so
    # slow start has nothing to raise it for (the run sends no faster than this).
    for _ in range(20):
        turn = s.turn()
        s.answer(turn, 0.001)
        s.at(turn.at + 1.0 / START_RATE)

    assert s.time.sleeps == []
    assert s.pacer.describe() == "no refusal in 20 answers; paced at up to 10/s"


def test_the_first_request_is_not_held_back_by_the_rate_either(s):
    # Two start as the rate allows (the first at once), then both are answered: the
    # rate held neither back, so slow start does not raise it.
    first = s.turn()
    second = s.at(first.at + 1.0 / START_RATE).turn()
    s.answer(first, 0.001)
    s.answer(second, 0.001)

    assert s.time.sleeps == []
    assert s.pacer.describe() == "no refusal in 2 answers; paced at up to 10/s"


def test_a_waiting_worker_looks_up_at_least_four_times_a_second(s):
    s.refused(retry_after=5.0).turn()

    assert s.time.sleeps and max(s.time.sleeps) <= 0.25
    assert sum(s.time.sleeps) == approx(5.0)


@pytest.mark.parametrize(
    ("refusals", "retry_after", "budget", "asked", "wait"),
    [
        # Refused again and again, the hold has doubled to its longest (4 s); then a 429
        # with Retry-After: 4. The wait past the budget is the server's ask, and the error
        # says so (not "refused for all of retry_max_seconds" after our own hold).
        (10, MAX_HOLD, 1.0, True, MAX_HOLD),
        (0, 100000.0, 60.0, True, 100000.0),  # the server's pause: it asked for it
        (10, None, 1.0, False, MAX_HOLD),  # nothing ever let through: the longest hold
    ],
    ids=["a pause as long as the hold", "a pause", "a hold"],
)
def test_a_wait_longer_than_the_budget_left_is_refused_at_once_saying_whose_it_is(
    s, refusals, retry_after, budget, asked, wait
):
    for _ in range(refusals):
        s.refused()
    slept = len(s.refused(retry_after=retry_after).time.sleeps)

    with pytest.raises(NoTurn) as caught:
        s.pacer.wait_turn(budget_left=budget)

    assert caught.value.asked is asked and not caught.value.stopped
    assert caught.value.wait == approx(wait)
    assert s.time.sleeps[slept:] == []


# -- what a wait costs -----------------------------------------------------------


@pytest.mark.parametrize("retry_after", [3.0, None], ids=["a pause", "a hold"])
def test_the_servers_pause_or_hold_and_one_interval_are_not_queueing(s, retry_after):
    # All of it the server's doing: charged to the budget.
    assert s.refused(retry_after=retry_after).turn().queued == 0.0


def test_in_slow_start_the_rates_interval_is_ours_not_the_servers(s):
    # No limit known yet: the pace is the run's own guess, so waiting for it is not
    # charged to a request's retry budget.
    first = s.turn()

    second = s.turn()

    assert second.at - first.at == approx(1.0 / START_RATE)
    assert second.queued == approx(1.0 / START_RATE)


def test_a_refusal_long_past_does_not_make_later_queueing_the_servers(s):
    # Its hold long over; the first never answered: it holds the next one more interval.
    first = limited(s).refused().later(60.0).turn()

    second = s.turn()

    interval = 1.0 / second.rate
    assert second.at - first.at == approx(2 * interval)
    assert second.queued == approx(interval)  # the one behind first: ours


@pytest.mark.parametrize(
    ("retry_after", "budget"),
    # The pause ends as the budget does: in time. A request not yet sent has no budget
    # running: our queue is not the server refusing it.
    [(5.0, 5.0), (300.0, None)],
    ids=["within the budget", "not yet sent"],
)
def test_a_pause_within_the_budget_or_before_the_request_is_sent_is_waited(s, retry_after, budget):
    s.refused(retry_after=retry_after).pacer.wait_turn(budget_left=budget)

    assert s.time.now == approx(100.0 + retry_after)


def test_a_stopped_run_leaves_no_worker_waiting():
    stop = Stop()

    def sleep(seconds: float) -> None:
        scene.time.sleep(seconds)
        stop.set("interrupted")  # the run stops while this worker waits out a long pause

    scene = Scene(sleep)
    scene.refused(retry_after=100000.0)

    with pytest.raises(NoTurn) as caught:
        scene.pacer.wait_turn(stop=stop)

    assert caught.value.stopped
    assert len(scene.time.sleeps) == 1 and scene.time.sleeps[0] <= 0.25


def test_a_stopped_run_still_lets_a_worker_go_when_no_wait_is_needed(s):
    # The re-send of a write already done must finish after an interrupt.
    stop = Stop()
    stop.set("interrupted")

    s.pacer.wait_turn(stop=stop)


# -- in arrival order, with real threads ------------------------------------------


def paced_at(rate: float) -> RequestPacer:
    pacer = RequestPacer()
    pacer._control.rate = pacer._control.ceiling = pacer._control._level = rate  # a limit found
    pacer._control._reached = 0  # probing from here, slowly
    return pacer


def test_turns_are_given_in_arrival_order():
    pacer = paced_at(200.0)
    pacer.wait_turn()  # the next turn is 5 ms away: everyone below queues
    order: list[int] = []
    threads = []

    def wait_then_note(i: int) -> None:
        pacer.wait_turn()
        order.append(i)

    for i in range(8):
        thread = threading.Thread(target=wait_then_note, args=(i,))
        thread.start()
        threads.append(thread)
        time.sleep(0.002)  # arrivals in a known order
    for thread in threads:
        thread.join(5)

    assert order == list(range(8))


def test_time_behind_other_requests_is_queueing():
    pacer = paced_at(20.0)
    turns: list[Turn] = []
    arrived = threading.Barrier(7)

    def request() -> None:
        arrived.wait()
        turns.append(pacer.wait_turn())

    threads = [threading.Thread(target=request) for _ in range(6)]
    # The fake clock moves only when the first in line sleeps, and no one gets in line
    # while the pacer's lock is held: all six arrive at the same time, however late the
    # machine schedules their threads.
    with pacer._lock:
        for thread in threads:
            thread.start()
        arrived.wait()
        time.sleep(0.05)
    for thread in threads:
        thread.join(5)

    # The sixth waited about five intervals (0.25 s), four of them behind the others.
    last = max(turns, key=lambda t: t.queued)
    assert 0.15 < last.queued < 0.5


def test_a_worker_that_gives_up_does_not_hold_up_the_line():
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


def in_line(pacer: RequestPacer, count: int) -> None:
    """Wait (real time, 5 s at most) until ``count`` workers are in line."""
    deadline = time.monotonic() + 5
    while len(pacer._line) < count and time.monotonic() < deadline:
        time.sleep(0.001)


def test_a_retry_behind_another_gives_up_at_once_when_a_new_pause_outlasts_its_budget():
    # A retry queued behind a request waiting for its turn hears of a 429 asking for a
    # minute's pause (another request's answer). With 5 s of its budget left it gives up
    # now ("not retried"), not once the one ahead of it has waited the minute out.
    pacer = paced_at(1.0)
    in_flight = pacer.wait_turn()  # the next turn is a second away: the two below queue
    stop = Stop()
    outcomes: dict[str, Turn | NoTurn] = {}

    def wait(name: str, budget_left: float | None) -> None:
        try:
            outcomes[name] = pacer.wait_turn(stop=stop, budget_left=budget_left)
        except NoTurn as no:
            outcomes[name] = no

    ahead = threading.Thread(target=wait, args=("ahead", None), daemon=True)
    retry = threading.Thread(target=wait, args=("retry", 5.0), daemon=True)
    ahead.start()
    in_line(pacer, 1)
    retry.start()
    in_line(pacer, 2)
    pacer.on_answer(in_flight, 0.001, refused=True, retry_after=60.0)
    retry.join(2)
    given_up = outcomes.get("retry")
    stop.set("interrupted")  # the one ahead would wait the minute out
    ahead.join(5)

    assert isinstance(given_up, NoTurn), "the retry still waits for its turn"
    assert given_up.asked and not given_up.stopped
    assert given_up.wait == approx(60.0, abs=1.0)


# -- what the run is told -----------------------------------------------------------


def test_the_progress_line_tells_of_the_limit_a_refusal_showed(s, capsys):
    s.refused()  # the server refused: the rate is cut to 8.5 a second
    progress = Progress("Reading invites", 3, interactive=False, ticker=False, pace=s.pacer)

    progress.advance(3)
    progress.finish()

    said = [line for line in capsys.readouterr().err.splitlines() if "limits" in line]
    assert said == ["the server limits requests: slowed to about 8 per second"]


def test_a_request_that_failed_otherwise_between_two_refusals_is_no_longer_singled_out(s):
    # Its strikes count refusals in a row while others were let through. A 500 between
    # two ends the row: refused again after it, the request's refusal is news of the
    # rate for every request (a cut), not its own (a backoff alone, the others going on).
    refusal = limited(s).answer(s.turn(), 0.001, refused=True)  # a 429: news, a cut
    s.answered(3)  # others let through
    refusal = s.answer(s.turn(), 0.02, again=refusal)  # a 500
    cuts = s.answered(3).control.cuts
    refusal = s.answer(s.turn(), 0.001, refused=True, again=refusal)  # a 429

    assert refusal is not None and not refusal.own
    assert s.control.cuts == cuts + 1


@pytest.mark.parametrize(
    ("second_429_at", "waited"),
    [
        # As the first pause ends: a pause right after another; the one that ended counts.
        (lambda pause: pause[1], 4.0),
        # Halfway through it, asking 2 s more: the pause runs on from its start.
        (lambda pause: pause[0] + 1.0, 3.0),
    ],
    ids=["back-to-back", "lengthened"],
)
def test_a_wait_through_the_servers_pauses_is_all_the_servers(second_429_at, waited):
    # A second `429, Retry-After: 2` comes while a request is still in line: all it waited
    # are pauses the server asked for, charged to its retry budget (docs/troubleshooting.md),
    # none of it queueing that would extend the budget.
    told: list[float] = []
    refused: list[Turn] = []  # the request whose 429 comes while the other waits

    def sleep(seconds: float) -> None:
        scene.time.sleep(seconds)
        if refused and not told and scene.time.now >= second_429_at(scene.control.pause):
            told.append(scene.time.now)
            scene.answer(refused[0], 0.001, refused=True, retry_after=2.0)

    scene = Scene(sleep)
    first, second = scene.turn(), scene.turn()
    scene.answer(first, 0.001, refused=True, retry_after=2.0)
    paused_at = scene.time.now
    refused.append(second)

    turn = scene.turn()

    assert told, "the second refusal came while the request waited"
    assert turn.at == approx(told[0] + 2.0)  # as the second pause ends
    assert turn.at - paused_at >= waited
    assert turn.queued == 0.0


def test_a_latency_floor_forgotten_lets_the_number_in_flight_follow_a_slower_server(s):
    # The server slowed down: 2 ms answers still the floor.
    before = s.answered(64, latency=0.002).answered(8, latency=0.1).pacer.servable()
    s.pacer.forget_latency_floor()
    assert s.pacer.servable() > 5 * before
