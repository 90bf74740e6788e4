"""The records a plan is made of: one per invite that changes, cannot change, or failed.

A record's JSON form is the saved plan's business (``reconciler.plan.saved``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from dataclasses import field as dataclass_field
from typing import Any, NamedTuple

from reconciler.invite import OBJECT_FIELDS, SET_FIELDS
from reconciler.plan.compare import NO_DELTA, FieldDelta, field_deltas
from reconciler.safetext import redact, redact_strings


class FieldChange(NamedTuple):
    field: str
    before: Any
    after: Any
    # What differs inside the field, from the invite's one DeepDiff (see field_changes);
    # None: worked out for this field alone when asked.
    delta: FieldDelta | None = None

    def _inside(self) -> FieldDelta:
        if self.delta is not None:
            return self.delta
        return field_deltas({self.field: self.before}, {self.field: self.after}).get(
            self.field, NO_DELTA
        )

    @property
    def added(self) -> list[Any]:
        return list(self._inside().added)

    @property
    def removed(self) -> list[Any]:
        return list(self._inside().removed)

    @property
    def is_set(self) -> bool:
        return self.field in SET_FIELDS and isinstance(self.after, list)

    def sub_changes(self) -> list[tuple[str, Any, Any]]:
        """For an object field: (sub-field, before, after) of what differs."""
        return list(self._inside().sub_changes)

    @property
    def is_object(self) -> bool:
        return self.field in OBJECT_FIELDS and isinstance(self.after, dict)


def server_parts_redacted(field: str, value: Any, before: Any) -> Any:
    """A patched value with its server-held parts redacted: an object's sub-fields that
    hold what the server holds (unmanaged ones kept on PATCH, or equal ones)."""
    if field not in OBJECT_FIELDS or not isinstance(value, dict) or not isinstance(before, dict):
        return value
    # Keys too: a server's unmanaged sub-field may be named after what it echoes. The
    # files' own sub-fields (name, email, phone) are too short to hold any secret.
    return {
        redact(k): redact_strings(v) if k in before and before[k] == v else v
        for k, v in value.items()
    }


def _field_changes(before: dict[str, Any], after: dict[str, Any]) -> list[FieldChange]:
    deltas = field_deltas(before, after)  # one DeepDiff for the whole invite
    return [FieldChange(f, before.get(f), v, deltas.get(f)) for f, v in after.items()]


@dataclass(frozen=True)
class InviteChange:
    id: str
    source: str
    name: str | None
    before: dict[str, Any]  # the server's values of exactly the patched fields
    patch: dict[str, Any]
    resend: bool  # after the update, the invitation is e-mailed again
    # Where that e-mail goes: the invite's address once updated (None: not known).
    recipient: str | None = None
    # A plan scoped to a change (--changed-since REF): each patched field the platform
    # changed since REF, with its value at REF. apply leaves the invite alone unless
    # --force-conflicts.
    conflicts: dict[str, Any] = dataclass_field(default_factory=dict)

    @property
    def after(self) -> dict[str, Any]:
        return self.patch

    @property
    def resend_label(self) -> str:
        """How every plan format says that this change e-mails the business."""
        to = f" to {self.recipient}" if self.recipient else ""
        return f"e-mails the invitation again{to}"

    @property
    def field_changes(self) -> list[FieldChange]:
        return _field_changes(self.before, self.patch)

    def shown(self) -> InviteChange:
        """This change as every output shows it: what the server said redacted, nothing else.

        ``before`` is the server's. In ``patch``, an object field keeps the server's
        sub-fields the files leave unmanaged (the API replaces an object whole): those,
        and any sub-field the files set to what the server holds, are the server's too.
        What the files say is kept as written: it is what apply sends. The recipient
        may be the server's address (when the update leaves the e-mail alone).
        """
        patch = {f: server_parts_redacted(f, v, self.before.get(f)) for f, v in self.patch.items()}
        recipient = None if self.recipient is None else redact(self.recipient)
        return replace(self, before=redact_strings(self.before), patch=patch, recipient=recipient)


@dataclass(frozen=True)
class OutsideChange:
    """Fields that differ on the platform but that the change planned did not touch.

    Listed, never written: a full plan (no --changed-since) shows and fixes them.
    """

    id: str
    source: str
    name: str | None
    before: dict[str, Any]  # the server's values of the differing fields
    after: dict[str, Any]  # what the files say

    @property
    def field_changes(self) -> list[FieldChange]:
        return _field_changes(self.before, self.after)

    def shown(self) -> OutsideChange:
        """As every output shows it: the server's values redacted, the files' as written."""
        return replace(self, before=redact_strings(self.before))


@dataclass(frozen=True)
class NotUpdatable:
    """An invite that differs from git but is no longer pending: never patched."""

    id: str
    source: str
    name: str | None
    status: str
    before: dict[str, Any]  # the server's values of the differing fields
    after: dict[str, Any]  # what the files ask for

    @property
    def field_changes(self) -> list[FieldChange]:
        return _field_changes(self.before, self.after)

    def shown(self) -> NotUpdatable:
        """As every output shows it: the server's values and status redacted."""
        status = redact(self.status)
        return replace(self, status=status, before=redact_strings(self.before))

    @property
    def fix(self) -> str:
        return (
            f"remove it from {self.source}, or bring the file in line with "
            f"`reconcile export {self.id}`"
        )


@dataclass(frozen=True)
class FailedInvite:
    """An invite the run could not read, update or re-send: the plan's ``errors``."""

    id: str
    source: str | None  # FILE:LINE of the entry; None when the entry is not what to fix
    message: str  # HTTP status, the server's message and requestId, as ApiError says them
    status: int | None = None
    request_id: str | None = None
    # What to do about it, when the HTTP status alone would advise wrongly (a re-send
    # that may have gone out must never be advised to be tried again). Never saved.
    advice: str | None = dataclass_field(default=None, compare=False)

    def shown(self) -> FailedInvite:
        """As every output shows it: the server's message and requestId redacted."""
        request_id = None if self.request_id is None else redact(self.request_id)
        return replace(self, message=redact(self.message), request_id=request_id)
