"""The Applier's report: a write that never left is "not started", not "failed"."""

from __future__ import annotations

from typing import Any

from reconciler.api.client import Receipt
from reconciler.api.exceptions import NotSent
from reconciler.apply.applier import Applier, WriteOutcome
from reconciler.apply.audit import Attempt, AuditLogError, NoAuditLog
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


class _Client:
    """Every write succeeds; the e-mails sent are counted."""

    def __init__(self) -> None:
        self.updated: list[str] = []
        self.resent: list[str] = []

    def update_invite(self, invite_id: str, patch: dict[str, Any]) -> Receipt:
        self.updated.append(invite_id)
        return Receipt(200, f"req-{invite_id}")

    def resend_invite(self, invite_id: str) -> Receipt:
        self.resent.append(invite_id)
        return Receipt(200, f"req-r-{invite_id}")


class _LogFillingUp(NoAuditLog):
    """An audit log whose disk fills after the first attempt line is written."""

    def __init__(self) -> None:
        self.attempts: list[tuple[str, str]] = []

    def attempt(self, invite_id: str, operation: str, fields: Any = None) -> Attempt:
        if self.attempts:
            raise AuditLogError("audit.jsonl: cannot write the audit log (No space left)")
        self.attempts.append((operation, invite_id))
        return Attempt("a1", invite_id, operation)

    def outcome(self, attempt: Attempt, outcome: str, *rest: Any) -> None:
        raise AuditLogError("audit.jsonl: cannot write the audit log (No space left)")


def test_a_log_that_fills_after_the_request_left_still_reports_the_write_and_owes_its_e_mail():
    changes = [
        InviteChange(f"inv_{n}", f"a.yaml:{n}", None, {"email": "o"}, {"email": "n"}, True)
        for n in (1, 2)
    ]
    client, stop = _Client(), Stop()
    report = Applier(client, parallelism=1, stop=stop, audit=_LogFillingUp()).apply(  # type: ignore[arg-type]
        Plan(base_url="https://api.example", changes=changes)
    )
    assert [r.outcome for r in report.results] == [
        WriteOutcome.NOT_RESENT,  # updated (the server has it), the e-mail not sent
        WriteOutcome.NOT_STARTED,
    ]
    assert client.updated == ["inv_1"] and client.resent == []
    assert [r.change.id for r in report.resends_not_made] == ["inv_1"]
    assert report.audit_error is not None and not report.ok
    assert stop.reason == "the audit log could not be written"
    assert report.stopped_by == "the audit log could not be written; no new writes were started"
