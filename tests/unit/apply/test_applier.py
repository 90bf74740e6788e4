"""The Applier's report: a write that never left is "not started", not "failed"."""

from __future__ import annotations

import threading
from typing import Any

from reconciler.api.client import Receipt
from reconciler.api.exceptions import NotSent
from reconciler.apply.applier import Applier, WriteState
from reconciler.plan.changes import InviteChange
from reconciler.plan.model import Plan


class _StoppingClient:
    """The run stopped while these writes waited for their turn: none is sent."""

    def __init__(self) -> None:
        self.sent: list[str] = []

    def update_invite(self, invite_id: str, patch: dict[str, Any]) -> Receipt:
        if invite_id == "inv_1":
            self.sent.append(invite_id)
            return Receipt(200, "req-1")
        raise NotSent("not sent: the run is stopping")


def test_writes_the_stopping_run_never_sent_are_reported_not_started() -> None:
    changes = [
        InviteChange(f"inv_{n}", f"a.yaml:{n}", None, {"name": "a"}, {"name": "b"}, False)
        for n in (1, 2, 3)
    ]
    client = _StoppingClient()
    report = Applier(client, parallelism=1, stop=threading.Event()).apply(  # type: ignore[arg-type]
        Plan(base_url="https://api.example", changes=changes)
    )
    states = [r.state for r in report.results]
    assert states == [WriteState.UPDATED, WriteState.NOT_STARTED, WriteState.NOT_STARTED]
    assert client.sent == ["inv_1"]
    assert report.count(WriteState.FAILED) == 0
