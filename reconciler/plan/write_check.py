"""What a fresh copy of an invite means for its change: before the PATCH, and after it.

Pure: the reads and writes are apply's (``reconciler.apply.applier``). Equality is
the fields' kinds' (``reconciler.model.invite``): sets as sets, text in NFC.

Before the write (``before_write``), each field the PATCH carries (an object's
sub-fields kept from the platform included: the PATCH replaces it whole) is
compared with the copy just read: at the value wanted, it is left out of the
PATCH; at the value the plan was made from, it is written; anything else is a
conflict, and nothing is written to the invite. A PATCH so never puts back a
value older than the platform's. A re-send that the fields already at their value
would have made is owed: someone else wrote them, and whether an e-mail went with
that write is not known, so this run never sends it.

After the write (``stored_as_sent``), the one home of the rule "which fields were
stored as sent": a field the files manage stored otherwise has diverged; a kept
sub-field the platform reformatted is noted. Only fields stored as sent may
trigger a re-send (``InviteChange.triggers_resend``); one that the write changed
all the same (the platform holds neither the value before nor the one sent) makes
the re-send it triggers owed, not sent.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import NamedTuple, TypeAlias

from reconciler.model.invite import Contact, CurrentInvite, FieldValue, kind_of
from reconciler.plan.model import InviteChange
from reconciler.safetext import REDACTED, json_text, redact_and_escape


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
    resend_owed: bool = False  # the fields left out would have re-sent, and this write does not


@dataclass(frozen=True)
class AlreadyApplied:
    """Every field already holds the value wanted: nothing to send."""

    resend_owed: bool = False  # the change re-sends: owed, as someone else made it


@dataclass(frozen=True)
class Moved:
    """Changed on the platform since the plan was shown: nothing is written."""

    fields: tuple[MovedField, ...]


BeforeWrite: TypeAlias = Write | AlreadyApplied | Moved


def before_write(change: InviteChange, current: CurrentInvite) -> BeforeWrite:
    """``change`` against ``current``, its invite read right before the PATCH."""
    moved, to_write, already = _sorted_fields(change, current)
    if moved:
        return Moved(tuple(moved))
    if not to_write:
        return AlreadyApplied(change.triggers_resend(already))
    if not already:
        return Write(change)
    # Due only if a field that triggers it is still to be written: the e-mail follows
    # this write, not one someone else made (that one is owed).
    resend = change.triggers_resend(to_write)
    narrowed = replace(
        change,
        before={name: change.before.get(name) for name in to_write},
        patch={name: change.patch[name] for name in to_write},
        kept={name: subs for name, subs in change.kept.items() if name in to_write},
        resend=resend,
    )
    return Write(narrowed, not resend and change.triggers_resend(already))


def _sorted_fields(
    change: InviteChange, current: CurrentInvite
) -> tuple[list[MovedField], list[str], list[str]]:
    """The PATCH's fields moved on the platform, still to write, and at the value wanted."""
    moved: list[MovedField] = []
    to_write: list[str] = []
    already: list[str] = []
    for name, wanted in change.patch.items():
        kind = kind_of(name)
        now = current.fields.get(name)
        planned = change.before.get(name)
        if kind.equal(wanted, now):
            already.append(name)  # left out of the PATCH
        elif kind.equal(planned, now):
            to_write.append(name)
        else:
            moved.append(MovedField(name, planned, now, wanted))
    return moved, to_write, already


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
    # Fields stored otherwise that the write changed all the same (normalised, not ignored:
    # the platform holds neither the value before nor the one sent): a re-send they trigger
    # is owed (an address changed, no e-mail sent to it), never sent unchecked.
    changed_otherwise: tuple[str, ...] = ()


def stored_as_sent(change: InviteChange, stored: CurrentInvite) -> StoredCheck:
    """``change``, as written, against ``stored``, the invite as the platform holds it now."""
    as_sent: list[str] = []
    changed: list[str] = []
    diverged: list[StoredOtherwise] = []
    noted: list[StoredOtherwise] = []
    for name, sent in change.patch.items():
        held = stored.fields.get(name)
        kind = kind_of(name)
        managed, kept = kind.stored_otherwise(sent, held, change.kept.get(name, ()))
        if not managed:
            as_sent.append(name)
        elif not kind.equal(change.before.get(name), held):
            changed.append(name)
        diverged.extend(_part(name, sub, sent, held) for sub in managed)
        noted.extend(_part(name, sub, sent, held) for sub in kept)
    return StoredCheck(tuple(as_sent), tuple(diverged), tuple(noted), tuple(changed))


def _part(name: str, sub: str | None, sent: FieldValue, held: FieldValue | None) -> StoredOtherwise:
    if sub is None:
        return StoredOtherwise(name, sent, held)
    sent_part = sent.get(sub) if isinstance(sent, Contact) else None
    held_part = held.get(sub) if isinstance(held, Contact) else None
    return StoredOtherwise(f"{name}.{sub}", sent_part, held_part)


# A saved plan's change against the server's copy read again: to do, done, or drifted.
#
# Pure: the reading is apply's (``reconciler.apply.applier``). A change whose fields all hold
# ``before`` is to do; all ``after``, it is done (a re-run of an apply that made it: nothing is
# sent again); anything else is drift, and one drifted change refuses the whole plan.
#
# Values are compared as they are, never redacted, except where the plan itself shows a server's
# value redacted (it held the secret or a token). When nothing has drifted, each change gets back
# the server's values the plan shows redacted (``restored``): apply sends what the server holds,
# never the word ``[redacted]``.


class Recheck(NamedTuple):
    """Where the server stands against one change of a saved plan."""

    done: bool  # every field holds its `after` already
    drift: list[str]  # every reason the change no longer holds; empty when it may be applied
    restored: InviteChange | None  # the change with the server's values, when `before` holds


def recheck(change: InviteChange, current: CurrentInvite) -> Recheck:
    """``change`` against ``current``, the server's copy of its invite read just now."""
    where = f"{change.id} ({redact_and_escape(str(change.source))})"
    if all(
        _still_holds(name, value, current.fields.get(name)) for name, value in change.patch.items()
    ):
        return Recheck(True, [], None)  # applied already, whatever its status has become since
    drift = []
    if not current.is_pending:
        drift.append(f"{where}: is now {redact_and_escape(str(current.status))}, not pending")
    moved = False
    for name, planned in change.before.items():
        now = current.fields.get(name)
        if not _still_holds(name, planned, now):
            moved = True
            shown = None if now is None else kind_of(name).redacted(now)
            drift.append(
                f"{where}: `{name}` was {json_text(planned)} when planned, "
                f"is now {json_text(shown)}" + _not_after(name, change.patch[name], now)
            )
    return Recheck(False, drift, None if moved else _with_server_values(change, current))


def _still_holds(name: str, planned: FieldValue | None, now: FieldValue | None) -> bool:
    kind = kind_of(name)
    if kind.equal(planned, now):
        return True
    if planned is None or now is None:
        return False
    # Saved, the server's value is shown redacted where it held the secret or a token.
    mentions = any(REDACTED in text for _, text in kind.texts(planned))
    return mentions and kind.equal(planned, kind.redacted(now))


def _with_server_values(change: InviteChange, current: CurrentInvite) -> InviteChange:
    """``change`` with the server's values taken from ``current``, the copy just read,
    which the plan's ``before`` was found to match: ``before`` itself, and its objects'
    server-held sub-fields (see ``InviteChange.redacted``). Shown, they are redacted again."""
    before = {name: current.fields.get(name) for name in change.before}
    patch = {
        name: kind_of(name).with_server_parts(
            value, change.before.get(name), current.fields.get(name)
        )
        for name, value in change.patch.items()
    }
    return replace(change, before=before, patch=patch)


def _not_after(name: str, after: FieldValue, now: FieldValue | None) -> str:
    """A field already at `after` beside others that are not: the plan was half applied by hand."""
    return " (which the plan would write)" if kind_of(name).equal(after, now) else ""
