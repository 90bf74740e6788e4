"""The Applier's report: a write that never left is "not started", not "failed"."""

from __future__ import annotations

from typing import Any

from reconciler.api.client import Receipt
from reconciler.api.exceptions import NotSent
from reconciler.apply.applier import Applier, WriteOutcome
from reconciler.plan.changes import InviteChange
from reconciler.plan.model import Plan
from reconciler.stop import Stop


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
    report = Applier(client, parallelism=1, stop=Stop()).apply(  # type: ignore[arg-type]
        Plan(base_url="https://api.example", changes=changes)
    )
    states = [r.outcome for r in report.results]
    assert states == [WriteOutcome.UPDATED, WriteOutcome.NOT_STARTED, WriteOutcome.NOT_STARTED]
    assert client.sent == ["inv_1"]
    assert report.count(WriteOutcome.FAILED) == 0
