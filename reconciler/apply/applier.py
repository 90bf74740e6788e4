"""Carry out a plan: one write per changed invite, observed from end to end.

Each invite's write is one path, for `apply` and `apply --plan` alike:

1. **read** the invite again, right before its PATCH (its ETag kept);
2. **decide** what that fresh copy means for the change (``plan.write_check.before_write``):
   already applied, changed on the platform since the plan (a conflict: nothing is
   written), or the fields still to write;
3. **PATCH** them, with ``If-Match`` when the read carried an ETag (a 412 is the same
   conflict, unless the invite read again holds what was sent: already applied), each
   attempt recorded in the audit log before it leaves;
4. **check** what the answer (or a GET, when it holds no invite or not every field
   sent) says is stored against what was sent (``plan.write_check.stored_as_sent``): an
   answer about another invite is `update unknown`, a managed field stored otherwise is
   `diverged`;
5. **re-send** the invitation when a GET shows a field that triggers it stored as sent
   (an answer may echo the request: it never decides an e-mail), to the address the
   platform holds; a refusal before acting (429, 503) is sent again.

A re-send due and not sent by this run is `re-send owed`, with its reason, in the output
and as a ``resend_owed`` record in the audit log (``_owed``, the one path): never
attempted (the run stopped, the log failed, the GET failed), withheld (a field that
triggers it changed otherwise than sent), or someone else's (the platform held the values
already: whether an e-mail went with them is unknown).
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from enum import Enum
from types import FrameType
from typing import Any, NamedTuple

from reconciler.api.capacity import Limiter
from reconciler.api.client import ApiClient, Read
from reconciler.api.concurrency import Stop, ordered_map
from reconciler.api.exceptions import (
    ApiError,
    GatewayForbidden,
    NotSent,
    PreconditionFailed,
    UnexpectedResponse,
)
from reconciler.apply.audit import AttemptRecorder, AuditLog, AuditLogError, NoAuditLog, said
from reconciler.errors import ReconcilerError
from reconciler.model.invite import (
    CurrentInvite,
    Done,
    Failed,
    JsonValue,
    NotRun,
    Outcome,
    kind_of,
    to_json,
)
from reconciler.plan.model import InviteChange, Plan
from reconciler.plan.write_check import (
    AlreadyApplied,
    Moved,
    MovedField,
    Recheck,
    StoredCheck,
    StoredOtherwise,
    before_write,
    recheck,
    stored_as_sent,
)
from reconciler.safetext import json_text, redact, redact_and_escape

# Where the invitation goes: a re-send waits for a read that shows it stored as sent.
RECIPIENT = "email"


class WriteOutcome(Enum):
    """What became of one invite's update; each result carries exactly one."""

    UPDATED = "updated"  # every field stored as sent
    # Written, but a field the files manage was stored otherwise (normalised, ignored).
    DIVERGED = "diverged"
    # Changed on the platform since the plan was shown (or a 412): nothing written.
    CONFLICT = "conflict"
    ALREADY_APPLIED = "already applied"  # every field held its value already: nothing sent
    FAILED = "failed"
    # The update failed with no answer after it may have reached the server, or its answer
    # could not be checked: not "failed", which would invite a blind retry.
    UPDATE_UNKNOWN = "update unknown"
    NOT_STARTED = "not started"  # the run stopped before this write left

    @classmethod
    def failed_by(cls, error: ApiError) -> WriteOutcome:
        """An update that failed with ``error``: unknown when it may have been made."""
        return cls.UPDATE_UNKNOWN if error.outcome_unknown else cls.FAILED

    @property
    def updated(self) -> bool:
        """The update was written (whatever was stored)."""
        return self is WriteOutcome.UPDATED or self is WriteOutcome.DIVERGED

    @property
    def ok(self) -> bool:
        """The platform holds what the files say."""
        return self is WriteOutcome.UPDATED or self is WriteOutcome.ALREADY_APPLIED

    @property
    def audit(self) -> str:
        """The outcome value of the update's audit record, for an update that was answered."""
        return "diverged" if self is WriteOutcome.DIVERGED else "ok"


class ResendOutcome(Enum):
    """What became of the re-send an update asked for."""

    RESENT = "re-sent"
    # Certainly not made: refused with an answer that says so. `reconcile resend ID`.
    NOT_RESENT = "not re-sent"
    # No answer after it may have reached the server: sending it again could duplicate it.
    RESEND_UNKNOWN = "re-send unknown"
    # Due and not sent by this run, for the reason the result's `owed` says (the module's
    # docstring lists them). `reconcile resend ID`, once what the reason says is checked.
    OWED = "re-send owed"

    @property
    def owed(self) -> bool:
        """Certainly not made although due: `reconcile resend ID` makes it."""
        return self is ResendOutcome.NOT_RESENT or self is ResendOutcome.OWED


@dataclass(frozen=True)
class ChangeResult:
    change: InviteChange  # as written: the fields already at their value left out
    outcome: WriteOutcome
    # What went wrong with the update (FAILED, UPDATE_UNKNOWN, a 412 CONFLICT).
    error: ApiError | None = None
    resend: ResendOutcome | None = None  # None: none was asked for, or no update was made
    resend_error: ApiError | None = None
    moved: tuple[MovedField, ...] = ()  # CONFLICT: the fields that moved since the plan
    diverged: tuple[StoredOtherwise, ...] = ()  # DIVERGED: what the platform stored
    noted: tuple[StoredOtherwise, ...] = ()  # kept sub-fields the platform reformatted
    recipient: str | None = None  # where the invitation went: the address the platform holds
    owed: str | None = None  # OWED: why, and what to check before `reconcile resend ID`
    # A 412 CONFLICT after which the invite read again holds what it held before: its ETag
    # moved alone (a server whose ETag changes at every read refuses every If-Match).
    etag_moved_alone: bool = False

    @property
    def ok(self) -> bool:
        """Everything asked of this invite was done."""
        return self.outcome.ok and self.resend in (None, ResendOutcome.RESENT)


@dataclass
class ApplyReport:
    results: list[ChangeResult] = field(default_factory=list)
    stopped_by: str | None = None  # why no new writes were started
    # The audit log failed during the run: reported after the results, and the run fails.
    audit_error: AuditLogError | None = None
    already_applied: int = 0  # changes of a saved plan made by an earlier run: not sent again
    left_in_conflict: int = 0  # conflicts of a plan of a change, left alone before the writes

    @property
    def resends_not_made(self) -> list[ChangeResult]:
        """Updates made whose due re-send certainly was not: each needs `reconcile resend`."""
        return [r for r in self.results if r.resend is not None and r.resend.owed]

    @property
    def resends_in_doubt(self) -> list[ChangeResult]:
        """Updates of unknown outcome that were to re-send: the re-send was not made."""
        return [
            r for r in self.results if r.change.resend and r.outcome is WriteOutcome.UPDATE_UNKNOWN
        ]

    def count(self, *outcomes: WriteOutcome | ResendOutcome) -> int:
        """Results that ended as any of ``outcomes`` (of the update or of its re-send)."""
        return sum(1 for r in self.results if r.outcome in outcomes or r.resend in outcomes)

    @property
    def updated(self) -> int:
        """Updates stored as sent, whatever became of their re-sends."""
        return self.count(WriteOutcome.UPDATED)

    @property
    def conflicts(self) -> int:
        """Invites not written because the platform moved: found now, or by the plan."""
        return self.count(WriteOutcome.CONFLICT) + self.left_in_conflict

    @property
    def ok(self) -> bool:
        return (
            self.audit_error is None
            and not self.left_in_conflict
            and all(r.ok for r in self.results)
        )


class Applier:
    def __init__(
        self,
        client: ApiClient,
        *,
        parallelism: int | Limiter,
        stop: Stop,
        audit: AuditLog | None = None,
    ) -> None:
        self._client = client
        self._parallelism = parallelism
        self._stop = stop  # set by an interruption, a run-fatal error or lost stdout
        self._audit = audit or NoAuditLog()
        self._fatal: ApiError | None = None
        self._audit_error: AuditLogError | None = None
        self._lock = threading.Lock()

    def apply(
        self, plan: Plan, on_result: Callable[[ChangeResult], None] | None = None
    ) -> ApplyReport:
        report = ApplyReport()
        for result in self._results(plan):
            report.results.append(result)
            if on_result:
                on_result(result)
        report.audit_error = self._audit_error
        if self._fatal is not None:
            report.stopped_by = f"{self._fatal}; no new writes were started"
        elif self._stop.is_set() and report.count(WriteOutcome.NOT_STARTED):
            report.stopped_by = f"{self._stop.reason}; no new writes were started"
        return report

    def _audit_failed(self, error: AuditLogError) -> None:
        with self._lock:
            self._audit_error = self._audit_error or error
        self._stop.set("the audit log could not be written")

    def _settled(self, recorder: AttemptRecorder) -> None:
        if recorder.audit_error is not None:
            self._audit_failed(recorder.audit_error)

    def _settle(self, recorder: AttemptRecorder, *outcome: Any, **extra: Any) -> None:
        """The outcome of the write's last attempt recorded (``AttemptRecorder.settle``)."""
        recorder.settle(*outcome, **extra)
        self._settled(recorder)

    def _failed_fatally(self, error: ApiError) -> None:
        if error.run_fatal:
            with self._lock:
                self._fatal = self._fatal or error
            self._stop.set(str(error))

    def _results(self, plan: Plan) -> Iterator[ChangeResult]:
        for change, outcome in ordered_map(
            self._write, plan.changes, self._parallelism, self._stop
        ):
            match outcome:
                case Done(result):
                    yield result
                # NotSent: the run stopped while this write waited for its turn; it never left.
                case NotRun() | Failed(NotSent()):
                    yield ChangeResult(change, WriteOutcome.NOT_STARTED)
                case Failed(error):
                    yield ChangeResult(change, WriteOutcome.failed_by(error), error)

    # -- one invite's write ------------------------------------------------------

    def _write(self, change: InviteChange) -> ChangeResult:
        if self._stop.is_set():
            return ChangeResult(change, WriteOutcome.NOT_STARTED)
        try:
            read = self._client.read_invite(change.id)
        except NotSent:
            return ChangeResult(change, WriteOutcome.NOT_STARTED)
        except ApiError as error:  # nothing was written: the update failed plainly
            self._failed_fatally(error)
            return ChangeResult(change, WriteOutcome.FAILED, error)
        decided = before_write(change, read.invite)
        if isinstance(decided, Moved):
            return ChangeResult(change, WriteOutcome.CONFLICT, moved=decided.fields)
        if isinstance(decided, AlreadyApplied):
            result = ChangeResult(change, WriteOutcome.ALREADY_APPLIED)
        else:
            result = self._update(decided.change, read)
        if decided.resend_owed and result.resend is None:
            return self._owed(result, _held_already())
        return result

    def _update(self, change: InviteChange, read: Read) -> ChangeResult:
        # The audit record of what is sent: the files' values as sent, the server's redacted.
        redacted = change.redacted()
        fields = {
            f: {"before": to_json(redacted.before.get(f)), "after": to_json(v)}
            for f, v in redacted.patch.items()
        }
        recorder = AttemptRecorder(self._audit, change.id, "update", fields)
        try:
            written = self._client.write_invite(
                change.id, change.patch, if_match=read.etag, watch=recorder
            )
            from_get = written.stored is None  # what was stored is then a GET's
            stored = written.stored or self._verify(change.id, written.status, written.request_id)
        except AuditLogError as error:  # an attempt line: that attempt never left
            return self._unlogged(change, recorder, error)
        except PreconditionFailed as error:  # If-Match: it changed since it was read
            if recorder.maybe_done:  # ... by an earlier attempt of this very PATCH, maybe
                return self._refused_after_unknown(change, recorder, error)
            self._settled(recorder)
            return self._refused(change, read, error)
        except ApiError as error:
            return self._write_failed(change, recorder, error)
        return self._checked(
            change, recorder, stored, written.status, written.request_id, from_get=from_get
        )

    def _unlogged(
        self, change: InviteChange, recorder: AttemptRecorder, error: AuditLogError
    ) -> ChangeResult:
        """The audit log refused an attempt's line: that attempt never left."""
        self._audit_failed(error)
        if recorder.sent:  # an earlier attempt did, with no answer that says what it did
            unsent = NotSent(f"not retried: {error}")
            return ChangeResult(change, WriteOutcome.UPDATE_UNKNOWN, unsent)
        return ChangeResult(change, WriteOutcome.NOT_STARTED)

    def _write_failed(
        self, change: InviteChange, recorder: AttemptRecorder, error: ApiError
    ) -> ChangeResult:
        if isinstance(error, GatewayForbidden) and error.outcome_unknown:
            # A gateway's 403 that a read got past: the PATCH may have been written
            # (the gateway refusing its answer). A GET tells.
            return self._refused_after_unknown(change, recorder, error)
        # An answer taken apart after the exchange (another invite's): its outcome is
        # this one's, not recorded yet. The exchange recorded its own failures.
        self._settle(recorder, *said(error))
        if isinstance(error, NotSent) and not recorder.sent:
            return ChangeResult(change, WriteOutcome.NOT_STARTED)
        self._failed_fatally(error)
        return ChangeResult(change, WriteOutcome.failed_by(error), error)

    def _refused(
        self, change: InviteChange, read: Read, refused: PreconditionFailed
    ) -> ChangeResult:
        """A 412: nothing written. The invite read once more (not as the run stops; a
        failed read says nothing): holding what was sent, someone made the change already
        (its re-send owed: whether they e-mailed is unknown); holding what ``read`` held
        (every field this tool knows, and the status), what moved is the ETag alone."""
        conflict = ChangeResult(change, WriteOutcome.CONFLICT, refused)
        if self._stop.is_set():
            return conflict
        try:
            again = self._client.read_invite(change.id).invite
        except ApiError:
            return conflict
        decided = before_write(change, again)
        if isinstance(decided, AlreadyApplied):
            result = ChangeResult(change, WriteOutcome.ALREADY_APPLIED)
            owed = decided.resend_owed
            return self._owed(result, _held_already(refused)) if owed else result
        return replace(conflict, etag_moved_alone=again == read.invite)

    def _refused_after_unknown(
        self, change: InviteChange, recorder: AttemptRecorder, refused: ApiError
    ) -> ChangeResult:
        """A 412 to a retry after an attempt that may have been written (a 504, a timeout):
        that write, if made, changed the ETag the retry carries. It is not "nothing
        written" (its re-send would be dropped unsaid, and the next plan shows no change):
        a GET tells. The platform holding what was sent is the earlier attempt's doing, as
        a retry without If-Match would have found; anything else leaves it unknown. The
        same for a gateway's 403 that was no block on the client (``GatewayForbidden``,
        unconfirmed): the gateway may have refused the answer of a PATCH it let through."""
        if isinstance(refused, PreconditionFailed):
            what = "refused by If-Match after an earlier attempt whose outcome {} unknown"
            done = "that attempt was written"
        else:
            what = "refused by a gateway whose 403 {} no block on the client"
            done = "the gateway let the PATCH through and refused its answer"
        try:
            stored = self._verify(change.id, refused.status, refused.request_id)
            if stored_as_sent(change, stored).diverged:
                raise _Unverified(
                    f"{refused.message}: {what.format('is')}, and the platform does not hold "
                    "what was sent: whether this update was made is unknown",
                    status=refused.status,
                    request_id=refused.request_id,
                )
        except _Unverified as error:
            self._settle(recorder, "unknown", refused.status, refused.request_id, error.message)
            return ChangeResult(change, WriteOutcome.UPDATE_UNKNOWN, error)
        return self._checked(
            change,
            recorder,
            stored,
            refused.status,
            refused.request_id,
            message=f"{what.format('was')}; read back, the platform holds what was sent: {done}",
            from_get=True,
        )

    def _checked(
        self,
        change: InviteChange,
        recorder: AttemptRecorder,
        stored: CurrentInvite,
        status: int | None,
        request_id: str | None,
        message: str | None = None,
        *,
        from_get: bool = False,
    ) -> ChangeResult:
        """The update was written: what was stored against what was sent, then the
        re-send it makes due. ``from_get``: ``stored`` is a GET's, not the PATCH's answer."""
        stored, check, owed = self._as_stored(change, stored, from_get)
        due = owed is None and change.triggers_resend(check.as_sent)
        outcome = WriteOutcome.DIVERGED if check.diverged else WriteOutcome.UPDATED
        self._settle(
            recorder,
            outcome.audit,
            status,
            request_id,
            message,
            stored=_stored_json(check.diverged) if check.diverged else None,
            resend="due" if due else None,
        )
        result = ChangeResult(change, outcome, diverged=check.diverged, noted=check.noted)
        if owed is not None:
            return self._owed(result, owed)
        if not due:
            return result
        recipient = stored.fields.get(RECIPIENT)
        result = replace(result, recipient=recipient if isinstance(recipient, str) else None)
        # The re-send belongs to this invite's write: an interruption lets it finish.
        return self._resend(result)

    def _as_stored(
        self, change: InviteChange, stored: CurrentInvite, from_get: bool
    ) -> tuple[CurrentInvite, StoredCheck, str | None]:
        """What was stored, checked, and why a re-send due is owed (None: it is not). No
        e-mail before a GET shows the fields that trigger it stored as sent: a PATCH's
        answer may echo the request (a platform that lower-cases the address and answers
        with what it was sent). A failed GET leaves the answer to say what was stored."""
        check = stored_as_sent(change, stored)
        if change.triggers_resend(check.as_sent) and not from_get:
            try:
                stored = self._client.read_invite(change.id).invite
            except ApiError as error:
                return stored, check, self._unread(error)
            check = stored_as_sent(change, stored)
        # What the e-mail depends on: the fields that trigger it, and where it goes.
        moved = [
            n for n in check.changed_otherwise if n == RECIPIENT or change.triggers_resend([n])
        ]
        due = change.triggers_resend((*check.as_sent, *check.changed_otherwise))
        return stored, check, _withheld(moved, stored) if moved and due else None

    def _unread(self, error: ApiError) -> str:
        """Why a re-send is owed whose GET failed (or never left: the run is stopping)."""
        if isinstance(error, NotSent):
            return _never_attempted(error.message)
        self._failed_fatally(error)
        return _never_attempted(f"the read that shows where it goes failed: {error}")

    def _verify(self, invite_id: str, status: int | None, request_id: str | None) -> CurrentInvite:
        """What is stored, read back when the PATCH's answer did not say: "the result can
        be verified with GET". A read that fails leaves the write's outcome unknown; the
        error carries the write's answer (``status``, ``request_id``: what the audit log
        records for it), the failed read said in its message."""
        try:
            return self._client.read_invite(invite_id).invite
        except ApiError as error:
            raise _Unverified(
                f"updated, but what was stored cannot be checked: the read back failed: {error}",
                status=status,
                request_id=request_id,
            ) from None

    def _resend(self, result: ChangeResult) -> ChangeResult:
        invite_id = result.change.id
        recorder = AttemptRecorder(self._audit, invite_id, "resend")
        try:
            receipt = self._client.resend_invite(invite_id, watch=recorder)
        except AuditLogError as error:  # no e-mail goes out without its attempt line
            self._audit_failed(error)
            if recorder.sent:  # refused before (a 429), then not sent again
                unsent = NotSent(f"not sent again: {error}")
                return replace(result, resend=ResendOutcome.NOT_RESENT, resend_error=unsent)
            return self._owed(
                result,
                _never_attempted(
                    "not sent: the audit log could not be written, and no write is sent "
                    "without its audit record"
                ),
            )
        except ApiError as error:
            self._settle(recorder, *said(error))
            if isinstance(error, NotSent) and not recorder.sent:
                return self._owed(result, _never_attempted(error.message))
            if error.outcome_unknown:
                return replace(result, resend=ResendOutcome.RESEND_UNKNOWN, resend_error=error)
            # Certainly not made (refused, and not sent again): owed, and the log says so,
            # as for one never attempted; its failed attempt alone reads as "tried".
            self._log_owed(invite_id, f"refused and not sent again: {error}")
            # A 403 or 401 refuses every write after it: no further update is made with its
            # re-send refused again and owed by hand.
            self._failed_fatally(error)
            return replace(result, resend=ResendOutcome.NOT_RESENT, resend_error=error)
        self._settle(recorder, "ok", receipt.status, receipt.request_id)
        return replace(result, resend=ResendOutcome.RESENT)

    def _owed(self, result: ChangeResult, reason: str) -> ChangeResult:
        """A re-send due and not sent by this run, whatever the reason: in the log as a
        `resend_owed` record, and reported with the reason and the way to make it."""
        self._log_owed(result.change.id, reason)
        return replace(result, resend=ResendOutcome.OWED, owed=reason)

    def _log_owed(self, invite_id: str, reason: str) -> None:
        try:
            self._audit.resend_owed(invite_id, reason)
        except AuditLogError as error:
            self._audit_failed(error)


class _Unverified(UnexpectedResponse):
    """A PATCH answered 2xx whose stored values could not be read back: the update may well
    have been made (outcome unknown), and nothing is re-sent."""

    @property
    def outcome_unknown(self) -> bool:
        return True


# Why a re-send is owed (a `resend_owed` record's message; the output adds the command).


def _held_already(refused: ApiError | None = None) -> str:
    how = f"refused ({refused}) and read again, " if refused is not None else ""
    return (
        f"{how}the platform already held the values that re-send it (someone else's "
        "write): whether an invitation went with them is unknown; once you have checked "
        "that none did"
    )


def _never_attempted(why: str) -> str:
    return f"due after the update and never attempted ({why})"


def _withheld(moved: list[str], stored: CurrentInvite) -> str:
    """A re-send withheld because a field it depends on changed otherwise than sent."""
    fields = ", ".join(f"`{n}`" for n in moved)
    email = stored.fields.get(RECIPIENT)
    to = (
        f"the invitation would go to the address it holds, {json_text(redact(email))}"
        if isinstance(email, str)
        else "it holds no e-mail address"
    )
    return (
        f"withheld: the platform stored {fields} otherwise than sent, and {to}; once you "
        "have checked what it holds (and the files hold the platform's form)"
    )


def _stored_json(parts: tuple[StoredOtherwise, ...]) -> dict[str, JsonValue]:
    """A diverged update's parts as the platform stored them, redacted, for the audit log."""
    stored: dict[str, JsonValue] = {}
    for part in parts:
        value = part.stored  # a sub-field's is text
        if value is None or isinstance(value, str):
            stored[part.field] = value if value is None else redact(value)
        else:
            stored[part.field] = to_json(kind_of(part.field.partition(".")[0]).redacted(value))
    return stored


# Before `apply --plan` writes: every invite of the saved plan read again, each change found
# to do, done, or stale (``reconciler.plan.write_check``); one stale change refuses the whole
# plan. Each write then reads its invite once more, right before its PATCH, as every apply
# does (above).


class SavedPlanState(NamedTuple):
    """Where the server stands against a saved plan, change by change."""

    drift: list[str]  # every reason the plan no longer holds; empty when it may be applied
    done: frozenset[str]  # ids of changes whose fields all hold their `after` already


def saved_plan_state(
    plan: Plan,
    base_url: str,
    read: Callable[[str], CurrentInvite],
    parallelism: int | Limiter,
    stop: Stop | None = None,
    invite_urls: dict[str, str] | None = None,
) -> SavedPlanState:
    """Re-read every invite of the plan: each change is to do, done, or stale.

    ``invite_urls``: where this run reads, updates and re-sends (None: the contract's
    paths), which must be where the plan says, as ``base_url`` must be its server.
    When nothing has drifted, the plan's changes take back the server's values it
    shows redacted (``reconciler.plan.write_check``): apply sends what the server holds.
    """
    elsewhere = _elsewhere(plan, base_url, invite_urls)
    if elsewhere:
        return SavedPlanState([elsewhere], frozenset())
    drift: list[str] = []
    done = set()
    by_id = {change.id: change for change in plan.changes}
    restored: dict[str, InviteChange] = {}
    for invite_id, outcome in ordered_map(read, list(by_id), parallelism, stop):
        found = _rechecked(by_id[invite_id], outcome)
        if found.done:
            done.add(invite_id)
        drift += found.drift
        if found.restored is not None:
            restored[invite_id] = found.restored
    if not drift:
        plan.changes = [restored.get(change.id, change) for change in plan.changes]
    return SavedPlanState(drift, frozenset(done))


def _rechecked(change: InviteChange, outcome: Outcome[CurrentInvite, ApiError]) -> Recheck:
    """``change`` against its invite read again; a failed read is drift too."""
    match outcome:
        case Done(current):
            return recheck(change, current)
        case Failed(error):
            where = f"{change.id} ({redact_and_escape(str(change.source))})"
            return Recheck(
                False, [f"{where}: cannot re-read it: {redact_and_escape(str(error))}"], None
            )
    raise ReconcilerError("interrupted while checking the plan; nothing was changed")


def _elsewhere(plan: Plan, base_url: str, invite_urls: dict[str, str] | None) -> str | None:
    """Why this run's requests would not go where the reviewed plan says, or None."""
    if plan.base_url.rstrip("/") != base_url.rstrip("/"):
        planned = redact_and_escape(plan.base_url)
        return f"the plan was made against {planned}, but this run talks to {base_url}"
    if plan.invite_urls != invite_urls:
        # The paths of reconciler.yaml changed since the plan was made: its writes and
        # re-sends would go to other addresses than the ones reviewed (issue 51, row 5).
        return (
            f"the plan's invite paths are {_paths(plan.invite_urls)}, but this run's "
            f"are {_paths(invite_urls)} (reconciler.yaml changed since the plan was made)"
        )
    return None


def _paths(urls: dict[str, str] | None) -> str:
    if urls is None:
        return "the contract's own"
    return ", ".join(f"{kind} {redact_and_escape(url)}" for kind, url in sorted(urls.items()))


# Ctrl-C, SIGTERM and SIGHUP during writes: finish what is in flight, start nothing new.


class GracefulInterrupt:
    """While active, the first signal sets ``stop``; a second Ctrl-C quits at once.

    Only a second SIGINT does: that is a person at the keyboard. A hangup often comes
    twice (the shell forwards SIGHUP to its jobs, and the kernel sends its own to the
    terminal's foreground group when the shell exits), and a supervisor or a script's
    trap may repeat SIGTERM; quitting on the repeat would drop, unsaid, the re-send of a
    write in flight (issue 33, row 6). SIGKILL remains for whoever must end it now.
    """

    def __init__(self, what: str, stop: Stop | None = None) -> None:
        self.stop = stop or Stop()
        self._what = what
        self._previous: dict[int, Any] = {}

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self.stop.is_set():
            if signum != signal.SIGINT:
                return  # already stopping: a repeated hangup or termination changes nothing
            _say(
                f"\nSecond interrupt: quitting now. {self._what.capitalize()} in flight may "
                "have completed; run `reconcile plan` to see where things stand, and look "
                'in the audit log for re-sends due and never attempted (README, "Reading '
                'the audit log").\n'
            )
            os._exit(1)
        self.stop.set("interrupted")
        _say(
            f"\nInterrupted: {self._what} in flight will finish, no new ones start "
            "(interrupt again to quit at once).\n"
        )

    def __enter__(self) -> GracefulInterrupt:
        if threading.current_thread() is threading.main_thread():
            # SIGHUP: the terminal closed, the SSH session dropped. Dying at once would
            # leave an update made and its re-send neither sent nor said to be owed.
            for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
                self._previous[signum] = signal.signal(signum, self._handle)
        return self

    def __exit__(self, *exc: object) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)


def _say(text: str) -> None:
    # With stderr closed (2>&-) sys.stderr is None: the interrupt still works, unannounced.
    # On a terminal that hung up a write fails (EIO): raised from a signal handler, that
    # would unwind whatever the main thread was doing.
    if sys.stderr is not None:
        with contextlib.suppress(OSError, ValueError):
            sys.stderr.write(text)
            sys.stderr.flush()
