"""What one invite becomes in an export: the values a file can hold, each left-out one
with a note saying why, so that the file validates and plans clean against its server."""

from __future__ import annotations

from typing import Any, NamedTuple

from reconciler.api.client import CurrentInvite
from reconciler.invite import ID_KEY, OBJECT_FIELDS, SET_FIELDS, UPDATABLE_FIELDS, nfc_value
from reconciler.safetext import NOT_IN_TEXT, clean, holds_secret
from reconciler.schema.check import invite_validators
from reconciler.schema.messages import Where, describe, say
from reconciler.yamlload.positions import START, Lines, Located


class Quoted(str):
    """A string always written in double quotes (phone numbers)."""


class FlowList(list):
    """A list written on one line, `[a, b]` (the set fields)."""


_CONTACT_ORDER = ("name", "email", "phone")


class Entry(NamedTuple):
    """An invite's desired-state entry, and a note for each server value left out of it."""

    fields: dict[str, Any]
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
    entry: dict[str, Any] = {ID_KEY: invite.id}
    notes: list[str] = []
    for name in UPDATABLE_FIELDS:
        value = invite.fields.get(name)
        if value is None:  # nothing held: the same as a field left out
            continue
        if holds_secret(value):
            notes.append(
                f"`{name}` left out: the server's value holds the client secret or an "
                "access token of this run, which must never reach a file"
            )
            continue
        value = nfc_value(value)  # one normal form, as validate reads it back
        if name in OBJECT_FIELDS and isinstance(value, dict):
            value = _contact(name, value, notes)
        elif name in SET_FIELDS and isinstance(value, list):
            # Sorted and without repeats: order and repeats carry no meaning, a stable
            # order keeps git diffs small, and the schema refuses repeats.
            value = FlowList(sorted(set(value)))
        entry[name] = value
    for path, reason in _problems(entry):
        field = path[0]
        if field not in entry:  # left out whole for another of its sub-fields already
            continue
        if field in OBJECT_FIELDS and len(path) > 1 and path[1] not in _REQUIRED_SUB_FIELDS:
            entry[field].pop(path[1], None)  # an optional sub-field alone
        else:
            path = (field,)
            entry.pop(field)
        notes.append(f"`{'.'.join(map(str, path))}` left out: {reason}")
    for name, value in entry.items():
        if name == "phone" and isinstance(value, str):
            entry[name] = Quoted(value)
        elif name in OBJECT_FIELDS and isinstance(value, dict) and "phone" in value:
            value["phone"] = Quoted(value["phone"])
    return Entry(entry, notes)


_REQUIRED_SUB_FIELDS = ("name", "email")


def _contact(field: str, value: dict[str, Any], notes: list[str]) -> dict[str, Any]:
    """The sub-fields a file can hold, in the usual order; a note naming the others."""
    known = {k: value[k] for k in _CONTACT_ORDER if value.get(k) is not None}
    others = [k for k in value if k not in _CONTACT_ORDER and value[k] is not None]
    if others:
        shown = ", ".join(f"`{clean(str(k))[:MAX_KEY_SHOWN]}`" for k in others[:5])
        more = f" and {len(others) - 5} more" if len(others) > 5 else ""
        notes.append(
            f"`{field}` sub-fields {shown}{more} left out: a file cannot hold them; "
            "unmanaged, they keep their values when the contact is sent"
        )
    return known


MAX_KEY_SHOWN = 40


def _problems(entry: dict[str, Any]) -> list[tuple[tuple[Any, ...], str]]:
    """What validate would refuse in ``entry``: (path, reason), in validate's own words."""
    found: dict[tuple[Any, ...], str] = {}
    where = Where(Located(entry, None, START, Lines("")), "export")
    for error in invite_validators().entry.iter_errors(entry):
        path = tuple(error.absolute_path)
        if not path:  # about the entry as a whole: a required sub-field is under its field
            continue
        path = path[:2] if path[0] in OBJECT_FIELDS else path[:1]
        problems = describe(error, where)
        reason = problems[0].message if problems else "the schema refuses it"
        found.setdefault(path, _unquoted(reason))
    for name, value in entry.items():
        for path, text in _texts(value, (name,)):
            match = NOT_IN_TEXT.search(text)
            if match is not None:
                path = path[:2] if name in OBJECT_FIELDS else path[:1]
                char = match.group()
                shown = f"U+{ord(char):04X}"
                found.setdefault(path, f"{say(text)} holds {shown}, which a file may not hold")
    # A whole field left out needs no note for its sub-fields as well.
    return [(p, r) for p, r in found.items() if len(p) == 1 or (p[0],) not in found]


def _unquoted(message: str) -> str:
    """A validate message without its leading "`field`: ", which the note names already."""
    return message.split(": ", 1)[1] if message.startswith("`") and ": " in message else message


def _texts(value: Any, path: tuple[Any, ...]) -> list[tuple[tuple[Any, ...], str]]:
    if isinstance(value, str):
        return [(path, value)]
    if isinstance(value, dict):
        return [t for k, v in value.items() for t in _texts(v, (*path, k))]
    if isinstance(value, list):
        return [t for v in value for t in _texts(v, path)]
    return []
