"""The plan: what apply would change, made of per-invite changes and errors.

Computing a plan is separate from showing it (reconciler.render) and from
carrying it out (reconciler.apply).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, NamedTuple

from reconciler.api.client import CurrentInvite
from reconciler.api.errors import (
    ApiError,
    AuthenticationFailed,
    PermissionDenied,
    RateLimited,
    ServerError,
    TransportError,
)
from reconciler.compare import OBJECT_FIELDS, SET_FIELDS, compare_invite
from reconciler.concurrency import Outcome
from reconciler.desired import DesiredInvite
from reconciler.errors import ReconcilerError

FORMAT_VERSION = 1

# Errors that would repeat for every invite: stop the run rather than list them all.
RUN_FATAL_ERRORS = (
    AuthenticationFailed,
    PermissionDenied,
    TransportError,
    ServerError,
    RateLimited,
)


class FieldChange(NamedTuple):
    field: str
    before: Any
    after: Any

    @property
    def added(self) -> list[Any]:
        return _set_difference(self.after, self.before)

    @property
    def removed(self) -> list[Any]:
        return _set_difference(self.before, self.after)

    @property
    def is_set(self) -> bool:
        return self.field in SET_FIELDS and isinstance(self.after, list)

    def sub_changes(self) -> list[tuple[str, Any, Any]]:
        """For an object field: (sub-field, before, after) of what differs."""
        before = self.before if isinstance(self.before, dict) else {}
        after = self.after if isinstance(self.after, dict) else {}
        keys = list(dict.fromkeys([*after, *before]))
        return [(k, before.get(k), after.get(k)) for k in keys if before.get(k) != after.get(k)]

    @property
    def is_object(self) -> bool:
        return self.field in OBJECT_FIELDS and isinstance(self.after, dict)


def _set_difference(a: Any, b: Any) -> list[Any]:
    b_items = b if isinstance(b, list) else []
    return [x for x in (a if isinstance(a, list) else []) if x not in b_items]


@dataclass(frozen=True)
class InviteChange:
    id: str
    source: str
    name: str | None
    before: dict[str, Any]  # the server's values of exactly the patched fields
    patch: dict[str, Any]
    resend: bool

    @property
    def after(self) -> dict[str, Any]:
        return self.patch

    @property
    def field_changes(self) -> list[FieldChange]:
        return [FieldChange(f, self.before.get(f), v) for f, v in self.patch.items()]


@dataclass(frozen=True)
class InviteProblem:
    id: str
    source: str
    message: str
    status: int | None = None
    request_id: str | None = None


class Summary(NamedTuple):
    update: int
    unchanged: int
    error: int


@dataclass
class Plan:
    base_url: str
    changes: list[InviteChange] = field(default_factory=list)
    errors: list[InviteProblem] = field(default_factory=list)
    unchanged: int = 0
    created_at: str = field(default_factory=lambda: _now())
    max_changes: int | None = None

    @property
    def summary(self) -> Summary:
        return Summary(len(self.changes), self.unchanged, len(self.errors))

    @property
    def has_changes(self) -> bool:
        return bool(self.changes)

    @property
    def over_max_changes(self) -> bool:
        return self.max_changes is not None and len(self.changes) > self.max_changes

    def digest(self) -> str:
        """A hash of what the plan would write, for the audit log."""
        writes = [[c.id, c.before, c.patch, c.resend] for c in self.changes]
        canonical = json.dumps([self.base_url, writes], sort_keys=True, ensure_ascii=False)
        return "sha256:" + hashlib.sha256(canonical.encode("utf-8")).hexdigest()

    def to_document(self) -> dict[str, Any]:
        summary = self.summary
        return {
            "format_version": FORMAT_VERSION,
            "created_at": self.created_at,
            "base_url": self.base_url,
            "max_changes": self.max_changes,
            "changes": [
                {
                    "id": c.id,
                    "name": c.name,
                    "source": c.source,
                    "before": c.before,
                    "after": c.after,
                    "patch": c.patch,
                    "resend": c.resend,
                }
                for c in self.changes
            ],
            "errors": [
                {
                    "id": e.id,
                    "source": e.source,
                    "message": e.message,
                    "status": e.status,
                    "request_id": e.request_id,
                }
                for e in self.errors
            ],
            "summary": {
                "update": summary.update,
                "unchanged": summary.unchanged,
                "error": summary.error,
            },
        }

    @classmethod
    def from_document(cls, document: dict[str, Any]) -> Plan:
        """A plan from a document already checked against schemas/plan.schema.json."""
        return cls(
            base_url=document["base_url"],
            created_at=document["created_at"],
            max_changes=document.get("max_changes"),
            unchanged=document["summary"]["unchanged"],
            changes=[
                InviteChange(
                    id=c["id"],
                    source=c["source"],
                    name=c.get("name"),
                    before={k: c["before"].get(k) for k in c["patch"]},
                    patch=c["patch"],
                    resend=c["resend"],
                )
                for c in document["changes"]
            ],
            errors=[
                InviteProblem(
                    e["id"], e["source"], e["message"], e.get("status"), e.get("request_id")
                )
                for e in document["errors"]
            ],
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
) -> Plan:
    """Compare each desired invite with the server's copy as the readings arrive."""
    plan = Plan(base_url=base_url, max_changes=max_changes)
    for desired, outcome in readings:
        source = str(desired.source)
        if not outcome.ran:
            raise ReconcilerError("interrupted while reading invites; nothing was changed")
        if outcome.error is not None:
            stop_if_run_fatal(outcome.error)
            plan.errors.append(_problem(desired, source, outcome.error))
            continue
        current = outcome.value
        assert current is not None
        patch = compare_invite(desired.fields, current.fields)
        if not patch:
            plan.unchanged += 1
        elif not current.is_pending:
            plan.errors.append(
                InviteProblem(
                    desired.id,
                    source,
                    f"invite is {current.status or 'in an unknown state'}, not pending, so it "
                    f"can no longer be updated; differing: {', '.join(patch)}",
                )
            )
        else:
            before = {f: current.fields.get(f) for f in patch}
            plan.changes.append(
                InviteChange(
                    desired.id, source, desired.name, before, patch, desired.resend_on_change
                )
            )
    return plan


def _problem(desired: DesiredInvite, source: str, error: ApiError) -> InviteProblem:
    return InviteProblem(desired.id, source, str(error), error.status, error.request_id)
