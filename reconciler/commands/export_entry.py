"""What one invite becomes in an export: the values a file can hold, each left-out one
with a note saying why, so that the file validates and plans clean against its server."""

from __future__ import annotations

from typing import NamedTuple

from reconciler.desired.state import unheld
from reconciler.model.invite import ID_KEY, CurrentInvite, Fields, Written, field_kinds, kind_of
from reconciler.safetext import holds_secret


class Entry(NamedTuple):
    """An invite's desired-state entry, and a note for each server value left out of it."""

    fields: dict[str, Written]  # the id first, then each field as an export writes it
    left_out: list[str]


def export_entry(invite: CurrentInvite) -> Entry:
    """The entry of an invite: every updatable field a file can hold, in a stable order.

    The entry validates and plans clean against the server it came from: a value the
    schema cannot hold (a contact without an email, a name of 300 characters, an
    invisible character), or one holding the client secret or a token of this run, is
    left out (that field is then unmanaged) with a note saying why, never rewritten.
    A contact's sub-fields that a file cannot hold (a server's `title`) are left out
    alone: unmanaged, a PATCH of the contact keeps the server's value of them.
    """
    kept: Fields = {}
    notes: list[str] = []
    for name, kind in field_kinds().items():
        value = invite.fields.get(name)
        if value is None:  # nothing held: the same as a field left out
            continue
        if any(holds_secret(text) for _, text in kind.texts(value)):
            notes.append(
                f"`{name}` left out: the server's value holds the client secret or an "
                "access token of this run, which must never reach a file"
            )
            continue
        kept[name] = kind.for_file(value, name, notes)  # in NFC, as validate reads it back
    for (name, part), reason in unheld(invite.id, kept).items():
        if name not in kept:  # left out whole for another of its sub-fields already
            continue
        smaller = kind_of(name).without(kept[name], part)
        if smaller is None:
            part = None
            del kept[name]
        else:
            kept[name] = smaller
        where = name if part is None else f"{name}.{part}"
        notes.append(f"`{where}` left out: {reason}")
    entry: dict[str, Written] = {ID_KEY: invite.id}
    entry.update((name, kind_of(name).written(value)) for name, value in kept.items())
    return Entry(entry, notes)
