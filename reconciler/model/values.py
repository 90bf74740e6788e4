"""The values an invite's fields hold: text, a contact, an identifier set.

Text is a plain ``str``. A contact and an identifier set are small immutable
values, made once where a value comes in (the loader, the API reading, the saved
plan) and never JSON-like dicts and lists past that point. ``==`` between two
values is exact (as written: same items in the same order, same sub-fields);
what the platform counts as the same value is each kind's ``canonical`` form
(``reconciler.model.kinds``): text in NFC, a set's items as a set, a contact
sub-field by sub-field.

Compact, for the loader's 200,000 invites: a set is a tuple, a contact two
tuples, its sub-field names shared by every contact that names the same ones.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Iterator, Mapping
from typing import TypeAlias, overload


def nfc(text: str) -> str:
    """``text`` in Unicode's NFC, the one normal form of text this tool compares and sends.

    "Café" typed as e + U+0301 (NFD) and as U+00E9 look the same and are the same
    name: values from the files are sent in NFC, and any text is compared in NFC.
    """
    return text if text.isascii() else unicodedata.normalize("NFC", text)


# Unicode's stream-safe text format (UAX #15) allows no longer run of combining marks
# (non-starters); NFC reorders a run in quadratic time: 10,000 marks took 0.2 s a value.
MAX_MARKS_IN_A_ROW = 30


# Every combining mark is at or above U+0300, the first of them: a text without more
# than MAX_MARKS_IN_A_ROW such characters in a row holds no such run of marks.
_LONG_RUN_FROM_U0300 = re.compile(f"[^\\x00-\\u02ff]{{{MAX_MARKS_IN_A_ROW + 1},}}")


def too_many_marks(text: str) -> bool:
    """Whether ``text`` holds more than ``MAX_MARKS_IN_A_ROW`` combining marks in a row
    (counted only in a text the search in C cannot rule out: every value is asked)."""
    return _LONG_RUN_FROM_U0300.search(text) is not None and marks_in_a_row(text) > (
        MAX_MARKS_IN_A_ROW
    )


def marks_in_a_row(text: str) -> int:
    """The most combining marks (canonical combining class not 0) ``text`` holds in a row."""
    longest = run = 0
    for char in text:
        run = run + 1 if unicodedata.combining(char) else 0
        longest = max(longest, run)
    return longest


def _nfc_or_none(text: str | None) -> str | None:
    return None if text is None else nfc(text)


class IdentifierSet(tuple[str, ...]):
    """The items of a set field (groups, add-ons, attachments) as written, in their order.

    Order and repeats mean nothing to the platform, but a plan shows items as the
    files or the server list them; ``canonical`` is the set the platform sees.
    """

    __slots__ = ()

    def __eq__(self, other: object) -> bool:
        # As written: the same items in the same order, read from JSON (a list) or not.
        if isinstance(other, list):
            return list(self) == other
        return tuple.__eq__(self, other)

    def __ne__(self, other: object) -> bool:
        return not self == other

    __hash__ = tuple.__hash__

    def canonical(self) -> frozenset[str]:
        """The items as compared: each in NFC, order and repeats gone."""
        return frozenset(map(nfc, self))

    def __repr__(self) -> str:
        return f"IdentifierSet({list(self)!r})"


# Tuples of sub-field names, each kept once: contacts name the same few. Bounded, so
# that a server naming new sub-fields in every answer cannot grow it for ever.
_SHARED_NAMES: dict[tuple[str, ...], tuple[str, ...]] = {}
_MAX_SHARED = 1024


def shared(names: tuple[str, ...]) -> tuple[str, ...]:
    """``names``, as the one copy every holder of the same names shares (while there is room)."""
    kept = _SHARED_NAMES.get(names)
    if kept is not None:
        return kept
    if len(_SHARED_NAMES) < _MAX_SHARED:
        _SHARED_NAMES[names] = names
    return names


class Contact(Mapping[str, str | None]):
    """An object field's sub-fields (primaryContact's name, email, phone), in their order.

    A server's copy may carry sub-fields no file manages (a ``title``) and ``None``
    for a sub-field it holds no value for; a file's copy holds text only.
    """

    __slots__ = ("_names", "_values")

    def __init__(
        self, items: Mapping[str, str | None] | Iterable[tuple[str, str | None]] = ()
    ) -> None:
        # Most often a dict (an entry's, a server's): looked at first, as ABC checks are slow.
        if type(items) is dict or isinstance(items, Mapping):
            names, values = tuple(items), tuple(items.values())
        else:
            pairs = tuple(items)
            names, values = tuple(n for n, _ in pairs), tuple(v for _, v in pairs)
        self._names: tuple[str, ...] = _SHARED_NAMES.get(names) or shared(names)
        self._values: tuple[str | None, ...] = values

    def __getitem__(self, name: str) -> str | None:
        try:
            return self._values[self._names.index(name)]
        except ValueError:
            raise KeyError(name) from None

    def __contains__(self, name: object) -> bool:
        return name in self._names

    def __iter__(self) -> Iterator[str]:
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Mapping):
            return NotImplemented
        return dict(self.items()) == dict(other.items())

    def __hash__(self) -> int:
        return hash(frozenset(self.items()))

    def __repr__(self) -> str:
        return f"Contact({dict(self.items())!r})"

    def canonical(self) -> frozenset[tuple[str, str | None]]:
        """The sub-fields as compared: each value in NFC, their order gone."""
        return frozenset(zip(self._names, map(_nfc_or_none, self._values), strict=True))

    def merged(self, over: Contact) -> Contact:
        """These sub-fields with ``over``'s on top: its values win, new ones come last."""
        return Contact({**self, **over})


FieldValue: TypeAlias = str | Contact | IdentifierSet
# Managed fields and their values: an entry's, a PATCH's, a server's copy (which lists
# only the fields it holds a value for).
Fields: TypeAlias = dict[str, FieldValue]
# The server's values of some fields, each None where it holds no value: a plan's `before`.
HeldFields: TypeAlias = dict[str, FieldValue | None]
# What JSON (and YAML read as plain data) holds; the borders turn values into it and back.
JsonValue: TypeAlias = bool | int | float | str | list["JsonValue"] | dict[str, "JsonValue"] | None


@overload
def to_json(value: FieldValue) -> JsonValue: ...
@overload
def to_json(value: None) -> None: ...
def to_json(value: FieldValue | None) -> JsonValue:
    """A value as JSON holds it: a contact an object, a set a list."""
    if isinstance(value, Contact):
        return dict(value.items())
    if isinstance(value, IdentifierSet):
        return list(value)
    return value


def fields_json(fields: Mapping[str, FieldValue | None]) -> dict[str, JsonValue]:
    """Fields as a JSON object: a PATCH body, a saved plan's record, an audit record."""
    return {name: to_json(value) for name, value in fields.items()}
