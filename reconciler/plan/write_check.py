"""What a fresh copy of an invite means for its change: before the PATCH, and after it.

Pure: the reads and writes are apply's (``reconciler.apply.applier``). Equality is
the fields' kinds' (``reconciler.model.kinds``): sets as sets, text in NFC.

Before the write (``before_write``), each field the PATCH carries (an object's
sub-fields kept from the platform included: the PATCH replaces it whole) is
compared with the copy just read: at the value wanted, it is left out of the
PATCH; at the value the plan was made from, it is written; anything else is a
conflict, and nothing is written to the invite. A PATCH so never puts back a
value older than the platform's.

After the write (``stored_as_sent``), the one home of the rule "which fields were
stored as sent": a field the files manage stored otherwise has diverged; a kept
sub-field the platform reformatted is noted. Only fields stored as sent may
trigger a re-send (``InviteChange.triggers_resend``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import NamedTuple, TypeAlias

from reconciler.model.fields import kind_of
from reconciler.model.invite import CurrentInvite
from reconciler.model.values import Contact, FieldValue
from reconciler.plan.changes import InviteChange


class MovedField(NamedTuple):
    """A field the PATCH carries that holds neither the planned nor the wanted value."""

    field: str
    planned: FieldValue | None  # the value the plan was made from (`before`)
    now: FieldValue | None  # what the platform holds now
    wanted: FieldValue  # what the PATCH would send


@dataclass(frozen=True)
class Write:
    """Write ``change``: the planned change without the fields already at their value."""

    change: InviteChange


@dataclass(frozen=True)
class AlreadyApplied:
    """Every field already holds the value wanted: nothing to send."""


@dataclass(frozen=True)
class Moved:
    """Changed on the platform since the plan was shown: nothing is written."""

    fields: tuple[MovedField, ...]


BeforeWrite: TypeAlias = Write | AlreadyApplied | Moved


def before_write(change: InviteChange, current: CurrentInvite) -> BeforeWrite:
    """``change`` against ``current``, its invite read right before the PATCH."""
    moved: list[MovedField] = []
    to_write: list[str] = []
    for name, wanted in change.patch.items():
        kind = kind_of(name)
        now = current.fields.get(name)
        planned = change.before.get(name)
        if kind.equal(wanted, now):
            continue  # already so: left out of the PATCH
        if kind.equal(planned, now):
            to_write.append(name)
        else:
            moved.append(MovedField(name, planned, now, wanted))
    if moved:
        return Moved(tuple(moved))
    if not to_write:
        return AlreadyApplied()
    if len(to_write) == len(change.patch):
        return Write(change)
    return Write(
        replace(
            change,
            before={name: change.before.get(name) for name in to_write},
            patch={name: change.patch[name] for name in to_write},
            kept={name: subs for name, subs in change.kept.items() if name in to_write},
            # Due only if a field that triggers it is still to be written: the e-mail
            # follows this write, not one someone else made.
            resend=change.triggers_resend(to_write),
        )
    )


class StoredOtherwise(NamedTuple):
    """A part of a field the platform stored otherwise than it was sent."""

    field: str  # the field, or `field.sub` for an object's sub-field
    sent: FieldValue | None
    stored: FieldValue | None


class StoredCheck(NamedTuple):
    """What the platform says it stored, against what was sent."""

    as_sent: tuple[str, ...]  # fields stored as sent (the only ones that may re-send)
    diverged: tuple[StoredOtherwise, ...]  # parts the files manage, stored otherwise
    noted: tuple[StoredOtherwise, ...]  # sub-fields kept from the platform, reformatted


def stored_as_sent(change: InviteChange, stored: CurrentInvite) -> StoredCheck:
    """``change``, as written, against ``stored``, the invite as the platform holds it now."""
    as_sent: list[str] = []
    diverged: list[StoredOtherwise] = []
    noted: list[StoredOtherwise] = []
    for name, sent in change.patch.items():
        held = stored.fields.get(name)
        managed, kept = kind_of(name).stored_otherwise(sent, held, change.kept.get(name, ()))
        if not managed:
            as_sent.append(name)
        diverged.extend(_part(name, sub, sent, held) for sub in managed)
        noted.extend(_part(name, sub, sent, held) for sub in kept)
    return StoredCheck(tuple(as_sent), tuple(diverged), tuple(noted))


def _part(name: str, sub: str | None, sent: FieldValue, held: FieldValue | None) -> StoredOtherwise:
    if sub is None:
        return StoredOtherwise(name, sent, held)
    sent_part = sent.get(sub) if isinstance(sent, Contact) else None
    held_part = held.get(sub) if isinstance(held, Contact) else None
    return StoredOtherwise(f"{name}.{sub}", sent_part, held_part)
