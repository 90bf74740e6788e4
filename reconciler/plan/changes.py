"""The records a plan is made of: one per invite that changes, cannot change, or failed.

Values are typed (``reconciler.model.values``); a record's JSON form is the saved
plan's business (``reconciler.plan.saved``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
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
    # Of an object field the PATCH replaces whole: the sub-fields it carries from the
    # platform because the files do not manage them (a contact's phone). Shown in every
    # plan format, checked before the write like the rest.
    kept: Mapping[str, tuple[str, ...]] = dataclass_field(default_factory=dict)
    # The fields whose update, stored as sent, re-sends the invitation (resendOnChange's
    # list form); None: any of them (`true`).
    resend_on: tuple[str, ...] | None = None

    def triggers_resend(self, stored_as_sent: Iterable[str]) -> bool:
        """Whether an update whose fields ``stored_as_sent`` were stored as sent re-sends:
        a field stored otherwise (or not written) never triggers it."""
        if not self.resend:
            return False
        return any(self.resend_on is None or name in self.resend_on for name in stored_as_sent)

    def kept_values(self, name: str) -> list[tuple[str, str | None]]:
        """(sub-field, value) of each sub-field the PATCH of ``name`` carries from the platform."""
        value = self.patch.get(name)
        if not isinstance(value, Contact):
            return []
        return [(sub, value.get(sub)) for sub in self.kept.get(name, ())]

    @property
    def kept_riding_along(self) -> list[tuple[str, str]]:
        """(field, sub-field) kept from the platform while the contact's name or e-mail
        changes: the new contact keeps the previous one's value of it."""
        riding: list[tuple[str, str]] = []
        for name, subs in self.kept.items():
            before, after = self.before.get(name), self.patch.get(name)
            if not subs or not isinstance(after, Contact):
                continue
            held = before if isinstance(before, Contact) else Contact()
            if any(held.get(key) != after.get(key) for key in ("name", "email")):
                riding.extend((name, sub) for sub in subs)
        return riding

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
        kept = {name: tuple(map(redact, subs)) for name, subs in self.kept.items()}
        return replace(
            self, before=redacted_fields(self.before), patch=patch, recipient=recipient, kept=kept
        )


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
