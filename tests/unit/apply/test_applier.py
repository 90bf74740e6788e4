"""The Applier: one write path per invite, observed from the read before it to the re-send.

A write that never left is "not started", not "failed"; a field that moved since the
plan is a conflict and nothing is written; what the platform stored is checked against
what was sent (diverged, another invite's answer); a re-send is due only for fields
stored as sent, and one due and never attempted is owed.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from support.values import held, typed

from reconciler.api.client import Read, Receipt, Written
from reconciler.api.concurrency import Stop
from reconciler.api.exceptions import (
    AuthenticationFailed,
    Conflict,
    GatewayForbidden,
    NotFound,
    NotSent,
    PreconditionFailed,
    ServerError,
    UnexpectedResponse,
    WrongInvite,
)
from reconciler.api.exchange import AttemptWatch
from reconciler.apply.applier import Applier, ApplyReport, ResendOutcome, WriteOutcome
from reconciler.apply.audit import Attempt, AuditLog, AuditLogError, NoAuditLog
from reconciler.model.invite import CurrentInvite, SourceLocation, fields_from_json, fields_json
from reconciler.output.text import TextRenderer
from reconciler.plan.model import InviteChange, Plan
from reconciler.safetext import register_secret


class _Platform:
    """Invites held as JSON; each write applied as ``store`` says, and every call counted."""

    def __init__(self, invites: dict[str, dict[str, Any]]) -> None:
        self.invites = invites
        self.calls: list[tuple[str, str]] = []
        self.bodies: list[dict[str, Any]] = []
        self.etag: str | None = None
        self.if_match: list[str | None] = []
        # What the platform makes of a PATCH body before it stores it.
        self.store: Callable[[dict[str, Any]], dict[str, Any]] = lambda body: body
        self.answer_with: str | None = None  # another invite's id, answered instead
        self.data_less = False  # the PATCH answer holds no invite
        self.echo = False  # the PATCH answer holds the request body, whatever was stored
        self.resend_error: Exception | None = None
        self.read_errors: dict[str, Exception] = {}  # the answer to the read of an invite
        self.reread_error: Exception | None = None  # the answer to a read after its PATCH
        self.before_patch: Callable[[], None] = lambda: None  # before the PATCH leaves
        self.before_resend: Callable[[], None] = lambda: None

    def current(self, invite_id: str) -> CurrentInvite:
        raw = self.invites[invite_id]
        return CurrentInvite(invite_id, raw.get("status", "pending"), fields_from_json(raw))

    def read_invite(self, invite_id: str) -> Read:
        if self.reread_error is not None and ("PATCH", invite_id) in self.calls:
            raise self.reread_error
        error = self.read_errors.get(invite_id)
        if isinstance(error, NotSent):  # the turn never came: nothing recorded
            raise error
        self.calls.append(("GET", invite_id))
        if error is not None:
            raise error
        return Read(self.current(invite_id), self.etag)

    def write_invite(
        self,
        invite_id: str,
        patch: dict[str, Any],
        *,
        if_match: str | None = None,
        watch: AttemptWatch | None = None,
    ) -> Written:
        self.before_patch()
        if watch is not None:
            watch.before()
        self.calls.append(("PATCH", invite_id))
        self.if_match.append(if_match)
        body = json.loads(json.dumps(fields_json(patch)))
        self.bodies.append(body)
        if if_match is not None and if_match != self.etag:
            raise PreconditionFailed("precondition failed", status=412)
        self.invites[invite_id].update(self.store(body))
        if self.answer_with is not None:
            raise WrongInvite(f"about {self.answer_with}", status=200)
        stored = None if self.data_less else self.current(invite_id)
        if self.echo:
            stored = CurrentInvite(invite_id, "pending", fields_from_json(body))
        return Written(200, f"req-{invite_id}", stored)

    def resend_invite(self, invite_id: str, *, watch: AttemptWatch | None = None) -> Receipt:
        self.before_resend()
        if isinstance(self.resend_error, NotSent):  # the turn never came: nothing recorded
            raise self.resend_error
        if watch is not None:
            watch.before()
        self.calls.append(("RESEND", invite_id))
        if self.resend_error is not None:
            raise self.resend_error
        return Receipt(200, f"req-r-{invite_id}")


def _change(
    before: dict[str, Any],
    patch: dict[str, Any],
    resend: bool = False,
    invite_id: str = "inv_1",
    **extra: Any,
) -> InviteChange:
    return InviteChange(
        invite_id, SourceLocation("a.yaml", 3), None, held(before), typed(patch), resend, **extra
    )


def _apply(
    platform: _Platform,
    *changes: InviteChange,
    stop: Stop | None = None,
    audit: Any = None,
    log: Path | None = None,
) -> ApplyReport:
    """Applied at parallelism 1; with ``log``, audited to ``log / "audit.jsonl"``."""
    audit = AuditLog(str(log / "audit.jsonl"), "ci") if log is not None else audit
    applier = Applier(platform, parallelism=1, stop=stop or Stop(), audit=audit)  # type: ignore[arg-type]
    try:
        return applier.apply(Plan(base_url="https://api.example", changes=list(changes)))
    finally:
        if log is not None:
            audit.close()


def _said(record: dict[str, Any]) -> tuple[Any, ...]:
    """What an outcome line says came of its attempt: the outcome, HTTP status, requestId."""
    return record["outcome"], record["http_status"], record["request_id"]


def _records(log: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (log / "audit.jsonl").read_text().splitlines()]


def _one(**fields: Any) -> _Platform:
    return _Platform({"inv_1": {"id": "inv_1", **fields}})


def _email(resend: bool = True, **extra: Any) -> InviteChange:
    return _change({"email": "old@a.example"}, {"email": "new@a.example"}, resend, **extra)


# -- read before write ---------------------------------------------------------------


def test_a_field_moved_since_the_plan_is_a_conflict_and_nothing_is_written() -> None:
    platform = _one(email="support@a.example")
    report = _apply(platform, _email(False))
    (result,) = report.results
    assert result.outcome is WriteOutcome.CONFLICT
    assert [(m.field, m.planned, m.now, m.wanted) for m in result.moved] == [
        ("email", "old@a.example", "support@a.example", "new@a.example")
    ]
    assert platform.calls == [("GET", "inv_1")]  # no PATCH
    assert report.conflicts == 1 and not report.ok


def test_fields_already_at_their_value_are_left_out_of_the_patch() -> None:
    platform = _one(name="New", email="old@a.example")
    change = _change(
        {"name": "Old", "email": "old@a.example"}, {"name": "New", "email": "new@a.example"}
    )
    (result,) = _apply(platform, change).results
    assert result.outcome is WriteOutcome.UPDATED
    assert platform.bodies == [{"email": "new@a.example"}]


@pytest.mark.parametrize("resend", [True, False])
def test_a_change_someone_else_made_is_sent_no_more_and_its_re_send_is_owed(
    resend: bool, tmp_path: Path
) -> None:
    platform = _one(email="new@a.example")
    report = _apply(
        platform,
        _change({"email": "old@a.example"}, {"email": "new@a.example"}, resend=resend),
        log=tmp_path,
    )
    (result,) = report.results
    assert result.outcome is WriteOutcome.ALREADY_APPLIED
    assert platform.calls == [("GET", "inv_1")]
    # Whether the other writer e-mailed the business is unknown: never sent, said owed.
    assert result.resend is (ResendOutcome.OWED if resend else None)
    assert report.ok is not resend
    assert _owed_records(tmp_path) == ([_HELD_ALREADY] if resend else [])


# -- checked after write ----------------------------------------------------------------


def _owed_records(log: Path) -> list[str]:
    return [r["message"] for r in _records(log) if r["record"] == "resend_owed"]


_HELD_ALREADY = (
    "the platform already held the values that re-send it (someone else's write): whether an "
    "invitation went with them is unknown; once you have checked that none did"
)


# -- no e-mail before a GET shows where it goes (issue 51, row 2) --------------------------


def test_a_re_send_never_goes_to_an_address_stored_otherwise_than_sent() -> None:
    # `true`: the name stored as sent would re-send it, but the address it goes to was
    # stored otherwise than reviewed (the echo hid it; the GET shows it): owed, no e-mail.
    platform = _one(name="A", email="old@a.example")
    platform.store = lambda body: {k: v.lower() if k == "email" else v for k, v in body.items()}
    platform.echo = True
    change = _change(
        {"name": "A", "email": "old@a.example"}, {"name": "B", "email": "New@A.example"}, True
    )
    (result,) = _apply(platform, change).results
    assert (result.outcome, result.resend) == (WriteOutcome.DIVERGED, ResendOutcome.OWED)
    assert "`email`" in str(result.owed) and '"new@a.example"' in str(result.owed)
    assert platform.calls[-1] == ("GET", "inv_1")
    assert ("RESEND", "inv_1") not in platform.calls


def test_a_re_send_goes_to_the_address_the_get_shows_when_the_email_was_not_sent() -> None:
    # The name alone changes: the invitation goes to the address the platform holds.
    platform = _one(name="A", email="kept@a.example")
    platform.echo = True
    (result,) = _apply(platform, _change({"name": "A"}, {"name": "B"}, True)).results
    assert (result.outcome, result.resend) == (WriteOutcome.UPDATED, ResendOutcome.RESENT)
    assert result.recipient == "kept@a.example"
    assert platform.calls[-2:] == [("GET", "inv_1"), ("RESEND", "inv_1")]


def test_a_re_send_checked_on_the_get_that_verified_the_write_reads_no_more() -> None:
    platform = _one(email="old@a.example")
    platform.data_less = True
    (result,) = _apply(platform, _email()).results
    assert (result.outcome, result.resend) == (WriteOutcome.UPDATED, ResendOutcome.RESENT)
    assert platform.calls == [
        ("GET", "inv_1"),
        ("PATCH", "inv_1"),
        ("GET", "inv_1"),
        ("RESEND", "inv_1"),
    ]


@pytest.mark.parametrize(
    ("failure", "why"),
    [
        (
            ServerError("unavailable", status=503, request_id="req-g"),
            "the read that shows where it goes failed: HTTP 503: unavailable (requestId req-g)",
        ),
        (NotSent("not sent: the run is stopping"), "not sent: the run is stopping"),
    ],
    ids=["read-failed", "run-stopping"],
)
def test_a_re_send_whose_get_fails_is_owed_and_never_sent(
    failure: Exception, why: str, tmp_path: Path
) -> None:
    platform = _one(email="old@a.example")
    platform.reread_error = failure
    (result,) = _apply(platform, _email(), log=tmp_path).results
    assert (result.outcome, result.resend) == (WriteOutcome.UPDATED, ResendOutcome.OWED)
    assert ("RESEND", "inv_1") not in platform.calls
    reason = f"due after the update and never attempted ({why})"
    assert result.owed == reason
    assert _owed_records(tmp_path) == [reason]


def test_text_in_another_normal_form_or_a_set_in_another_order_is_stored_as_sent() -> None:
    platform = _one(name="Cafe", groups=["a"])
    # NFD sent, the platform stores NFC; the set comes back in its own order.
    platform.store = lambda body: {"name": "Caf\u00e9", "groups": list(reversed(body["groups"]))}
    change = _change(
        {"name": "Cafe", "groups": ["a"]}, {"name": "Cafe\u0301", "groups": ["x", "y"]}, True
    )
    (result,) = _apply(platform, change).results
    assert result.outcome is WriteOutcome.UPDATED
    assert result.resend is ResendOutcome.RESENT


def test_an_answer_about_another_invite_is_unknown_logged_so_and_re_sends_nothing(tmp_path) -> None:
    # Row 3.
    platform = _one(email="old@a.example")
    platform.answer_with = "inv_9"
    report = _apply(platform, _email(), log=tmp_path)
    (result,) = report.results
    assert result.outcome is WriteOutcome.UPDATE_UNKNOWN
    assert ("RESEND", "inv_1") not in platform.calls
    assert [r.change.id for r in report.resends_in_doubt] == ["inv_1"]
    (outcome,) = [r for r in _records(tmp_path) if r["record"] == "outcome"]
    assert _said(outcome) == ("unknown", 200, None)
    assert outcome["message"] == "about inv_9"


# -- re-sends: refused, unknown, owed ---------------------------------------------------


RESENDS = {  # the re-send's error, what it ended as, its outcome line in the log
    "made": (None, ResendOutcome.RESENT, [("ok", 200, "req-r-inv_1")]),
    "refused": (
        Conflict("not pending", status=409, request_id="req-r"),
        ResendOutcome.NOT_RESENT,
        [("failed", 409, "req-r")],
    ),
    "unknown": (
        ServerError("bad gateway", status=502),
        ResendOutcome.RESEND_UNKNOWN,
        [("unknown", 502, None)],
    ),
    "never-sent": (NotSent("not sent: the run is stopping"), ResendOutcome.OWED, []),
}


@pytest.mark.parametrize(("error", "expected", "logged"), RESENDS.values(), ids=RESENDS)
def test_what_a_re_send_ended_as_is_reported_and_logged(error, expected, logged, tmp_path) -> None:
    platform = _one(email="old@a.example")
    platform.resend_error = error
    report = _apply(platform, _email(), log=tmp_path)
    assert report.results[0].resend is expected
    assert report.ok is (error is None)
    resend = [
        r for r in _records(tmp_path) if r["operation"] == "resend" and r["record"] == "outcome"
    ]
    assert [_said(r) for r in resend] == logged


def test_a_re_send_owed_is_on_disk_at_the_update_and_after_it(tmp_path: Path) -> None:
    platform = _one(email="old@a.example")
    platform.resend_error = NotSent("not sent: the run is stopping")
    _apply(platform, _email(), log=tmp_path)
    records = _records(tmp_path)
    update = [r for r in records if r["record"] == "outcome" and r["operation"] == "update"]
    assert update[0]["resend"] == "due"
    assert [r["record"] for r in records][-1] == "resend_owed"


# -- the run's stop and the audit log -----------------------------------------------------


def test_writes_the_stopping_run_never_sent_are_reported_not_started() -> None:
    platform = _Platform({f"inv_{n}": {"id": f"inv_{n}", "name": "a"} for n in (1, 2, 3)})
    # The run stopped while the last two waited for their turn: neither is sent.
    platform.read_errors = dict.fromkeys(
        ["inv_2", "inv_3"], NotSent("not sent: the run is stopping")
    )
    changes = [_change({"name": "a"}, {"name": "b"}, invite_id=f"inv_{n}") for n in (1, 2, 3)]
    report = _apply(platform, *changes)
    states = [r.outcome for r in report.results]
    assert states == [WriteOutcome.UPDATED, WriteOutcome.NOT_STARTED, WriteOutcome.NOT_STARTED]
    assert [c for c in platform.calls if c[0] == "PATCH"] == [("PATCH", "inv_1")]
    assert report.count(WriteOutcome.FAILED) == 0
    assert [TextRenderer().apply_result(r) for r in report.results] == [
        "updated      inv_1  (a.yaml:3): name",
        "not started  inv_2  (a.yaml:3)",
        "not started  inv_3  (a.yaml:3)",
    ]


def test_a_run_fatal_error_on_the_last_write_is_what_the_summary_says_stopped_the_run() -> None:
    platform = _one(name="a")  # the credentials refused: every other request would fail too
    platform.read_errors["inv_1"] = AuthenticationFailed("token expired reading inv_1", status=401)
    report = _apply(platform, _change({"name": "a"}, {"name": "b"}))
    assert [r.outcome for r in report.results] == [WriteOutcome.FAILED]
    assert TextRenderer().apply_summary(report).splitlines() == [
        "Stopped: HTTP 401: token expired reading inv_1; no new writes were started.",
        "Apply: 0 updated, 1 failed.",
    ]


def test_a_fresh_apply_counts_nothing_as_applied_by_an_earlier_run() -> None:
    platform = _one(name="a")
    report = _apply(platform, _change({"name": "a"}, {"name": "b"}))
    assert TextRenderer().apply_summary(report) == "Apply: 1 updated, 0 failed."


def test_the_audit_log_records_what_was_sent_redacting_only_what_the_server_holds(tmp_path) -> None:
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
    platform = _Platform({"inv_1": {"id": "inv_1", **before}})
    _apply(platform, _change(before, patch, kept={"primaryContact": ("note",)}), log=tmp_path)
    assert platform.bodies == [patch]  # sent byte for byte, the server's sub-field included
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


FULL = "audit.jsonl: cannot write the audit log (No space left on device)"


class _FullLog(NoAuditLog):
    """An audit log whose disk fills: ``attempts`` attempt lines written (None: every one),
    then no more; outcome and re-send owed lines written unless ``outcomes``/``owed`` is
    False."""

    def __init__(self, attempts: int | None = None, outcomes: bool = True, owed: bool = True):
        super().__init__()
        self.attempts_left, self.outcomes, self.owed = attempts, outcomes, owed

    def attempt(self, invite_id: str, operation: str, fields: Any = None) -> Attempt:
        if self.attempts_left == 0:
            raise AuditLogError(FULL)
        if self.attempts_left is not None:
            self.attempts_left -= 1
        return Attempt("a1", invite_id, operation)

    def outcome(self, attempt: Attempt, outcome: str, *rest: Any, **extra: Any) -> None:
        if not self.outcomes:
            raise AuditLogError(FULL)

    def resend_owed(self, invite_id: str, reason: str) -> None:
        if not self.owed:
            raise AuditLogError(FULL)


def test_a_log_that_fills_after_the_request_left_still_reports_the_write_and_owes_its_e_mail():
    platform = _Platform({f"inv_{n}": {"id": f"inv_{n}", "email": "o@a.example"} for n in (1, 2)})
    changes = [
        _change({"email": "o@a.example"}, {"email": "n@a.example"}, True, invite_id=f"inv_{n}")
        for n in (1, 2)
    ]
    stop = Stop()
    report = _apply(platform, *changes, stop=stop, audit=_FullLog(1, outcomes=False, owed=False))
    assert [(r.outcome, r.resend) for r in report.results] == [
        (WriteOutcome.UPDATED, ResendOutcome.OWED),  # updated (the server has it), e-mail owed
        (WriteOutcome.NOT_STARTED, None),
    ]
    assert [c for c in platform.calls if c[0] != "GET"] == [("PATCH", "inv_1")]
    assert [r.change.id for r in report.resends_not_made] == ["inv_1"]
    assert report.audit_error is not None and not report.ok
    assert stop.reason == "the audit log could not be written"
    assert report.stopped_by == "the audit log could not be written; no new writes were started"


# -- a 412 to a retry after an attempt whose outcome is unknown ---------------------------


class _WrittenThen412(_Platform):
    """A gateway answered 504 after the platform wrote the PATCH; the retry's If-Match is
    refused (412), and the GET that follows answers ``read_back`` (an error, or the invite)."""

    def __init__(self, invites: dict[str, dict[str, Any]], read_back: Exception | None = None):
        super().__init__(invites)
        self.read_back = read_back
        self.etag = '"v1"'

    def write_invite(self, invite_id: str, patch: Any, *, watch: Any = None, **_: Any) -> Written:
        assert watch is not None
        watch.before()
        self.calls.append(("PATCH", invite_id))
        self.invites[invite_id].update(self.store(json.loads(json.dumps(fields_json(patch)))))
        watch.failed(ServerError("gateway timeout", status=504))
        watch.before()
        self.calls.append(("PATCH", invite_id))
        raise PreconditionFailed("precondition failed", status=412, request_id="req-412")

    def read_invite(self, invite_id: str) -> Read:
        if self.calls[-1:] == [("PATCH", invite_id)] and self.read_back is not None:
            self.calls.append(("GET", invite_id))
            raise self.read_back
        return super().read_invite(invite_id)


def _last_update_outcome(log: Path) -> tuple[Any, ...]:
    last = [r for r in _records(log) if r["record"] == "outcome" and r["operation"] == "update"][-1]
    return (last["outcome"], last["http_status"], last["request_id"], last.get("message"))


def test_a_412_after_a_504_whose_read_back_fails_is_unknown_and_logged_so(tmp_path: Path) -> None:
    down = ServerError("down for maintenance", status=503, request_id="req-get")
    platform = _WrittenThen412({"inv_1": {"id": "inv_1", "name": "a"}}, read_back=down)
    report = _apply(platform, _change({"name": "a"}, {"name": "b"}, True), log=tmp_path)
    (result,) = report.results
    assert (result.outcome, result.resend) == (WriteOutcome.UPDATE_UNKNOWN, None)
    assert result.change.id == "inv_1"
    message = f"updated, but what was stored cannot be checked: the read back failed: {down}"
    assert result.error is not None
    error = (result.error.message, result.error.status, result.error.request_id)
    assert error == (message, 412, "req-412")
    assert _last_update_outcome(tmp_path) == ("unknown", 412, "req-412", message)


def test_a_412_after_a_504_read_back_otherwise_than_sent_is_unknown(tmp_path: Path) -> None:
    platform = _WrittenThen412({"inv_1": {"id": "inv_1", "email": "old@a.example"}})
    platform.store = lambda body: {k: v.lower() for k, v in body.items()}
    report = _apply(
        platform, _change({"email": "old@a.example"}, {"email": "New@A.example"}), log=tmp_path
    )
    (result,) = report.results
    assert result.outcome is WriteOutcome.UPDATE_UNKNOWN
    assert result.change.id == "inv_1"
    assert result.error is not None
    assert (result.error.status, result.error.request_id) == (412, "req-412")
    assert result.error.message == (
        "precondition failed: refused by If-Match after an earlier attempt whose outcome is "
        "unknown, and the platform does not hold what was sent: whether this update was made "
        "is unknown"
    )
    assert _last_update_outcome(tmp_path) == ("unknown", 412, "req-412", result.error.message)


def test_a_412_after_a_504_read_back_as_sent_is_the_earlier_attempts_write(tmp_path: Path) -> None:
    platform = _WrittenThen412({"inv_1": {"id": "inv_1", "name": "a"}})
    report = _apply(platform, _change({"name": "a"}, {"name": "b"}), log=tmp_path)
    assert [r.outcome for r in report.results] == [WriteOutcome.UPDATED]
    assert _last_update_outcome(tmp_path) == (
        "ok",
        412,
        "req-412",
        "refused by If-Match after an earlier attempt whose outcome was unknown; read back, "
        "the platform holds what was sent: that attempt was written",
    )


class _WrittenThenGateway403(_Platform):
    """A gateway let the PATCH through (the platform wrote it), then answered its own 403,
    which the read sent right after it got past (the exchange: no block, outcome
    unknown)."""

    def write_invite(self, invite_id: str, patch: Any, *, watch: Any = None, **_: Any) -> Written:
        assert watch is not None
        watch.before()
        self.calls.append(("PATCH", invite_id))
        self.invites[invite_id].update(json.loads(json.dumps(fields_json(patch))))
        refused = GatewayForbidden("Forbidden", status=403).unconfirmed("a read got past")
        watch.failed(refused)
        raise refused


def test_a_patch_answered_with_a_403_no_block_is_read_back_and_its_re_send_made_once(
    tmp_path: Path,
) -> None:
    platform = _WrittenThenGateway403({"inv_1": {"id": "inv_1", "email": "old@a.example"}})
    report = _apply(platform, _email(), log=tmp_path)
    assert [(r.outcome, r.resend) for r in report.results] == [
        (WriteOutcome.UPDATED, ResendOutcome.RESENT)
    ]
    assert platform.calls == [
        ("GET", "inv_1"),
        ("PATCH", "inv_1"),
        ("GET", "inv_1"),
        ("RESEND", "inv_1"),
    ]
    outcome, status, _, message = _last_update_outcome(tmp_path)
    assert (outcome, status) == ("ok", 403)
    assert message == (
        "refused by a gateway whose 403 was no block on the client; read back, the platform "
        "holds what was sent: the gateway let the PATCH through and refused its answer"
    )


def test_a_patch_answered_with_a_403_no_block_and_not_held_is_unknown(tmp_path: Path) -> None:
    platform = _WrittenThenGateway403({"inv_1": {"id": "inv_1", "email": "old@a.example"}})
    platform.store = lambda body: {}
    platform.write_invite = lambda *a, **k: _refuse_unwritten(platform, **k)  # type: ignore[method-assign]
    report = _apply(platform, _email())
    (result,) = report.results
    assert result.outcome is WriteOutcome.UPDATE_UNKNOWN and result.resend is None
    assert ("RESEND", "inv_1") not in platform.calls


def _refuse_unwritten(platform: _Platform, watch: AttemptWatch | None = None, **_: Any) -> Written:
    assert watch is not None
    watch.before()
    platform.calls.append(("PATCH", "inv_1"))
    refused = GatewayForbidden("Forbidden", status=403).unconfirmed("a read got past")
    watch.failed(refused)
    raise refused


def test_a_diverged_update_logs_what_the_platform_stored_field_by_field(tmp_path: Path) -> None:
    platform = _one(email="old@a.example", groups=["a"])
    platform.store = lambda body: {"groups": ["b"]}  # the e-mail dropped, one group ignored
    platform.invites["inv_1"].pop("email")
    change = _change(
        {"email": None, "groups": ["a"]}, {"email": "new@a.example", "groups": ["b", "c"]}
    )
    report = _apply(platform, change, log=tmp_path)
    assert [r.outcome for r in report.results] == [WriteOutcome.DIVERGED]
    records = _records(tmp_path)
    assert records[-1]["outcome"] == "diverged"
    assert records[-1]["stored"] == {"email": None, "groups": ["b"]}


def test_a_re_send_owed_the_log_cannot_record_fails_the_run_naming_the_log() -> None:
    platform = _one(email="old@a.example")
    platform.resend_error = NotSent("not sent: the run is stopping")
    report = _apply(platform, _email(), audit=_FullLog(owed=False))
    assert [(r.outcome, r.resend) for r in report.results] == [
        (WriteOutcome.UPDATED, ResendOutcome.OWED)
    ]
    assert str(report.audit_error) == FULL
    assert not report.ok


def _etag_moves(platform: _Platform, meanwhile: Callable[[], object] = lambda: None) -> None:
    """The ETag read is "v1"; between the GET and the PATCH it is "v2", and ``meanwhile`` ran."""
    platform.etag = '"v1"'

    def moved() -> None:
        platform.etag = '"v2"'
        meanwhile()

    platform.before_patch = moved


def test_the_etag_read_is_if_match_and_a_412_reading_as_before_says_the_etag_moved_alone() -> None:
    # A server whose ETag changes at every read refuses every If-Match: read once more,
    # the invite holds what it held, and the conflict says what moved is the ETag.
    platform = _one(email="old@a.example")
    _etag_moves(platform)
    change = _email()
    (result,) = _apply(platform, change).results
    assert platform.if_match == ['"v1"']
    assert (result.change, result.outcome, result.resend) == (change, WriteOutcome.CONFLICT, None)
    assert result.error is not None and result.error.status == 412 and result.etag_moved_alone
    assert platform.calls == [("GET", "inv_1"), ("PATCH", "inv_1"), ("GET", "inv_1")]  # no e-mail


@pytest.mark.parametrize("resend", [True, False])
def test_a_412_after_which_the_invite_holds_what_was_sent_is_already_applied(
    resend: bool, tmp_path: Path
) -> None:
    # Issue 51, row 9: an earlier attempt landed, or someone made the same change.
    platform = _one(email="old@a.example")
    _etag_moves(platform, lambda: platform.invites["inv_1"].update(email="new@a.example"))
    report = _apply(
        platform,
        _email(resend),
        log=tmp_path,
    )
    (result,) = report.results
    assert result.outcome is WriteOutcome.ALREADY_APPLIED and report.conflicts == 0
    assert platform.calls == [("GET", "inv_1"), ("PATCH", "inv_1"), ("GET", "inv_1")]
    assert result.resend is (ResendOutcome.OWED if resend else None)
    refused = "refused (HTTP 412: precondition failed) and read again, "
    owed = [refused + _HELD_ALREADY] if resend else []
    assert _owed_records(tmp_path) == owed
    assert report.ok is not resend


def test_a_re_send_someone_else_made_due_and_this_write_does_not_is_owed() -> None:
    platform = _one(name="A", email="new@a.example")
    change = _change(
        {"name": "A", "email": "old@a.example"},
        {"name": "B", "email": "new@a.example"},
        True,
        resend_on=("email",),
    )
    (result,) = _apply(platform, change).results
    assert (result.outcome, result.resend) == (WriteOutcome.UPDATED, ResendOutcome.OWED)
    assert result.owed == _HELD_ALREADY
    assert platform.bodies == [{"name": "B"}] and ("RESEND", "inv_1") not in platform.calls


def test_a_412_after_a_change_on_the_platform_is_a_plain_conflict() -> None:
    platform = _one(name="a")
    _etag_moves(platform, lambda: platform.invites["inv_1"].update(name="someone else's"))
    (result,) = _apply(platform, _change({"name": "a"}, {"name": "b"})).results

    assert result.outcome is WriteOutcome.CONFLICT and not result.etag_moved_alone


def test_a_412_as_the_run_stops_is_not_read_again_and_claims_nothing_of_the_etag() -> None:
    platform = _one(name="a")
    stop = Stop()
    _etag_moves(platform, lambda: stop.set("Ctrl-C"))
    (result,) = _apply(platform, _change({"name": "a"}, {"name": "b"}), stop=stop).results

    assert result.outcome is WriteOutcome.CONFLICT and not result.etag_moved_alone
    assert platform.calls == [("GET", "inv_1"), ("PATCH", "inv_1")]


def test_a_412_whose_read_again_fails_claims_nothing_of_the_etag() -> None:
    platform = _one(name="a")
    _etag_moves(platform)
    platform.reread_error = ServerError("unavailable", status=503)
    (result,) = _apply(platform, _change({"name": "a"}, {"name": "b"})).results

    assert result.outcome is WriteOutcome.CONFLICT and not result.etag_moved_alone
    assert result.error is not None and result.error.status == 412


class _RetriedPlatform(_Platform):
    """Each write and re-send answered with ``error`` and tried again: the retry's attempt
    line is written first, as the client does."""

    def __init__(self, invites: dict[str, dict[str, Any]], error: Exception) -> None:
        super().__init__(invites)
        self.error = error

    def write_invite(self, invite_id: str, patch: Any, *, watch: Any = None, **_: Any) -> Written:
        assert watch is not None
        watch.before()
        self.calls.append(("PATCH", invite_id))
        watch.failed(self.error)
        watch.before()  # the retry
        raise AssertionError("retried without its attempt line")

    def resend_invite(self, invite_id: str, *, watch: AttemptWatch | None = None) -> Receipt:
        assert watch is not None
        watch.before()
        self.calls.append(("RESEND", invite_id))
        watch.failed(self.error)  # type: ignore[arg-type]
        watch.before()
        raise AssertionError("sent again without its attempt line")


def test_a_write_not_retried_for_want_of_its_attempt_line_is_unknown_and_says_why() -> None:
    platform = _RetriedPlatform(
        {"inv_1": {"id": "inv_1", "name": "a"}}, ServerError("gateway timeout", status=504)
    )
    report = _apply(platform, _change({"name": "a"}, {"name": "b"}), audit=_FullLog(1))
    (result,) = report.results
    assert (result.change.id, result.outcome) == ("inv_1", WriteOutcome.UPDATE_UNKNOWN)
    assert str(result.error) == f"not retried: {FULL}"
    assert not report.ok


def test_a_re_send_not_sent_again_for_want_of_its_attempt_line_says_why() -> None:
    platform = _RetriedPlatform(
        {"inv_1": {"id": "inv_1", "email": "old@a.example"}},
        ServerError("gateway timeout", status=504),
    )
    platform.write_invite = _Platform.write_invite.__get__(platform)  # type: ignore[method-assign]
    report = _apply(platform, _email(), audit=_FullLog(2))  # the write's, the first send's
    (result,) = report.results
    assert result.change.id == "inv_1"
    assert (result.outcome, result.resend) == (WriteOutcome.UPDATED, ResendOutcome.NOT_RESENT)
    assert str(result.resend_error) == f"not sent again: {FULL}"


class _InterruptedAsHandedOver(Stop):
    """Interrupted just after the concurrency map's look before it hands the first write
    to a worker: the write itself looks next."""

    def __init__(self) -> None:
        super().__init__()
        self.looks = 0

    def is_set(self) -> bool:
        self.looks += 1
        if self.looks == 1:
            self.set("interrupted")
            return False
        return super().is_set()


def test_a_write_handed_over_as_the_run_is_interrupted_reads_nothing_and_is_named() -> None:
    platform = _one(name="a")
    report = _apply(
        platform, _change({"name": "a"}, {"name": "b"}), stop=_InterruptedAsHandedOver()
    )
    assert [(r.change.id, r.outcome) for r in report.results] == [
        ("inv_1", WriteOutcome.NOT_STARTED)
    ]
    assert platform.calls == []
    assert report.stopped_by == "interrupted; no new writes were started"


def test_an_outcome_the_log_cannot_record_fails_the_run_naming_the_log() -> None:
    # The update was made (its attempt line was written before it left): it is reported,
    # and the run fails, as the log lacks what came of it.
    platform = _one(name="a")
    report = _apply(platform, _change({"name": "a"}, {"name": "b"}))
    assert report.ok  # the same write with a log that records everything

    platform = _one(name="a")
    report = _apply(platform, _change({"name": "a"}, {"name": "b"}), audit=_FullLog(outcomes=False))
    assert [r.outcome for r in report.results] == [WriteOutcome.UPDATED]
    assert str(report.audit_error) == FULL
    assert not report.ok


def test_a_write_whose_turn_never_came_is_not_started() -> None:
    # The run stopped while it waited for its turn: the PATCH never left.
    platform = _one(name="a")

    def stopping() -> None:
        raise NotSent("not sent: the run is stopping")

    platform.before_patch = stopping
    report = _apply(platform, _change({"name": "a"}, {"name": "b"}))
    assert [(r.change.id, r.outcome) for r in report.results] == [
        ("inv_1", WriteOutcome.NOT_STARTED)
    ]
    assert platform.calls == [("GET", "inv_1")]
    assert TextRenderer().apply_summary(report) == "Apply: 0 updated, 0 failed, 1 not started."


def test_a_re_send_whose_attempt_line_cannot_be_written_is_owed_saying_why() -> None:
    platform = _one(email="old@a.example")
    report = _apply(platform, _email(), audit=_FullLog(1))  # the write's line only
    (result,) = report.results
    assert (result.outcome, result.resend) == (WriteOutcome.UPDATED, ResendOutcome.OWED)
    assert result.owed == (
        "due after the update and never attempted (not sent: the audit log could not be "
        "written, and no write is sent without its audit record)"
    )
    assert str(report.audit_error) == FULL
    assert not report.ok
    assert ("RESEND", "inv_1") not in platform.calls


# -- each result names its invite and says what came of it, in the output and the log -------


def test_an_invite_gone_from_the_platform_fails_alone_with_the_servers_answer() -> None:
    platform = _one(name="a")  # inv_gone was deleted on the platform since the plan
    platform.read_errors["inv_gone"] = NotFound(
        "no invite with id inv_gone", status=404, request_id="req-404"
    )
    changes = [
        _change({"name": "a"}, {"name": "b"}, invite_id="inv_gone"),
        _change({"name": "a"}, {"name": "Zoë Ørsted"}),
    ]
    report = _apply(platform, *changes)
    assert [TextRenderer().apply_result(r) for r in report.results] == [
        "failed       inv_gone  (a.yaml:3): HTTP 404: no invite with id inv_gone "
        "(requestId req-404)",
        "updated      inv_1  (a.yaml:3): name",
    ]
    assert report.stopped_by is None


def test_an_invite_already_as_wanted_and_one_moved_meanwhile_are_each_named() -> None:
    platform = _Platform(
        {
            "inv_1": {"id": "inv_1", "name": "Café Größe"},
            "inv_2": {"id": "inv_2", "name": "changed by support"},
        }
    )
    changes = [
        _change({"name": "old"}, {"name": "Café Größe"}, True),
        _change({"name": "old"}, {"name": "new"}, invite_id="inv_2"),
    ]
    report = _apply(platform, *changes)
    assert [TextRenderer().apply_result(r) for r in report.results] == [
        "already applied  inv_1  (a.yaml:3): nothing sent, its invitation not e-mailed again\n"
        f"re-send owed  inv_1: {_HELD_ALREADY}; send it with: reconcile resend inv_1",
        "conflict     inv_2  (a.yaml:3): changed on the platform since the plan was shown; "
        'nothing written to it\n    name: planned from "old", now "changed by support", '
        'wanted "new"',
    ]


class _AnsweringAboutAnother(_Platform):
    """Writes the PATCH, then answers 200 about another invite, with its own requestId."""

    def write_invite(self, invite_id: str, patch: Any, *, watch: Any = None, **_: Any) -> Written:
        assert watch is not None
        watch.before()
        self.calls.append(("PATCH", invite_id))
        raise WrongInvite(
            f"invite {invite_id}: the answer to its update is about inv_2; whether this "
            "invite was updated is unknown",
            status=200,
            request_id="req-7f3a",
        )


def test_an_answer_about_another_invite_is_logged_with_that_answers_request_id(tmp_path) -> None:
    platform = _AnsweringAboutAnother({"inv_1": {"id": "inv_1", "name": "a"}})
    report = _apply(platform, _change({"name": "a"}, {"name": "b"}), log=tmp_path)
    assert [r.outcome for r in report.results] == [WriteOutcome.UPDATE_UNKNOWN]
    assert _last_update_outcome(tmp_path) == (
        "unknown",
        200,
        "req-7f3a",
        "invite inv_1: the answer to its update is about inv_2; whether this invite was "
        "updated is unknown",
    )


def _token_refused() -> None:
    """The token, expired mid-run, refused when renewed before a request leaves: that
    request is never sent, so it has no attempt line."""
    raise AuthenticationFailed("invalid_client: client secret revoked", status=401)


def test_a_token_refused_before_a_patch_leaves_fails_that_write_and_stops_the_run() -> None:
    platform = _Platform({f"inv_{n}": {"id": f"inv_{n}", "name": "a"} for n in (1, 2)})
    platform.before_patch = _token_refused
    changes = [_change({"name": "a"}, {"name": "b"}, invite_id=f"inv_{n}") for n in (1, 2)]
    report = _apply(platform, *changes)
    assert [r.outcome for r in report.results] == [WriteOutcome.FAILED, WriteOutcome.NOT_STARTED]
    assert TextRenderer().apply_summary(report).splitlines() == [
        "Stopped: HTTP 401: invalid_client: client secret revoked; no new writes were started.",
        "Apply: 0 updated, 1 failed, 1 not started.",
    ]


def test_a_token_refused_before_a_re_send_leaves_is_not_re_sent_and_stops_the_run() -> None:
    platform = _Platform({f"inv_{n}": {"id": f"inv_{n}", "email": "old@a.example"} for n in (1, 2)})
    platform.before_resend = _token_refused
    changes = [
        _change({"email": "old@a.example"}, {"email": "new@a.example"}, True, invite_id=f"inv_{n}")
        for n in (1, 2)
    ]
    report = _apply(platform, *changes)
    assert [(r.outcome, r.resend) for r in report.results] == [
        (WriteOutcome.UPDATED, ResendOutcome.NOT_RESENT),
        (WriteOutcome.NOT_STARTED, None),
    ]
    assert report.stopped_by == (
        "HTTP 401: invalid_client: client secret revoked; no new writes were started"
    )


def test_an_update_stored_as_sent_with_no_re_send_logs_neither_stored_values_nor_one_due(
    tmp_path: Path,
) -> None:
    platform = _one(name="Muller")
    _apply(platform, _change({"name": "Muller"}, {"name": "Müller GmbH"}), log=tmp_path)
    records = _records(tmp_path)
    (outcome,) = [r for r in records if r["record"] == "outcome"]
    assert outcome["outcome"] == "ok"
    assert "stored" not in outcome and "resend" not in outcome


def test_an_update_whose_stored_copy_cannot_be_read_back_names_the_failed_read(tmp_path) -> None:
    platform = _one(name="a")
    platform.data_less = True  # the PATCH's answer holds no invite: a GET must tell
    platform.reread_error = ServerError("down for maintenance", status=503, request_id="req-get")
    (result,) = _apply(platform, _change({"name": "a"}, {"name": "b"}), log=tmp_path).results
    assert result.outcome is WriteOutcome.UPDATE_UNKNOWN
    assert result.error is not None
    # The PATCH's answer (200, its requestId) is the write's; the read's is in the message.
    assert (result.error.status, result.error.request_id) == (200, "req-inv_1")
    assert str(result.error) == (
        "HTTP 200: updated, but what was stored cannot be checked: the read back failed: "
        "HTTP 503: down for maintenance (requestId req-get) (requestId req-inv_1)"
    )
    records = _records(tmp_path)
    (outcome,) = [r for r in records if r["record"] == "outcome"]
    assert _said(outcome) == ("unknown", 200, "req-inv_1")


def test_a_re_send_answered_2xx_without_the_envelope_is_unknown_and_logged_with_why(
    tmp_path: Path,
) -> None:
    platform = _one(email="old@a.example")
    why = (
        "the answer to the re-send of inv_1 is not the API's envelope saying success, so "
        "whether the invitation went out cannot be checked"
    )
    platform.resend_error = UnexpectedResponse(why, status=200, request_id="req-r")
    report = _apply(platform, _email(), log=tmp_path)
    (result,) = report.results
    assert TextRenderer().apply_result(result).splitlines()[-1] == (
        f"re-send unknown  inv_1: HTTP 200: {why} (requestId req-r); the invitation may have "
        "gone out: check with the platform or the invitee before sending again"
    )
    records = _records(tmp_path)
    (resend,) = [r for r in records if r["operation"] == "resend" and r["record"] == "outcome"]
    assert _said(resend) == ("unknown", 200, "req-r")
    assert resend["message"] == why
