"""The Applier's report: a write that never left is "not started", not "failed"."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from support.values import held, typed

from reconciler.api.client import Receipt
from reconciler.api.exceptions import NotSent
from reconciler.apply.applier import Applier, WriteOutcome
from reconciler.apply.audit import Attempt, AuditLog, AuditLogError, NoAuditLog
from reconciler.model.invite import SourceLocation
from reconciler.plan.changes import InviteChange
from reconciler.plan.model import Plan
from reconciler.safetext import register_secret
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
        InviteChange(
            f"inv_{n}", SourceLocation("a.yaml", n), None, {"name": "a"}, {"name": "b"}, False
        )
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


class _RecordingClient:
    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []

    def update_invite(self, invite_id: str, patch: dict[str, Any]) -> Receipt:
        self.bodies.append(patch)
        return Receipt(200, "req-1")


def test_the_audit_log_records_what_was_sent_redacting_only_what_the_server_holds(
    tmp_path: Path,
) -> None:
    secret = "applier-echoed-secret-42"
    register_secret(secret)
    before = {
        "name": f"Old {secret}",
        "primaryContact": {"name": "Jane", "email": "j@a.example", "note": f"tok {secret}"},
    }
    # The contact's `note` is unmanaged: the PATCH keeps the server's value of it.
    patch = {
        "name": "Flag Bearer Ltd.",
        "primaryContact": {**before["primaryContact"], "name": "Torch Bearer 2 Team"},  # type: ignore[dict-item]
    }
    change = InviteChange(
        "inv_1", SourceLocation("a.yaml", 1), None, held(before), typed(patch), False
    )
    client = _RecordingClient()
    log = AuditLog(str(tmp_path / "audit.jsonl"), "ci")
    Applier(client, parallelism=1, stop=Stop(), audit=log).apply(  # type: ignore[arg-type]
        Plan(base_url="https://api.example", changes=[change])
    )
    log.close()
    assert client.bodies == [patch]  # sent byte for byte, the server's sub-field included
    text = (tmp_path / "audit.jsonl").read_text(encoding="utf-8")
    assert secret not in text
    fields = json.loads(text.splitlines()[0])["fields"]
    assert fields["name"] == {"before": "Old [redacted]", "after": "Flag Bearer Ltd."}
    contact = fields["primaryContact"]["after"]
    assert contact == {
        "name": "Torch Bearer 2 Team",
        "email": "j@a.example",
        "note": "tok [redacted]",
    }


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
        InviteChange(
            f"inv_{n}", SourceLocation("a.yaml", n), None, {"email": "o"}, {"email": "n"}, True
        )
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
