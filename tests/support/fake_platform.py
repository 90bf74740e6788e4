"""The platform API mocked with requests-mock, and `reconcile apply` run in-process against it.

Shared by the apply and audit-log tests: a few hand-written invites, each
write answered as the test says, and the audit log read back as records.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import requests_mock

from reconciler.cli import run

BASE = "https://api.example.test"
CLIENT_ID = "reconciler-ci"
SECRET = "cs_test_Qx7vAuditSECRETvalue"
TOKEN = "eyJhbGciOiJSUzI1NiJ9.auditTOKENpayload.sig1"
INVITES = BASE + "/public-api/v1/kyb/invites/"

# What the server holds; the invite files below change each email (and one name).
SERVER = {
    "inv_6p3j9": {"name": "株式会社サクラ商事", "email": "kyb@sakura-shoji.example"},
    "inv_2b6n3": {"name": "Nuñez Exportaciones S.A.", "email": "cumplimiento@nunez.example"},
    "inv_8d2s4": {"name": "서울 핀테크 주식회사", "email": "compliance@seoul-fintech.example"},
}
IDS = list(SERVER)

INVITE_FILE = """\
# Three APAC/LATAM invites moving to the new compliance mailboxes.
invites:
  - id: inv_6p3j9
    name: 株式会社サクラ商事
    email: compliance@sakura-shoji.example
    resendOnChange: {resend}

  - id: inv_2b6n3
    name: Núñez Exportaciones S.A.   # accents fixed
    email: kyb@nunez.example
    resendOnChange: {resend}

  - id: inv_8d2s4
    name: 서울 핀테크 주식회사
    email: kyb@seoul-fintech.example
    resendOnChange: {resend}
"""


def envelope(data: Any, status: int = 200, message: str = "OK", request_id: str = "r-1") -> Any:
    return {
        "status": status,
        "success": 200 <= status < 300,
        "message": message,
        "data": data,
        "metadata": {"requestId": request_id, "timestamp": "2026-11-22T10:00:00.000Z"},
    }


def answer(status: int, message: str, request_id: str) -> dict[str, Any]:
    """requests-mock keyword arguments for one answer in the API's envelope."""
    return {"status_code": status, "json": envelope(None, status, message, request_id)}


class FakePlatform:
    """Every invite readable; every write answered 200 unless a test says otherwise."""

    def __init__(self, mock: requests_mock.Mocker) -> None:
        self.mock = mock
        # What the platform holds before any write (a test may change it).
        self.held: dict[str, dict[str, Any]] = {i: dict(fields) for i, fields in SERVER.items()}
        token = {"access_token": TOKEN, "token_type": "Bearer", "expires_in": 3600}
        mock.post(BASE + "/oauth/token", status_code=201, json=envelope(token, 201))
        for invite_id in SERVER:
            mock.get(INVITES + invite_id, json=self._current(invite_id))
            self.on_update(invite_id, **answer(200, "invite updated", f"patch-{invite_id}"))
            self.on_resend(invite_id, **answer(200, "invitation re-sent", f"resend-{invite_id}"))

    def _current(self, invite_id: str) -> Any:
        """A GET's answer: the invite as held, with every PATCH body sent to it applied
        (the platform stores what it is sent; a GET after a write finds it)."""

        def respond(request: Any, context: Any) -> Any:
            fields = dict(self.held[invite_id])
            for sent in self.mock.request_history:
                if sent.method == "PATCH" and sent.url == INVITES + invite_id:
                    fields.update(sent.json())
            invite = {"id": invite_id, "status": "pending", **fields}
            return envelope(invite, request_id=f"get-{invite_id}")

        return respond

    def on_update(self, invite_id: str, **response: Any) -> None:
        self.mock.patch(INVITES + invite_id, **response)

    def on_resend(self, invite_id: str, **response: Any) -> None:
        self.mock.post(INVITES + invite_id + "/resend", **response)

    def writes(self) -> list[tuple[str, str]]:
        """(method, invite id) of each write that reached the platform, in order."""
        found = []
        for request in self.mock.request_history:
            if request.method in ("PATCH", "POST") and request.url.startswith(INVITES):
                found.append((request.method, request.url[len(INVITES) :].split("/")[0]))
        return found


@contextmanager
def serve(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[FakePlatform]:
    """The fake platform, with the environment and working directory of a run against it."""
    monkeypatch.chdir(tmp_path)
    for name in ("RECONCILER_AUDIT_LOG", "RECONCILER_MAX_CHANGES", "NO_COLOR"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("RECONCILER_BASE_URL", BASE)
    monkeypatch.setenv("RECONCILER_CLIENT_ID", CLIENT_ID)
    monkeypatch.setenv("RECONCILER_CLIENT_SECRET", SECRET)
    monkeypatch.setenv("RECONCILER_PARALLELISM", "1")  # the writes go in file order
    # One try per request: a dropped connection is final, and no test sleeps in a backoff.
    (tmp_path / "reconciler.yaml").write_text("max_attempts: 1\n", encoding="utf-8")
    with requests_mock.Mocker() as mock:
        yield FakePlatform(mock)


def write_invites(directory: Path, resend: bool = False) -> Path:
    directory.mkdir(exist_ok=True)
    path = directory / "apac-latam.yaml"
    path.write_text(INVITE_FILE.format(resend=str(resend).lower()), encoding="utf-8")
    return directory


def reconcile(*args: str) -> int:
    return run(list(args))


def read_records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def outcome_for(records: list[dict[str, Any]], invite_id: str, operation: str) -> dict[str, Any]:
    """The outcome record answering the one attempt at this write."""
    attempts = [
        r
        for r in records
        if r["record"] == "attempt" and (r["invite_id"], r["operation"]) == (invite_id, operation)
    ]
    assert len(attempts) == 1, f"{operation} {invite_id}: attempts {attempts}"
    answers = [
        r
        for r in records
        if r["record"] == "outcome" and r["attempt_id"] == attempts[0]["attempt_id"]
    ]
    assert len(answers) == 1, f"{operation} {invite_id}: the attempt has no outcome: {records}"
    return answers[0]


def apply_all(tmp_path: Path, resend: bool = False) -> int:
    """`reconcile apply` of the three invites, auto-approved, with an audit log."""
    invites = write_invites(tmp_path / "invites", resend=resend)
    return reconcile("apply", "--auto-approve", "--audit-log", "audit.jsonl", str(invites))
