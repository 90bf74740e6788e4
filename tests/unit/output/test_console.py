"""What a person reads besides the plan: progress lines, colour; the advice at the end of
each failed invite's `error:` line: only about what exists."""

from __future__ import annotations

import io
import logging
import os
import sys
import threading
from pathlib import Path

import pytest
from support.helpers import EXAMPLES, clean_env

from reconciler.cli import main
from reconciler.model.invite import SourceLocation
from reconciler.output.console import Progress, duration, use_color, what_to_do


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def logged(total: int, clock: FakeClock | None = None, label: str = "Reading invites", **options):
    """Progress as a CI log shows it, on ``clock``, its lines printed only by advance()."""
    return Progress(
        label, total, clock=clock or FakeClock(), interactive=False, ticker=False, **options
    )


def test_progress_off_a_terminal_prints_a_line_about_every_ten_seconds(capsys) -> None:
    clock = FakeClock()
    progress = logged(20_000, clock)
    for _ in range(1_200):
        clock.now += 14 / 1_200
        progress.advance()
    lines = capsys.readouterr().err.splitlines()
    # Exactly one line for 14 s of work, at the first advance past 10 s.
    assert len(lines) == 1
    assert lines[0].startswith("Reading invites: ") and "of 20,000" in lines[0]
    assert "elapsed" in lines[0] and "left" in lines[0]


def test_progress_line_wording_matches_the_issue_example(capsys) -> None:
    clock = FakeClock()
    progress = logged(20_000, clock)
    progress.advance(1_199)
    clock.now += 14
    progress.advance()
    assert capsys.readouterr().err == (
        "Reading invites: 1,200 of 20,000 (6%), 14 s elapsed, ~3 min left\n"
    )


class FakePace:
    """What progress reads of the pacer: the allowed rate once the server refused."""

    def __init__(self, rate: float | None, settled: bool = True) -> None:
        self.rate = rate
        self.settled = settled
        self.said_limited = False

    def settled_rate(self, *, early: bool = False) -> float | None:
        return self.rate if self.settled or early else None


def test_under_a_rate_limit_the_time_left_is_the_work_left_over_the_rate(capsys) -> None:
    # Issue 23: a slow start and refusals early on made the average say "~2 min left"
    # two seconds before the end; the rate the server allows says how long is left.
    clock = FakeClock()
    pace = FakePace(10.0)
    progress = logged(300, clock, pace=pace)
    progress.advance(10)
    clock.now += 12  # a crawl at first
    progress.advance(270)  # 20 left at 10 a second

    assert capsys.readouterr().err.splitlines() == [
        "the server limits requests: slowed to about 10 per second",
        "Reading invites: 280 of 300 (93%), 12 s elapsed, ~2 s left",  # not "~13 s"
    ]


def test_the_limit_is_said_once_per_run_whatever_the_progress_lines(capsys) -> None:
    clock = FakeClock()
    pace = FakePace(4.6)
    for label in ("Reading invites", "Applying"):  # two progress displays, one run
        progress = logged(10, clock, label, pace=pace)
        progress.advance(10)
        progress.finish()

    said = [line for line in capsys.readouterr().err.splitlines() if "limits" in line]
    assert said == ["the server limits requests: slowed to about 5 per second"]


@pytest.mark.parametrize(
    ("rate", "said"), [(2.5, ["2.5"]), (None, [])], ids=["limited", "unlimited"]
)
def test_a_short_run_says_the_rate_it_had_at_the_end_if_limited(capsys, rate, said) -> None:
    progress = logged(3, pace=FakePace(rate, False))
    progress.advance(3)
    progress.finish()
    limits = [line for line in capsys.readouterr().err.splitlines() if "limits" in line]
    assert limits == [f"the server limits requests: slowed to about {n} per second" for n in said]


def test_a_run_that_stops_early_never_claims_the_work_it_did_not_do(capsys) -> None:
    clock = FakeClock()
    progress = logged(6, clock)
    progress.advance(failed=True)  # the first read failed: a run-fatal error follows
    clock.now += 2
    progress.finish()
    progress.finish()  # a second call (a finally after an explicit finish) adds nothing
    assert capsys.readouterr().err == (
        "Reading invites: stopped after 0 of 6 done, 1 failed, in 2 s.\n"
    )


# apply's names what did not succeed otherwise: a conflict, a diverged value, a re-send
# whose outcome is unknown.
@pytest.mark.parametrize("word", ["failed", "to look at"])
def test_a_finished_run_says_what_was_done(capsys, word: str) -> None:
    clock = FakeClock()
    with logged(3, clock, "Applying", failed_word=word) as p:
        p.advance(2)
        p.advance(failed=True)
        clock.now += 75
    assert capsys.readouterr().err == f"Applying: 2 of 3 done, 1 {word}, in 1 min.\n"


def test_a_stalled_run_still_prints_a_line_every_interval(capsys) -> None:
    clock = FakeClock()
    progress = Progress("Reading invites", 400, clock=clock, interactive=False, interval=10)
    progress.advance(20)
    clock.now += 21  # one slow request: nothing finishes for 21 s
    seen = ""
    for _ in range(3000):  # the ticker looks every second; wait for it, up to ~30 s
        seen += capsys.readouterr().err
        if seen:
            break
        threading.Event().wait(0.01)
    progress.finish()
    seen += capsys.readouterr().err
    lines = seen.splitlines()
    assert lines[0] == "Reading invites: 20 of 400 (5%), 21 s elapsed, ~6 min left"
    assert lines[-1] == "Reading invites: stopped after 20 of 400 done, in 21 s."
    assert len(lines) == 2  # the ticker is gone once finished


def test_nothing_to_do_prints_no_progress(capsys: pytest.CaptureFixture[str]) -> None:
    Progress("Reading invites", 0, interactive=False).finish()
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(0.2, "0 s"), (14, "14 s"), (59.4, "59 s"), (170, "2 min"), (3900, "1 h 5 min")],
)
def test_durations_read_like_a_person_would_say_them(seconds: float, text: str) -> None:
    assert duration(seconds) == text


# --- colour --------------------------------------------------------------------------------


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize(
    ("choice", "env", "stream", "expected"),
    [
        ("auto", {}, Tty(), True),
        ("auto", {}, io.StringIO(), False),
        ("auto", {"NO_COLOR": "1"}, Tty(), False),
        ("auto", {"NO_COLOR": ""}, Tty(), True),  # only a non-empty NO_COLOR counts
        ("auto", {"TERM": "dumb"}, Tty(), False),
        ("always", {"NO_COLOR": "1", "TERM": "dumb"}, io.StringIO(), True),
        ("never", {}, Tty(), False),
    ],
)
def test_colour_follows_the_option_no_color_term_and_the_terminal(
    choice: str, env: dict[str, str], stream: io.StringIO, expected: bool
) -> None:
    assert use_color(choice, env, stream) is expected


def test_a_plan_with_stderr_closed_still_prints_the_plan(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # `reconcile plan ... 2>&-`: Python starts with sys.stderr None.
    for name in list(os.environ):
        monkeypatch.delenv(name)
    for name, value in clean_env().items():
        monkeypatch.setenv(name, value)
    monkeypatch.chdir(tmp_path)
    logger = logging.getLogger("reconciler")
    monkeypatch.setattr(logger, "handlers", list(logger.handlers))
    monkeypatch.setattr(sys, "stderr", None)
    code = main(["plan", "-v", "--sandbox", str(EXAMPLES)])
    shown = capsys.readouterr().out
    assert code in (0, 2)
    assert "Plan: " in shown


def test_progress_with_stderr_closed_shows_nothing_and_counts(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(sys, "stderr", None)
    with Progress("Reading invites", 3, interval=0) as progress:
        progress.advance(3)
    assert progress.done == 3
    assert capsys.readouterr().out == ""


@pytest.mark.parametrize(
    ("status", "request_id", "advice"),
    [
        (503, "req-1", "try again later; if it persists, contact support with the requestId"),
        (
            502,
            None,  # an nginx page: there is no requestId to quote
            "try again later; if it persists, check the network path to the API (proxy, gateway)",
        ),
        (
            413,
            None,
            "a proxy or gateway in front of the API limits request bodies; ask its operators",
        ),
    ],
)
def test_the_advice_names_a_request_id_only_when_there_is_one(
    status: int, request_id: str | None, advice: str
) -> None:
    assert what_to_do(status, SourceLocation("invites/a.yaml", 3), request_id) == advice
