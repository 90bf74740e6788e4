"""What `reconcile apply` reports and records when writes fail, stop the run or are interrupted.

In-process runs against a mocked platform: each test makes the server answer
one write badly and checks what a user reading the output or the audit log
would see.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

import pytest
import requests
from support.fake_platform import (
    IDS,
    FakePlatform,
    answer,
    apply_all,
    envelope,
    outcome_for,
    read_records,
    reconcile,
    serve,
    write_invites,
)


def summary_lines(stdout: str) -> list[str]:
    return [line for line in stdout.splitlines() if line.startswith(("Stopped:", "Apply:"))]


# -- failed writes in the audit log ---------------------------------------------------


@pytest.fixture
def resends_go_wrong(platform: FakePlatform) -> FakePlatform:
    """The first re-send goes out; the server refuses the second; the third gets no answer."""
    platform.on_resend("inv_2b6n3", **answer(404, "invite inv_2b6n3 not found", "req-404"))
    platform.on_resend("inv_8d2s4", exc=requests.exceptions.ConnectionError("Connection aborted"))
    return platform


def test_failed_and_unknown_resends_are_counted_apart_and_in_the_audit_log(
    resends_go_wrong: FakePlatform, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert apply_all(tmp_path, resend=True) == 1
    out = capsys.readouterr().out
    # Sending the refused one again is safe; the unanswered one may already be in an inbox.
    assert summary_lines(out) == [
        "Apply: 3 updated, 0 failed, 1 invitation not re-sent, "
        "1 invitation with unknown re-send outcome."
    ]
    assert "not re-sent  inv_2b6n3: HTTP 404" in out
    assert "re-send unknown  inv_8d2s4" in out
    records = read_records(tmp_path / "audit.jsonl")
    assert outcome_for(records, "inv_6p3j9", "resend")["outcome"] == "ok"
    refused = outcome_for(records, "inv_2b6n3", "resend")
    assert (refused["outcome"], refused["http_status"], refused["request_id"]) == (
        "failed",
        404,
        "req-404",
    )
    unanswered = outcome_for(records, "inv_8d2s4", "resend")
    assert (unanswered["outcome"], unanswered["http_status"]) == ("unknown", None)
    assert "without an answer" in unanswered["message"]


# -- runs that stop starting writes ---------------------------------------------------


def test_a_run_fatal_error_stops_new_writes_and_says_why(
    platform: FakePlatform, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    platform.on_update("inv_6p3j9", **answer(403, "token lacks scope kyb:invites:write", "r-403"))
    assert apply_all(tmp_path) == 1
    out, err = capsys.readouterr()
    stopped, totals = summary_lines(out)
    assert stopped == "Stopped: HTTP 403 (the error at the end); no new writes were started."
    assert totals == "Apply: 0 updated, 1 failed, 2 not started."
    assert platform.writes() == [("PATCH", "inv_6p3j9")]
    # The server's message once in the run (issue 39, row 7): on the last line, the
    # invite's own line pointing at it; the count kept in the summary.
    assert (out + err).count("token lacks scope") == 1
    assert "failed       inv_6p3j9  (" in out and "): HTTP 403 (the error at the end)" in out
    last = err.splitlines()[-1]
    assert last.startswith("error: inv_6p3j9: HTTP 403: token lacks scope kyb:invites:write")
    assert last.endswith(
        "(requestId r-403); check the credentials and their scopes. It stopped the run: "
        "no new writes were started"
    )


def interrupt_during(platform: FakePlatform, invite_id: str) -> None:
    """Ctrl-C while the update of ``invite_id`` is in flight; the update then succeeds."""

    def ctrl_c(request: Any, context: Any) -> Any:
        os.kill(os.getpid(), signal.SIGINT)
        return envelope({"id": invite_id}, request_id=f"patch-{invite_id}")

    platform.on_update(invite_id, json=ctrl_c)


STOPPED = ["Stopped: interrupted; no new writes were started."]


@pytest.mark.parametrize(
    ("during", "resend", "summary", "writes"),
    [
        # The write in flight finished, with the re-send that belongs to it; nothing else began.
        ("inv_6p3j9", True, [*STOPPED, "Apply: 1 updated, 0 failed, 2 not started."], 2),
        # Every write had started and succeeded: no claim that something was held back.
        ("inv_8d2s4", False, ["Apply: 3 updated, 0 failed."], 3),
    ],
    ids=["first write", "last write"],
)
def test_an_interrupt_stops_new_writes_and_says_so(
    platform: FakePlatform,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    during: str,
    resend: bool,
    summary: list[str],
    writes: int,
) -> None:
    interrupt_during(platform, during)
    assert apply_all(tmp_path, resend=resend) == (1 if resend else 0)
    captured = capsys.readouterr()
    assert "Interrupted" in captured.err
    assert summary_lines(captured.out) == summary
    assert ("PATCH", during) in platform.writes() and len(platform.writes()) == writes
    assert (("POST", during) in platform.writes()) is resend


def test_a_run_that_finishes_says_nothing_about_stopping(
    platform: FakePlatform, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert apply_all(tmp_path, resend=True) == 0
    out = capsys.readouterr().out
    assert summary_lines(out) == ["Apply: 3 updated, 0 failed."]
    resent = [
        line.split()[1].rstrip(":") for line in out.splitlines() if line.startswith("re-sent ")
    ]
    assert resent == IDS


# From test_apply_outcomes.py:
# What stdout says about a write whose outcome nobody knows.
#
# In-process runs against a mocked platform: the audit log already says
# ``unknown`` for an update that lost its connection after sending; the terminal
# must not call it "failed", which reads as "safe to do again".


def test_a_failed_update_and_one_left_without_an_answer_are_shown_and_logged_apart(
    platform: FakePlatform, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    platform.on_update("inv_2b6n3", **answer(409, "invite inv_2b6n3 is not pending", "req-409"))
    platform.on_update("inv_8d2s4", exc=requests.exceptions.ConnectionError("Connection reset"))
    assert apply_all(tmp_path) == 1
    out = capsys.readouterr().out
    assert out.splitlines()[-1] == "Apply: 1 updated, 1 failed, 1 update with unknown outcome."
    assert "failed       inv_2b6n3" in out
    assert "update unknown  inv_8d2s4" in out and "the server may have applied it" in out
    assert "failed       inv_8d2s4" not in out
    records = read_records(tmp_path / "audit.jsonl")
    assert [outcome_for(records, i, "update")["outcome"] for i in IDS] == [
        "ok",
        "failed",
        "unknown",
    ]
    failed = outcome_for(records, "inv_2b6n3", "update")  # with the server's answer
    assert (failed["http_status"], failed["request_id"]) == (409, "req-409")
    assert failed["message"] == "invite inv_2b6n3 is not pending"


# From test_apply_hostile_values.py: Apply, not only plan, survives what a hostile server puts in
# an invite's values.
def test_apply_writes_despite_a_lone_surrogate_in_the_servers_name(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with serve(monkeypatch, tmp_path) as fake:
        # requests-mock writes JSON with ASCII escapes: the surrogate arrives as "\ud800".
        fake.held["inv_2b6n3"] = {
            "name": "Nunez \ud800 S.A.",
            "email": "cumplimiento@nunez.example",
        }
        code = reconcile("apply", "--auto-approve", str(write_invites(tmp_path / "invites")))
        out, err = capsys.readouterr()
        assert code == 0, err
        assert "Traceback" not in err
        assert "Nunez \\ud800 S.A." in out  # shown escaped, and the plan's digest was made
        assert ("PATCH", "inv_2b6n3") in fake.writes()
