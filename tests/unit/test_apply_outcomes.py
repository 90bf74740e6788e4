"""What stdout says about a write whose outcome nobody knows.

In-process runs against a mocked platform: the audit log already says
``unknown`` for an update that lost its connection after sending; the terminal
must not call it "failed", which reads as "safe to do again".
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
from fake_platform import (
    FakePlatform,
    answer,
    outcome_for,
    read_records,
    reconcile,
    serve,
    write_invites,
)


@pytest.fixture
def platform(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[FakePlatform]:
    with serve(monkeypatch, tmp_path) as fake:
        yield fake


def test_an_update_left_without_an_answer_is_shown_unknown_not_failed(
    platform: FakePlatform, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    platform.on_update("inv_2b6n3", **answer(409, "invite inv_2b6n3 is not pending", "req-409"))
    platform.on_update("inv_8d2s4", exc=requests.exceptions.ConnectionError("Connection reset"))
    invites = write_invites(tmp_path / "invites")

    code = reconcile("apply", "--auto-approve", "--audit-log", "audit.jsonl", str(invites))

    assert code == 1
    out = capsys.readouterr().out
    assert out.splitlines()[-1] == "Apply: 1 updated, 1 failed, 1 update with unknown outcome."
    assert "failed       inv_2b6n3" in out
    assert "update unknown  inv_8d2s4" in out and "the server may have applied it" in out
    assert "failed       inv_8d2s4" not in out
    records = read_records(tmp_path / "audit.jsonl")
    assert outcome_for(records, "inv_8d2s4", "update")["outcome"] == "unknown"
