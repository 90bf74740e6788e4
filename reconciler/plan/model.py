"""The plan: what apply would change, made of per-invite changes and failed invites.

Computing a plan is separate from showing it (reconciler.output), from saving
it (reconciler.plan.saved) and from carrying it out (reconciler.apply.applier). Each
record owns its JSON form; ``Plan.to_document`` is the saved plan (schemas/plan.schema.json).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, NamedTuple

from reconciler.api.concurrency import Outcome
from reconciler.api.exceptions import (
    ApiError,
    AuthenticationFailed,
    PermissionDenied,
    RateLimited,
    ServerError,
    TransportError,
)
from reconciler.desired.state import DesiredInvite
from reconciler.errors import ReconcilerError
from reconciler.invite import resend_due, values_equal
from reconciler.plan.changes import FailedInvite, InviteChange, NotUpdatable, OutOfScope
from reconciler.plan.compare import compare_invite, managed_part
from reconciler.safetext import redact, redact_strings
from reconciler.wording import plural

if TYPE_CHECKING:
    from reconciler.api.client import CurrentInvite
    from reconciler.desired.changed_since import Scope

__all__ = [
    "FORMAT_VERSION",
    "RUN_FATAL_ERRORS",
    "Plan",
    "ScopedTo",
    "Summary",
    "TooManyResends",
    "TooMuchChange",
    "make_plan",
]

FORMAT_VERSION = 2  # 2: signed, with `not_updatable`
READABLE_FORMAT_VERSIONS = (1, 2)  # a version 1 plan can be shown, never applied (unsigned)

# Errors that would repeat for every invite: stop the run rather than list them all.
RUN_FATAL_ERRORS = (
    AuthenticationFailed,
    PermissionDenied,
    TransportError,
    ServerError,
    RateLimited,
)


class TooMuchChange(ReconcilerError):
    """The plan updates more invites than max_changes allows (octoDNS's TooMuchChange)."""

    def __init__(self, changes: int, limit: int, *, saved_limit: bool = False) -> None:
        # A saved plan's own limit wins over a looser one given to apply: say where it came from.
        advice = (
            f"This plan was made with --max-changes {limit}; make a new plan with a higher limit"
            if saved_limit
            else "Split the change or raise the limit"
        )
        self.reason = (
            f"the plan updates {plural(changes, 'invite')}, more than "
            f"max_changes ({limit}). {advice}."
        )
        super().__init__(f"refusing to apply, nothing was changed: {self.reason}")


class TooManyResends(ReconcilerError):
    """The plan e-mails more invitations than max_resends allows: the irreversible part."""

    def __init__(self, resends: int, limit: int, *, saved_limit: bool = False) -> None:
        advice = (
            f"This plan was made with --max-resends {limit}; make a new plan with a higher limit"
            if saved_limit
            else "Split the change, use resendOnChange's list form, or raise the limit"
        )
        self.reason = (
            f"the plan e-mails {plural(resends, 'invitation')} again, more than "
            f"max_resends ({limit}). {advice}."
        )
        super().__init__(f"refusing to apply, nothing was changed: {self.reason}")


class Summary(NamedTuple):
    update: int
    unchanged: int
    failed: int
    resend: int = 0  # of the updates, those that e-mail the invitation again

    def to_json(self) -> dict[str, int]:
        # The saved plan's names (cli.md): a failed invite is an "error" there.
        return {
            "update": self.update,
            "resend": self.resend,
            "unchanged": self.unchanged,
            "error": self.failed,
        }


@dataclass
class Plan:
    base_url: str
    changes: list[InviteChange] = field(default_factory=list)
    failed: list[FailedInvite] = field(default_factory=list)  # saved as `errors`
    unchanged: int = 0
    created_at: str = field(default_factory=lambda: _now())
    max_changes: int | None = None
    max_resends: int | None = None
    not_updatable: list[NotUpdatable] = field(default_factory=list)
    format_version: int = FORMAT_VERSION
    signature: str | None = None  # "hmac-sha256:<hex>", set by reconciler.plan.signature
    # Loaded from a file: its own max_changes is the limit it was reviewed under.
    saved: bool = field(default=False, compare=False)
    # Scoped to a change (--changed-since REF): the REF, fields the platform differs in
    # that the change did not touch, and the invites not read because it did not touch them.
    changed_since: str | None = None
    out_of_scope: list[OutOfScope] = field(default_factory=list)
    not_read: int | None = None

    @property
    def conflicts(self) -> list[InviteChange]:
        """Changes to fields the platform changed since REF: apply leaves them alone."""
        return [change for change in self.changes if change.conflicts]

    def without_conflicts(self) -> Plan:
        """The plan apply carries out unless --force-conflicts: no invite in conflict."""
        kept = [change for change in self.changes if not change.conflicts]
        return replace(self, changes=kept)

    @property
    def summary(self) -> Summary:
        return Summary(len(self.changes), self.unchanged, len(self.failed), self.resends)

    @property
    def resends(self) -> int:
        """How many invitations applying this plan e-mails again."""
        return sum(1 for change in self.changes if change.resend)

    @property
    def has_changes(self) -> bool:
        return bool(self.changes)

    def too_much_change(
        self, limit: int | None = None, resend_limit: int | None = None
    ) -> TooMuchChange | TooManyResends | None:
        """Why apply would refuse this plan under max_changes or max_resends.

        Each limit is the plan's own or the one given, whichever is lower: a saved plan
        keeps the limits it was reviewed under; a run may add stricter ones.
        """
        binding = self._binding(self.max_changes, limit, len(self.changes))
        if binding is not None:
            return TooMuchChange(len(self.changes), binding[0], saved_limit=binding[1])
        binding = self._binding(self.max_resends, resend_limit, self.resends)
        if binding is not None:
            return TooManyResends(self.resends, binding[0], saved_limit=binding[1])
        return None

    def _binding(self, own: int | None, given: int | None, count: int) -> tuple[int, bool] | None:
        """The limit ``count`` passes and whether it is a saved plan's own; None if none."""
        limits = [n for n in (own, given) if n is not None]
        if not limits or count <= min(limits):
            return None
        binding = min(limits)
        own_limit = binding == own and (given is None or given >= binding)
        return binding, self.saved and own_limit

    def raise_if_unsafe(self, limit: int | None = None, resend_limit: int | None = None) -> None:
        """The one home of the max_changes and max_resends rules; raises their refusal."""
        problem = self.too_much_change(limit, resend_limit)
        if problem is not None:
            raise problem

    def digest(self) -> str:
        """A hash of what the plan would write, for the audit log."""
        writes = [[c.id, c.before, c.patch, c.resend] for c in self.changes]
        canonical = json.dumps([self.base_url, writes], sort_keys=True, ensure_ascii=False)
        # surrogatepass: a server can send a lone surrogate ("\ud800"); it is still hashed.
        return "sha256:" + hashlib.sha256(canonical.encode("utf-8", "surrogatepass")).hexdigest()

    def document_parts(self) -> list[tuple[str, Any]]:
        """The saved plan document, field by field, for writing or signing in pieces.

        ``changes``, ``not_updatable`` and ``errors`` are generators of records, made and
        redacted one at a time: a plan of 200,000 changes is never a second time in memory.
        A server can echo the secret or a token inside an invite's values; the document
        is what is signed, saved and printed, so no part the server said holds one (each
        record's ``shown``). What the files say is kept as written: apply sends it.
        """
        parts: list[tuple[str, Any]] = [
            ("format_version", self.format_version),
            ("created_at", redact_strings(self.created_at)),
            ("base_url", redact_strings(self.base_url)),
            ("max_changes", self.max_changes),
            ("max_resends", self.max_resends),
            ("changes", (c.shown().to_json() for c in self.changes)),
            ("not_updatable", (n.shown().to_json() for n in self.not_updatable)),
            ("errors", (f.shown().to_json() for f in self.failed)),
            ("summary", self._summary_json()),
        ]
        if self.changed_since is not None:  # only then: other plans read as they always have
            parts[-1:-1] = [
                ("changed_since", redact_strings(self.changed_since)),
                ("out_of_scope", (o.shown().to_json() for o in self.out_of_scope)),
                ("not_read", self.not_read),
            ]
        if self.signature is not None:
            parts.append(("signature", redact_strings(self.signature)))
        return parts

    def _summary_json(self) -> dict[str, int]:
        summary = self.summary.to_json()
        if self.changed_since is not None:
            summary["conflict"] = len(self.conflicts)
            summary["out_of_scope"] = len(self.out_of_scope)
            summary["not_read"] = self.not_read or 0
        return summary

    def to_document(self) -> dict[str, Any]:
        return {
            key: list(value) if isinstance(value, Iterator) else value
            for key, value in self.document_parts()
        }

    @classmethod
    def from_document(cls, document: dict[str, Any]) -> Plan:
        """A plan from a document already checked against schemas/plan.schema.json."""
        return cls(
            base_url=document["base_url"],
            created_at=document["created_at"],
            max_changes=document.get("max_changes"),
            max_resends=document.get("max_resends"),
            unchanged=document["summary"]["unchanged"],
            changes=[InviteChange.from_json(c) for c in document["changes"]],
            failed=[FailedInvite.from_json(e) for e in document["errors"]],
            not_updatable=[NotUpdatable.from_json(n) for n in document.get("not_updatable", [])],
            format_version=document["format_version"],
            signature=document.get("signature"),
            saved=True,
            changed_since=document.get("changed_since"),
            out_of_scope=[OutOfScope.from_json(o) for o in document.get("out_of_scope", [])],
            not_read=document.get("not_read"),
        )


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def stop_if_run_fatal(error: ApiError) -> None:
    """Raise for an error that would repeat for every invite; per-invite ones pass."""
    if isinstance(error, RUN_FATAL_ERRORS):
        raise ReconcilerError(f"stopped reading invites: {error}")


def make_plan(
    base_url: str,
    readings: Iterable[tuple[DesiredInvite, Outcome[CurrentInvite]]],
    max_changes: int | None = None,
    max_resends: int | None = None,
    scope: ScopedTo | None = None,
) -> Plan:
    """Compare each desired invite with the server's copy as the readings arrive.

    Only changes, failed invites and counts are kept: a server copy is dropped as soon
    as it has been compared, so memory follows the changes, not the invites. With
    ``scope``, each invite is planned only in the fields the change touched.
    """
    plan = Plan(base_url=base_url, max_changes=max_changes, max_resends=max_resends)
    if scope is not None:
        plan.changed_since, plan.not_read = scope.ref, scope.not_read
    for desired, outcome in readings:
        if not outcome.ran:
            raise ReconcilerError("interrupted while reading invites; nothing was changed")
        if outcome.error is not None:
            stop_if_run_fatal(outcome.error)
            plan.failed.append(_failed(desired, outcome.error))
            continue
        assert outcome.value is not None
        touched = scope.invites.get(desired.id) if scope is not None else None
        _place(plan, desired, outcome.value, touched)
    return plan


class ScopedTo(NamedTuple):
    """A plan scoped to a change: ``--changed-since REF``, field by field."""

    ref: str
    invites: dict[str, Scope]  # what the change did to each invite read
    not_read: int  # invites the change did not touch, so not read


def _place(
    plan: Plan, desired: DesiredInvite, current: CurrentInvite, scope: Scope | None = None
) -> None:
    wanted_fields = desired.fields  # built on each access: read once
    patch = compare_invite(wanted_fields, current.fields)
    conflicts: dict[str, object] = {}
    if scope is not None and patch:
        patch, conflicts = _scoped(plan, desired, current, scope, patch)
    if not patch:
        plan.unchanged += 1
        return
    source = str(desired.source)
    before = {f: current.fields.get(f) for f in patch}
    if current.is_pending:
        resend = resend_due(desired.resend_on_change, patch)
        change = InviteChange(
            desired.id,
            source,
            desired.name,
            before,
            patch,
            resend,
            recipient=_recipient(patch, current) if resend else None,
            conflicts=conflicts,
        )
        plan.changes.append(change)
        return
    shown = {f: managed_part(f, wanted_fields[f], before[f]) for f in patch}
    wanted = {f: wanted_fields[f] for f in patch}
    status = current.status or "in an unknown state"
    plan.not_updatable.append(NotUpdatable(desired.id, source, desired.name, status, shown, wanted))


def _scoped(
    plan: Plan,
    desired: DesiredInvite,
    current: CurrentInvite,
    scope: Scope,
    patch: dict[str, Any],
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The part of ``patch`` the change touched, and its conflicts; the rest is listed.

    A touched field the platform holds at REF's value is an ordinary change; one it
    holds at the new value is not in ``patch`` at all; anything else is a conflict:
    changed on the platform since REF. A field new to the entry (or a new entry) has
    no value at REF: an ordinary change.
    """
    wanted = desired.fields
    at_ref = scope.at_ref or {}
    conflicts = {}
    for name in patch:
        if name in scope.fields and name in at_ref:
            held = managed_part(name, at_ref[name], current.fields.get(name))
            if not values_equal(name, at_ref[name], held):
                conflicts[name] = at_ref[name]
    untouched = {f: v for f, v in patch.items() if f not in scope.fields}
    if untouched:
        shown = {f: managed_part(f, wanted[f], current.fields.get(f)) for f in untouched}
        after = {f: wanted[f] for f in untouched}
        plan.out_of_scope.append(
            OutOfScope(desired.id, str(desired.source), desired.name, shown, after)
        )
    return {f: v for f, v in patch.items() if f in scope.fields}, conflicts


def _recipient(patch: dict[str, Any], current: CurrentInvite) -> str | None:
    """The address the invitation goes to once the update is made."""
    email = patch.get("email", current.fields.get("email"))
    return email if isinstance(email, str) else None


def _failed(desired: DesiredInvite, error: ApiError) -> FailedInvite:
    message = redact(str(error))
    return FailedInvite(desired.id, str(desired.source), message, error.status, error.request_id)
