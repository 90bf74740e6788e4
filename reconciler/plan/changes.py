"""The records a plan is made of: one per invite that changes, cannot change, or failed.

Values are typed (``reconciler.model.values``); a record's JSON form is the saved
plan's business (``reconciler.plan.saved``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from dataclasses import field as dataclass_field
from typing import NamedTuple

from reconciler.model.fields import kind_of
from reconciler.model.invite import SourceLocation
from reconciler.model.kinds import FieldDelta
from reconciler.model.values import Contact, Fields, FieldValue, HeldFields, IdentifierSet
from reconciler.safetext import redact


class FieldChange(NamedTuple):
    field: str
    before: FieldValue | None
    after: FieldValue
    # What differs inside the field (see field_changes); None: worked out when asked.
    delta: FieldDelta | None = None

    def _inside(self) -> FieldDelta:
        if self.delta is not None:
            return self.delta
        return kind_of(self.field).delta(self.before, self.after)

    @property
    def added(self) -> list[str]:
        return list(self._inside().added)

    @property
    def removed(self) -> list[str]:
        return list(self._inside().removed)

    @property
    def is_set(self) -> bool:
        return isinstance(self.after, IdentifierSet)

    def sub_changes(self) -> list[tuple[str, str | None, str | None]]:
        """For an object field: (sub-field, before, after) of what differs."""
        return list(self._inside().sub_changes)

    @property
    def is_object(self) -> bool:
        return isinstance(self.after, Contact)


def field_changes(before: HeldFields, after: Fields) -> list[FieldChange]:
    """Each field of ``after`` beside its value in ``before``, with what differs inside it."""
    return [
        FieldChange(name, before.get(name), value, kind_of(name).delta(before.get(name), value))
        for name, value in after.items()
    ]


def redacted_fields(fields: HeldFields) -> HeldFields:
    """What the server said, as every output shows it: any secret of this run redacted."""
    return {
        name: None if value is None else kind_of(name).redacted(value)
        for name, value in fields.items()
    }


@dataclass(frozen=True)
class InviteChange:
    id: str
    source: SourceLocation
    name: str | None
    before: HeldFields  # the server's values of exactly the patched fields
    patch: Fields
    resend: bool  # after the update, the invitation is e-mailed again
    # Where that e-mail goes: the invite's address once updated (None: not known).
    recipient: str | None = None
    # A plan of a change (--changed-since REF): each patched field the platform changed
    # since REF, with its value at REF. apply leaves the invite alone unless
    # --force-conflicts.
    conflicts: Fields = dataclass_field(default_factory=dict)

    @property
    def after(self) -> Fields:
        return self.patch

    @property
    def resend_label(self) -> str:
        """How every plan format says that this change e-mails the business."""
        to = f" to {self.recipient}" if self.recipient else ""
        return f"e-mails the invitation again{to}"

    @property
    def field_changes(self) -> list[FieldChange]:
        return field_changes(self.before, self.patch)

    def redacted(self) -> InviteChange:
        """This change as every output shows it: what the server said redacted, nothing else.

        ``before`` is the server's. In ``patch``, an object field keeps the server's
        sub-fields the files leave unmanaged (the API replaces an object whole): those,
        and any sub-field the files set to what the server holds, are the server's too.
        What the files say is kept as written: it is what apply sends. The recipient
        may be the server's address (when the update leaves the e-mail alone).
        """
        patch = {
            name: kind_of(name).server_parts_redacted(value, self.before.get(name))
            for name, value in self.patch.items()
        }
        recipient = None if self.recipient is None else redact(self.recipient)
        return replace(self, before=redacted_fields(self.before), patch=patch, recipient=recipient)


@dataclass(frozen=True)
class OutsideChange:
    """Fields that differ on the platform but that the change planned did not touch.

    Listed, never written: a full plan (no --changed-since) shows and fixes them.
    """

    id: str
    source: SourceLocation
    name: str | None
    before: HeldFields  # the server's values of the differing fields
    after: Fields  # what the files say

    @property
    def field_changes(self) -> list[FieldChange]:
        return field_changes(self.before, self.after)

    def redacted(self) -> OutsideChange:
        """As every output shows it: the server's values redacted, the files' as written."""
        return replace(self, before=redacted_fields(self.before))


@dataclass(frozen=True)
class NotUpdatable:
    """An invite that differs from git but is no longer pending: never patched."""

    id: str
    source: SourceLocation
    name: str | None
    status: str
    before: HeldFields  # the server's values of the differing fields
    after: Fields  # what the files ask for

    @property
    def field_changes(self) -> list[FieldChange]:
        return field_changes(self.before, self.after)

    def redacted(self) -> NotUpdatable:
        """As every output shows it: the server's values and status redacted."""
        status = redact(self.status)
        return replace(self, status=status, before=redacted_fields(self.before))

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
    source: SourceLocation | None  # the entry; None when the entry is not what to fix
    message: str  # HTTP status, the server's message and requestId, as ApiError says them
    status: int | None = None
    request_id: str | None = None
    # What to do about it, when the HTTP status alone would advise wrongly (a re-send
    # that may have gone out must never be advised to be tried again). Never saved.
    advice: str | None = dataclass_field(default=None, compare=False)

    def redacted(self) -> FailedInvite:
        """As every output shows it: the server's message and requestId redacted."""
        request_id = None if self.request_id is None else redact(self.request_id)
        return replace(self, message=redact(self.message), request_id=request_id)
