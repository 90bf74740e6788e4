"""A gateway's block (issue 55): its own 403, in fake time. Nothing starts for a quiet
period from the last refusal (those in flight when it began start it again, as the
gateway does), then one request alone probes; refused, the quiet doubles; let through,
the run resumes at a rate below what the gateway let through in the second before it
blocked, and never probes above it. ``max_rate`` caps the rate from the start. Whole
runs behind mod_evasive's arithmetic (``BurstBlocker``) converge within 3x of the
floor. The rate's other signals: test_rate.py; the turns: test_pacing.py."""

from __future__ import annotations

import itertools

import pytest
from support.limits import Answer, BurstBlocker, FakeTime, Unlimited, answered, run_behind

from reconciler.api.capacity import (
    BLOCK_CUT,
    MAX_QUIET,
    QUIET,
    REGROW_AFTER,
    NoTurn,
    RequestPacer,
    Turn,
)
from reconciler.api.concurrency import Stop


@pytest.fixture
def fake_time() -> FakeTime:
    return FakeTime()


def block(pacer: RequestPacer, turn: Turn) -> None:
    pacer.on_answer(turn, 0.001, refused=True, blocked=True)


def paced(fake_time: FakeTime, blocked: int = 0, **options: float) -> RequestPacer:
    """A pacer in fake time, 20 requests answered and then ``blocked`` of them blocked."""
    pacer = RequestPacer(clock=fake_time.clock, sleep=fake_time.sleep, **options)
    if blocked:
        answered(pacer, 20)
    for _ in range(blocked):
        block(pacer, pacer.wait_turn())
    return pacer


def test_a_block_holds_every_start_for_the_quiet_period_then_one_probes_alone(fake_time):
    pacer = paced(fake_time, blocked=1)
    blocked_at = fake_time.now

    probe = pacer.wait_turn()

    assert probe.at == pytest.approx(blocked_at + QUIET)
    # The probe is out: no other request starts, not even past its budget's reach.
    with pytest.raises(NoTurn):
        pacer.wait_turn(stop=_stopped_after(fake_time, 1.0))
    assert fake_time.now >= probe.at + 1.0 - 1e-9
    pacer.on_answer(probe, 0.001, refused=False)
    after = pacer.wait_turn()
    assert after.at - probe.at < QUIET


def test_a_refusal_in_flight_when_the_block_began_starts_the_quiet_again(fake_time) -> None:
    pacer = paced(fake_time)
    answered(pacer, 20)
    first, second = pacer.wait_turn(), pacer.wait_turn()
    block(pacer, first)
    fake_time.now += 0.5
    block(pacer, second)  # it reached the gateway inside its block: the block restarted
    refused_last = fake_time.now

    assert pacer.wait_turn().at == pytest.approx(refused_last + QUIET)


def test_a_probe_refused_doubles_the_quiet_up_to_its_most(fake_time: FakeTime) -> None:
    pacer = paced(fake_time, blocked=1)
    quiets = []
    for _ in range(6):
        refused_at = fake_time.now
        probe = pacer.wait_turn()
        quiets.append(round(probe.at - refused_at, 6))
        block(pacer, probe)

    assert quiets == [QUIET, 2 * QUIET, 4 * QUIET, 8 * QUIET, MAX_QUIET, MAX_QUIET]


def test_after_a_block_the_rate_is_below_what_was_let_through_and_never_probes_above(fake_time):
    # 49 let through evenly in the whole second the refused request left in (100.00 to
    # 100.96; refused at 100.98): the run resumes at 80% of that, and hundreds of answers
    # later is still there (a probe past a blocker's limit costs a whole block).
    pacer = paced(fake_time, start_rate=50.0)
    pacer._control.ceiling = pacer._control._level = 50.0  # paced at 50/s already
    pacer._control._reached = 0
    answered(pacer, 49)
    block(pacer, pacer.wait_turn())
    probe = pacer.wait_turn()
    pacer.on_answer(probe, 0.001, refused=False)

    answered(pacer, 500)

    assert pacer.rate == pytest.approx(BLOCK_CUT * 49.0)
    assert pacer.blocked and pacer._control.blocks == 1


def test_a_burst_at_the_turn_of_a_second_is_measured_by_its_own_second(fake_time) -> None:
    # mod_evasive counts whole seconds: 20 let through just before 101.0 and 51 just
    # after it, the 52nd refused. The second before held 71; the blocker allows 51.
    pacer = paced(fake_time, start_rate=1e4)
    for fake_time.now, let_through in ((100.98, 20), (101.0, 51)):
        for _ in range(let_through):
            pacer.on_answer(pacer.wait_turn(), 0.001, refused=False)

    block(pacer, pacer.wait_turn())

    assert pacer._control.ceiling == pytest.approx(51.0)


def test_max_rate_caps_the_rate_from_the_first_request(fake_time: FakeTime) -> None:
    turns = answered(pacer := paced(fake_time, max_rate=20.0), 200)

    gaps = [b.at - a.at for a, b in itertools.pairwise(turns[100:])]
    assert min(gaps) >= 1 / 20.0 - 1e-9
    assert pacer._control.rate <= 20.0


@pytest.mark.parametrize(
    ("count", "period"), [(50, 5), (20, 10)], ids=["site-50-block-5", "site-20-block-10"]
)
def test_a_run_behind_mod_evasive_converges_within_3x_of_its_floor_a_long_one_2x(count, period):
    run = run_behind(BurstBlocker(count, period), 200, latency=0.003)
    assert run.seconds <= 3 * 200 / count, (run.seconds, run.refused, run.pacer.describe())
    assert run.pacer._control.blocks <= 2
    assert run.refused <= 10
    # Growing again past a real blocker's limit costs a block; each block doubles the
    # wait before the next growth, so they grow ever rarer.
    run = run_behind(BurstBlocker(count, period), 2000, latency=0.003)
    assert run.seconds <= 2 * 2000 / count, (run.seconds, run.pacer.describe())
    assert run.pacer._control.blocks <= 5


def test_a_run_behind_mod_evasive_with_max_rate_at_its_limit_is_never_refused() -> None:
    run = run_behind(BurstBlocker(50, 5), 200, latency=0.003, max_rate=50.0)

    assert run.refused == 0
    assert run.seconds <= 1.2 * 200 / 50


class _OneBlock(Unlimited):
    """One gateway 403, on the third request (a WAF's false positive in slow start, when
    the second before held two requests); every other request let through."""

    def __init__(self) -> None:
        self.arrived = 0

    def arrive(self, now: float, request: int = 0) -> Answer:
        self.arrived += 1
        return (403, None, 0.0) if self.arrived == 3 else 0.0


def test_one_block_early_in_a_run_is_no_ceiling_for_the_rest_of_it() -> None:
    # Attack t8: the rate that second held (1.6/s) paced all 600 requests: 380 s. After
    # REGROW_AFTER with nothing refused the rate grows again.
    run = run_behind(_OneBlock(), 600, latency=0.003)

    assert run.refused == 1
    assert run.seconds <= QUIET + REGROW_AFTER + 15, run.pacer.describe()
    assert run.pacer._control.rate > 100


def _stopped_after(fake_time: FakeTime, seconds: float) -> Stop:
    """A stop that is set once the fake clock has moved ``seconds``."""
    until = fake_time.now + seconds

    class Later(Stop):
        def is_set(self) -> bool:
            return fake_time.now >= until

    return Later()
