"""The invite as this tool models it: its values, its fields and their kinds, the invite
as the files want it and as the server holds it, and what became of a read.

In the order a reader meets them: the values (text, ``Contact``, ``IdentifierSet``), the
field kinds (``TextKind``, ``ContactKind``, ``SetKind``, each owning its rules), the
fields read from the invite schema, the invites (``DesiredInvite``, ``CurrentInvite``)
and the outcome of a read (``Done``, ``Failed``, ``NotRun``).

Imported on the loader's path, whose start-up is benchmarked: standard library only.
"""

from __future__ import annotations

import json
import re
import unicodedata
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import cache
from typing import Any, Generic, NamedTuple, Protocol, TypeAlias, TypeVar

from reconciler.errors import ReconcilerError
from reconciler.files import invite_schema_path
from reconciler.safetext import cut, escape, kind_in_words, redact, redact_and_escape

# -- values ----------------------------------------------------------------------------------
# The values an invite's fields hold: text, a contact, an identifier set.
#
# Text is a plain ``str``. A contact and an identifier set are small immutable
# values, made once where a value comes in (the loader, the API reading, the saved
# plan) and never JSON-like dicts and lists past that point. ``==`` between two
# values is exact (as written: same items in the same order, same sub-fields);
# what the platform counts as the same value is its ``canonical`` form: text in NFC, a
# set's items as a set, a contact's sub-fields as a dict of text in NFC.
#
# Compact, for memory: a set is a tuple, a contact two tuples, its sub-field names
# shared by every contact that names the same ones. With dicts, a plan of 20,000
# invites peaked at 84.6 MB against 77.0, past its 80 MB bound (benchmark m).


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
        if isinstance(items, Mapping):
            names, values = tuple(items), tuple(items.values())
        else:
            pairs = tuple(items)
            names, values = tuple(n for n, _ in pairs), tuple(v for _, v in pairs)
        self._names: tuple[str, ...] = shared(names)
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

    def canonical(self) -> dict[str, str | None]:
        """The sub-fields as compared: each value in NFC, their order gone."""
        return {name: None if item is None else nfc(item) for name, item in self.items()}

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


# -- kinds -----------------------------------------------------------------------------------
# Field kinds: text, a contact, an identifier set, each a class that owns its rules.
#
# A kind says, for a field of that kind: whether a server's value is one it can
# hold (type and size, checked before anything else sees it), the typed value of
# a JSON one and back, which part of the server's value the files manage, what a
# PATCH carries, how a plan shows what differs inside a value (what differs is
# DeepDiff's, over the canonical forms: ``differences``), and how an export writes
# it. Callers ask the field's kind (``kind_of``); no other module branches on which
# field it is.


V = TypeVar("V", str, Contact, IdentifierSet)


class Moved(NamedTuple):
    """What DeepDiff found differing inside one field's canonical form."""

    added: frozenset[str]  # a set's items (in NFC) only the later value holds
    removed: frozenset[str]  # a set's items only the earlier value holds
    subs: frozenset[str]  # a contact's sub-fields whose text differs


class FieldDelta(NamedTuple):
    """What differs inside one field, as a plan shows it; values as written, not canonical."""

    added: list[str]  # a set's items ``after`` has and ``before`` lacks, in its order
    removed: list[str]  # the items ``before`` has and ``after`` lacks, in its order
    # A contact's (sub-field, before, after) that differ: ``after``'s sub-fields in its
    # order, then ``before``'s others; a sub-field left out is one whose value is None.
    sub_changes: list[tuple[str, str | None, str | None]]


NO_DELTA = FieldDelta([], [], [])


class Quoted(str):
    """Text an export always writes in double quotes (E.164 phone numbers, which YAML
    would otherwise read as numbers)."""

    __slots__ = ()


class FlowList(list[str]):
    """A set an export writes on one line, `[a, b]`."""


# What an export writes for a field: text, quoted text, a one-line list, sub-fields.
Written = str | FlowList | dict[str, str]


Canonical = str | frozenset[str] | dict[str, str | None] | None


def canonical(value: FieldValue | None) -> Canonical:
    """``value`` as compared, the one form: two values are the same to the platform when
    these are ``==``, and what differs between them is DeepDiff's over these.

    Text in NFC (see ``nfc``), a set's items as a set, a contact's sub-fields as a dict
    of text in NFC; None (no value held) is only the same as None, a sub-field's too.
    """
    if isinstance(value, str):
        return nfc(value)
    if value is None:
        return None
    return value.canonical()


def _sub_text(value: str | None) -> str | None:
    return None if value is None else nfc(value)


def _redacted(value: str | None) -> str | None:
    return None if value is None else redact(value)


def _own(value: FieldValue, kind: type[V]) -> V:
    """``value`` as the value of its field's kind, which every value of a field is."""
    if not isinstance(value, kind):
        raise TypeError(f"{type(value).__name__} where a {kind.__name__} belongs")
    return value


def _kind(value: object) -> str:
    """What a wrong value is, shown briefly: its JSON type, and a number's value."""
    if isinstance(value, bool):
        return f"a boolean ({str(value).lower()})"
    if isinstance(value, int | float):
        return f"a number ({redact_and_escape(repr(value))[:40]})"
    return kind_in_words(value, as_json=True)


class FieldKind(ABC):
    """The rules of one kind of field. Values of a field are its kind's or None (held by
    no one); a value of another kind counts as none at all, as a plan shows it."""

    def problem(self, raw: object) -> str | None:
        """Why a server's JSON value cannot be this field's, or None when it can.

        Bounded as well as typed: compared, an unbounded value could take minutes (a
        set of 150,000 groups) or put a number where text belongs into a PATCH.
        """
        return None if raw is None else self._problem(raw)  # None: no value held

    @abstractmethod
    def _problem(self, raw: object) -> str | None: ...

    @abstractmethod
    def from_json(self, raw: object) -> FieldValue | None:
        """The typed value of a JSON (or plain YAML) one; None when it is not one of this
        kind (checked values always are)."""

    # The type of this kind's values: called with a value the invite schema has found
    # valid (of this kind for sure), it makes the typed value without looking. The loader
    # makes 200,000 so.
    value_type: type[str] | type[Contact] | type[IdentifierSet]

    def equal(self, a: FieldValue | None, b: FieldValue | None) -> bool:
        """Equal as the platform means it: the same ``canonical`` form."""
        return canonical(a) == canonical(b)

    def managed(self, want: FieldValue, have: FieldValue | None) -> FieldValue | None:
        """The part of the server's value ``have`` that the files' value ``want`` manages."""
        return have

    def patch_value(self, want: FieldValue, have: FieldValue | None) -> FieldValue:
        """What a PATCH of this field sends, the server's value being ``have``."""
        return want

    def kept(self, want: FieldValue, have: FieldValue | None) -> tuple[str, ...]:
        """The sub-fields a PATCH of ``want`` carries from the server's ``have`` because the
        files do not manage them (an object is replaced whole); none for other kinds."""
        return ()

    def stored_otherwise(
        self, sent: FieldValue, stored: FieldValue | None, kept: tuple[str, ...] = ()
    ) -> tuple[list[str | None], list[str]]:
        """Where ``stored`` is not ``sent`` as the platform compares: the parts the files
        manage (None: the field's own value) and the ``kept`` sub-fields, apart."""
        return ([] if self.equal(sent, stored) else [None]), []

    def delta(
        self, before: FieldValue | None, after: FieldValue | None, moved: Moved
    ) -> FieldDelta:
        """What a plan shows inside the value, from ``before`` to ``after``, DeepDiff having
        found ``moved`` in their canonical forms."""
        return NO_DELTA

    @abstractmethod
    def texts(self, value: FieldValue) -> Iterator[tuple[str | None, str]]:
        """Every text the value holds, with the sub-field it is in (None: the field's own)."""

    @abstractmethod
    def normalized(self, value: FieldValue) -> FieldValue:
        """``value`` with its text in NFC, as the loader reads a file back."""

    @abstractmethod
    def redacted(self, value: FieldValue) -> FieldValue:
        """A server's value with any secret of this run in it redacted, for showing."""

    def server_parts_redacted(self, value: FieldValue, before: FieldValue | None) -> FieldValue:
        """A patched value with the parts the server holds (``before``) redacted."""
        return value

    def with_server_parts(
        self, value: FieldValue, before: FieldValue | None, held: FieldValue | None
    ) -> FieldValue:
        """A patched value planned against ``before`` with the server's parts taken from
        ``held``, what it holds now (which ``before`` was found to match)."""
        return value

    def for_file(self, value: FieldValue, field: str, notes: list[str]) -> FieldValue:
        """What a file can hold of a server's ``value`` (in NFC); a note in ``notes`` for
        each part left out."""
        return self.normalized(value)

    def without(self, value: FieldValue, part: str | None) -> FieldValue | None:
        """``value`` without the ``part`` (a sub-field) a file cannot hold; None: leave out
        the whole field."""
        return None

    @abstractmethod
    def written(self, value: FieldValue) -> Written:
        """``value`` as an export writes it in YAML."""


@dataclass(frozen=True, eq=False)  # each kind is the one object field_kinds() made
class TextKind(FieldKind):
    """Text: a name, an e-mail, a phone number. The same in NFC."""

    value_type = str  # str(text) is text itself

    max_chars: int
    quoted: bool = field(default=False, kw_only=True)  # an export writes it in double quotes

    def _problem(self, raw: object) -> str | None:
        if type(raw) is not str:
            return f"is {_kind(raw)}, not a string"
        if len(raw) > self.max_chars:
            return f"has {len(raw):,} characters, more than the {self.max_chars:,} allowed"
        if not raw.isascii() and too_many_marks(raw):  # before NFC, quadratic on such a run
            return (
                f"holds {marks_in_a_row(raw):,} combining marks in a row, more than the "
                f"{MAX_MARKS_IN_A_ROW} allowed"
            )
        return None

    def from_json(self, raw: object) -> str | None:
        return raw if isinstance(raw, str) else None

    def texts(self, value: FieldValue) -> Iterator[tuple[str | None, str]]:
        yield None, _own(value, str)

    def normalized(self, value: FieldValue) -> FieldValue:
        return nfc(_own(value, str))

    def redacted(self, value: FieldValue) -> FieldValue:
        return redact(_own(value, str))

    def written(self, value: FieldValue) -> Written:
        return self.written_text(_own(value, str))

    def written_text(self, text: str) -> str:
        return Quoted(text) if self.quoted else text


@dataclass(frozen=True, eq=False)
class SetKind(FieldKind):
    """An identifier set (groups, add-ons, attachments): order and repeats mean nothing."""

    value_type = IdentifierSet

    max_items: int
    item: TextKind

    def _problem(self, raw: object) -> str | None:
        if type(raw) is not list:
            return f"is {_kind(raw)}, not a list of strings"
        if len(raw) > self.max_items:
            return f"has {len(raw):,} items, more than MAX_SET_ITEMS ({self.max_items:,})"
        for index, item in enumerate(raw):
            problem = self.item._problem(item)
            if problem is not None:
                return f"item {index} {problem}"
        return None

    def from_json(self, raw: object) -> IdentifierSet | None:
        if isinstance(raw, list) and all(isinstance(item, str) for item in raw):
            return IdentifierSet(raw)
        return None

    def delta(
        self, before: FieldValue | None, after: FieldValue | None, moved: Moved
    ) -> FieldDelta:
        # Each item is whole: added or removed, never changed into another; shown as each
        # list writes it, in its order. A value that is not a set counts as an empty one.
        was = before if isinstance(before, IdentifierSet) else IdentifierSet()
        now = after if isinstance(after, IdentifierSet) else IdentifierSet()
        added = [item for item in now if nfc(item) in moved.added]
        removed = [item for item in was if nfc(item) in moved.removed]
        return FieldDelta(added, removed, []) if added or removed else NO_DELTA

    def texts(self, value: FieldValue) -> Iterator[tuple[str | None, str]]:
        for item in _own(value, IdentifierSet):
            yield None, item

    def normalized(self, value: FieldValue) -> FieldValue:
        return IdentifierSet(map(nfc, _own(value, IdentifierSet)))

    def redacted(self, value: FieldValue) -> FieldValue:
        return IdentifierSet(map(redact, _own(value, IdentifierSet)))

    def for_file(self, value: FieldValue, field: str, notes: list[str]) -> FieldValue:
        # Sorted and without repeats: order and repeats carry no meaning, a stable order
        # keeps git diffs small, and the schema refuses repeats.
        return IdentifierSet(sorted(set(_own(self.normalized(value), IdentifierSet))))

    def written(self, value: FieldValue) -> Written:
        return FlowList(_own(value, IdentifierSet))


# Sub-field names shown in an export's note, each cut to this many characters.
MAX_KEY_SHOWN = 40


@dataclass(frozen=True, eq=False)
class ContactKind(FieldKind):
    """An object (primaryContact): compared sub-field by sub-field, replaced whole on PATCH.

    A sub-field the files leave out is unmanaged: never compared, and a PATCH of the
    contact carries the server's value of it.
    """

    value_type = Contact

    sub_fields: dict[str, TextKind]  # those a file may hold, in the schema's order
    required: tuple[str, ...]
    max_keys: int = field(kw_only=True)
    # A sub-field's name is bounded like its value: a server's names are compared,
    # merged into PATCH bodies and shown, so a plan's cost must not grow with them.
    max_key_chars: int = field(kw_only=True)
    text: TextKind = field(kw_only=True)  # a server's sub-field, whatever its name

    def _problem(self, raw: object) -> str | None:
        if type(raw) is not dict:
            return f"is {_kind(raw)}, not an object of strings"
        if len(raw) > self.max_keys:
            return f"has {len(raw):,} keys, more than the {self.max_keys} allowed"
        for key, item in raw.items():
            if len(key) > self.max_key_chars:
                return (
                    f"has a field named `{redact_and_escape(cut(key, 40))}…` of {len(key):,} "
                    f"characters, more than the {self.max_key_chars} allowed"
                )
            problem = None if item is None else self.text._problem(item)
            if problem is not None:  # a name within the bound just checked: shown whole
                return f"field `{redact_and_escape(str(key))}` {problem}"
        return None

    def from_json(self, raw: object) -> Contact | None:
        if not isinstance(raw, dict):
            return None
        if not all(
            isinstance(key, str) and (item is None or isinstance(item, str))
            for key, item in raw.items()
        ):
            return None
        return Contact(raw)

    def managed(self, want: FieldValue, have: FieldValue | None) -> FieldValue | None:
        if isinstance(want, Contact) and isinstance(have, Contact):
            # Sub-fields the files leave out (a contact's phone, say) are unmanaged.
            return Contact((name, have.get(name)) for name in want)
        return have

    def patch_value(self, want: FieldValue, have: FieldValue | None) -> FieldValue:
        if isinstance(want, Contact) and isinstance(have, Contact):
            # Replaced whole on PATCH: the server's unmanaged sub-fields go along.
            return have.merged(want)
        return want

    def kept(self, want: FieldValue, have: FieldValue | None) -> tuple[str, ...]:
        if not isinstance(want, Contact) or not isinstance(have, Contact):
            return ()
        return tuple(name for name, item in have.items() if name not in want and item is not None)

    def stored_otherwise(
        self, sent: FieldValue, stored: FieldValue | None, kept: tuple[str, ...] = ()
    ) -> tuple[list[str | None], list[str]]:
        if not isinstance(sent, Contact):
            return super().stored_otherwise(sent, stored, kept)
        held = stored.canonical() if isinstance(stored, Contact) else {}
        wanted = sent.canonical()
        managed: list[str | None] = []
        noted: list[str] = []
        for name in sent:
            if wanted.get(name) != held.get(name):
                (noted if name in kept else managed).append(name)
        return managed, noted

    def delta(
        self, before: FieldValue | None, after: FieldValue | None, moved: Moved
    ) -> FieldDelta:
        # ``after``'s sub-fields in its order, then ``before``'s others.
        was = before if isinstance(before, Contact) else Contact()
        now = after if isinstance(after, Contact) else Contact()
        names = [name for name in dict.fromkeys([*now, *was]) if name in moved.subs]
        subs = [(name, was.get(name), now.get(name)) for name in names]
        return FieldDelta([], [], subs) if subs else NO_DELTA

    def texts(self, value: FieldValue) -> Iterator[tuple[str | None, str]]:
        for name, item in _own(value, Contact).items():
            if item is not None:
                yield name, item

    def normalized(self, value: FieldValue) -> FieldValue:
        # Names as they are: only values are text the platform compares.
        return Contact((name, _sub_text(item)) for name, item in _own(value, Contact).items())

    def redacted(self, value: FieldValue) -> FieldValue:
        value = _own(value, Contact)
        # Names too: a server's unmanaged sub-field may be named after what it echoes.
        return Contact((redact(name), _redacted(item)) for name, item in value.items())

    def server_parts_redacted(self, value: FieldValue, before: FieldValue | None) -> FieldValue:
        """The contact a PATCH sends, its sub-fields holding what the server holds (the
        unmanaged ones kept on PATCH, or equal ones) redacted. The files' own sub-fields
        are kept as written, a secret in them too: they are what apply sends."""
        if not isinstance(value, Contact) or not isinstance(before, Contact):
            return value
        return Contact(
            (redact(name), _redacted(item) if name in before and before[name] == item else item)
            for name, item in value.items()
        )

    def with_server_parts(
        self, value: FieldValue, before: FieldValue | None, held: FieldValue | None
    ) -> FieldValue:
        if not (
            isinstance(value, Contact) and isinstance(before, Contact) and isinstance(held, Contact)
        ):
            return value
        # The server's contact as it is now, and over it what the files change: the
        # sub-fields whose planned value differs from the server's then.
        changed = Contact((k, v) for k, v in value.items() if k not in before or before[k] != v)
        return held.merged(changed)

    def for_file(self, value: FieldValue, field: str, notes: list[str]) -> FieldValue:
        """The sub-fields a file can hold, in the schema's order; a note naming the others."""
        value = _own(self.normalized(value), Contact)
        known = Contact(
            (name, item) for name in self.sub_fields if (item := value.get(name)) is not None
        )
        others = [k for k, v in value.items() if k not in self.sub_fields and v is not None]
        if others:
            shown = ", ".join(f"`{redact_and_escape(str(k))[:MAX_KEY_SHOWN]}`" for k in others[:5])
            more = f" and {len(others) - 5} more" if len(others) > 5 else ""
            notes.append(
                f"`{field}` sub-fields {shown}{more} left out: a file cannot hold them; "
                "unmanaged, they keep their values when the contact is sent"
            )
        return known

    def without(self, value: FieldValue, part: str | None) -> FieldValue | None:
        if part is None or part in self.required or not isinstance(value, Contact):
            return None
        return Contact((name, item) for name, item in value.items() if name != part)

    def written(self, value: FieldValue) -> Written:
        return {
            name: self.sub_fields[name].written_text(item) if name in self.sub_fields else item
            for name, item in _own(value, Contact).items()
            if item is not None
        }


# -- fields ----------------------------------------------------------------------------------
# The invite's fields, each with its kind, read from the invite file schema.
#
# ``schemas/invites.schema.json`` is what users and their editors see, so it is
# the one list: ``$defs/invite/properties`` names the fields in the order an
# export writes them (the reconciler's own keys, ``id`` and ``resendOnChange``,
# aside), each field's kind follows from its type (text, an object of text, a
# list of text), and the bounds on what a server may hold come from its
# ``serverText``, ``serverSet`` and ``serverContact`` definitions. Read at first
# use: the loader's start-up is benchmarked.


# Keys of an invite entry that steer the reconciler and are never sent.
ID_KEY = "id"  # also the invite's field name in the API
RESEND_KEY = "resendOnChange"
RECONCILER_KEYS = (ID_KEY, RESEND_KEY)

# Text of this definition is E.164, which YAML reads as a number unless it is quoted:
# an export always writes it in double quotes.
_ALWAYS_QUOTED = "#/$defs/phone"


@cache
def field_kinds() -> Mapping[str, FieldKind]:
    """Every field an invite file may manage, in the schema's order, with its kind; a field
    of no known kind refused."""
    definitions: dict[str, Any] = json.loads(invite_schema_path().read_text(encoding="utf-8"))[
        "$defs"
    ]
    text = TextKind(definitions["serverText"]["maxLength"])

    def kind(name: str, node: dict[str, Any]) -> FieldKind:
        ref = node.get("$ref")
        resolved = {**definitions[ref.rpartition("/")[2]], **node} if ref else node
        match resolved.get("type"):
            case "string":
                return TextKind(text.max_chars, quoted=ref == _ALWAYS_QUOTED)
            case "array":
                return SetKind(definitions["serverSet"]["maxItems"], text)
            case "object":
                return contact(name, resolved)
        raise ReconcilerError(
            f"{invite_schema_path()}: the invite field `{name}` is of no kind this tool "
            "knows: text (type string), a set (type array) or an object of text"
        )

    def contact(name: str, node: dict[str, Any]) -> ContactKind:
        subs = {sub: kind(f"{name}.{sub}", n) for sub, n in node.get("properties", {}).items()}
        for sub, sub_kind in subs.items():
            if not isinstance(sub_kind, TextKind):
                raise ReconcilerError(
                    f"{invite_schema_path()}: `{name}.{sub}` must be text: an object's "
                    "sub-fields are compared one by one as text"
                )
        bounds = definitions["serverContact"]
        return ContactKind(
            subs,  # type: ignore[arg-type]  # each a TextKind, checked above
            tuple(node.get("required", ())),
            max_keys=bounds["maxProperties"],
            max_key_chars=bounds["propertyNames"]["maxLength"],
            text=text,
        )

    properties = definitions["invite"]["properties"]
    return {n: kind(n, node) for n, node in properties.items() if n not in RECONCILER_KEYS}


def updatable_fields() -> tuple[str, ...]:
    """The fields a PATCH may change, in the order an export writes them."""
    return tuple(field_kinds())


def kind_of(name: str) -> FieldKind:
    """The kind of the field ``name`` (KeyError for a name that is not a field)."""
    return field_kinds()[name]


def fields_from_json(raw: Mapping[str, object]) -> Fields:
    """The typed values of a JSON object's fields; a value that is not its field's kind
    (or a name that is not a field) is left out."""
    kinds = field_kinds()
    fields: Fields = {}
    for name, value in raw.items():
        kind = kinds.get(name)
        typed = None if kind is None else kind.from_json(value)
        if typed is not None:
            fields[name] = typed
    return fields


def differences(
    before: Mapping[str, FieldValue | None], after: Mapping[str, FieldValue]
) -> dict[str, FieldDelta]:
    """The fields of ``after`` whose value is not ``before``'s to the platform, each with
    what a plan shows inside it, in ``after``'s order.

    DeepDiff computes what differs, over the fields' canonical forms (text in NFC, a
    set as a set, a contact's sub-fields as a dict); it decides both what a PATCH
    carries (``reconciler.plan.make.compare_invite``) and what a plan shows.
    """
    old = {name: canonical(before.get(name)) for name in after}
    new = {name: canonical(value) for name, value in after.items()}
    if old == new:  # most invites: what DeepDiff would say, without its ~0.1 ms a call
        return {}
    moved = _moved(old, new)
    return {
        name: kind_of(name).delta(before.get(name), value, moved[name])
        for name, value in after.items()
        if name in moved
    }


def _moved(old: dict[str, Canonical], new: dict[str, Canonical]) -> dict[str, Moved]:
    """What DeepDiff finds differing from ``old`` to ``new``, field by field."""
    # Imported here: only the commands that diff (plan, apply, adopt) load it, ~60 ms.
    from deepdiff import DeepDiff

    # threshold 0: always into a contact's sub-fields, never "the whole contact changed".
    tree = DeepDiff(old, new, view="tree", threshold_to_diff_deeper=0)
    found: dict[str, tuple[set[str], set[str], set[str]]] = {}
    for report, levels in tree.items():
        for level in levels:
            name, *inside = level.path(output_format="list")
            if report in _NULL_SUB_FIELD and getattr(level, _NULL_SUB_FIELD[report]) is None:
                continue  # a plan shows a sub-field held as None as one not held
            _note(found.setdefault(name, (set(), set(), set())), report, level, inside)
    return {name: Moved(*map(frozenset, parts)) for name, parts in found.items()}


# A contact's sub-field DeepDiff found added or removed, and the side holding its value.
_NULL_SUB_FIELD = {"dictionary_item_added": "t2", "dictionary_item_removed": "t1"}


def _note(
    parts: tuple[set[str], set[str], set[str]], report: str, level: Any, inside: list[str]
) -> None:
    """One of DeepDiff's findings inside a field, into its (added, removed, subs)."""
    added, removed, subs = parts
    if report == "set_item_added":
        added.add(level.t2)
    elif report == "set_item_removed":
        removed.add(level.t1)
    elif inside:  # a contact's sub-field added, removed or changed
        subs.add(inside[0])
    else:  # the whole value: text changed, or a value where none was held
        for value, items in ((level.t1, removed), (level.t2, added)):
            if isinstance(value, frozenset):
                items.update(value)
            elif isinstance(value, dict):
                subs.update(key for key, item in value.items() if item is not None)


# -- invites ---------------------------------------------------------------------------------
# An invite as the files want it (DesiredInvite) and as the server holds it (CurrentInvite).
#
# Each is made once, where it comes in: a DesiredInvite by the loader
# (``desired.state``) from an entry the schema has checked, a CurrentInvite by
# the API client from an answer whose values its kinds have checked. Past that
# point an invite's values are typed (``reconciler.model.invite``), never JSON.


# The schema's `pattern` says the same; this holds even if the schema is edited,
# and matches the whole string (a `$` in a search lets a final newline through).
INVITE_ID = re.compile(r"(?!\.+\Z)[A-Za-z0-9_.-]{1,128}")
# How the inviteId rule is worded wherever an id is refused (file entries, command lines).
ID_RULE = "1 to 128 letters, digits, `_`, `-`, `.`, and not dots alone"

# When an invite's invitation is e-mailed again after its update: ``True`` after any
# update, a tuple of field names only after an update that carried one of them,
# ``False`` never. The e-mail is the one thing this tool does that cannot be undone.
ResendRule = bool | tuple[str, ...]


def resend_rule(value: object) -> ResendRule:
    """The rule an entry's ``resendOnChange`` states (the schema has checked its shape)."""
    if value is True:
        return True
    if isinstance(value, list) and value and all(type(v) is str for v in value):
        return tuple(dict.fromkeys(value))
    return False


def resend_due(rule: ResendRule, patched: Iterable[str]) -> bool:
    """Whether an update carrying the fields ``patched`` re-sends the invitation."""
    if rule is True or rule is False:
        return rule
    return any(field in rule for field in patched)


class SourceLocation(NamedTuple):
    """Where an entry was written. ``line`` 0: no line known (a saved plan's source that
    does not name one); ``str()`` is how every message names the place."""

    path: str
    line: int
    column: int = 1

    def __str__(self) -> str:
        if self.line < 1:
            return escape(self.path)
        return f"{escape(self.path)}:{self.line}"


class DesiredInvite:
    """One invite entry: the fields it manages and where it was written.

    Compact, as the values are (a plan keeps every desired invite until it is
    printed): ``__slots__``; the field names as one tuple shared by every invite
    naming the same fields, the values as a tuple (``fields`` builds a dict when
    asked); the source kept as its parts (``source`` makes the ``SourceLocation``).
    """

    __slots__ = ("_column", "_line", "_names", "_path", "_values", "id", "resend_on_change")

    def __init__(
        self,
        id: str,  # the field's name in the files and the API
        fields: Mapping[str, FieldValue],  # managed fields only; absent means unmanaged
        source: SourceLocation,
        resend_on_change: ResendRule = False,
    ) -> None:
        self.id = id
        self._names: tuple[str, ...] = shared(tuple(fields))
        self._values: tuple[FieldValue, ...] = tuple(fields.values())
        self.resend_on_change = resend_on_change
        self._path, self._line, self._column = source

    @property
    def fields(self) -> Fields:
        """The managed fields, in the order written; a new dict each time."""
        return dict(self.items())

    def items(self) -> Iterator[tuple[str, FieldValue]]:
        """(field, value) of each managed field, in the order written."""
        return zip(self._names, self._values, strict=True)

    def get(self, name: str) -> FieldValue | None:
        """The value the entry gives ``name``; None when it does not manage it."""
        if name not in self._names:
            return None
        return self._values[self._names.index(name)]

    @property
    def source(self) -> SourceLocation:
        return SourceLocation(self._path, self._line, self._column)

    @property
    def name(self) -> str | None:
        value = self.get("name")
        return value if isinstance(value, str) else None

    def _parts(self) -> tuple[object, ...]:
        parts = (self.id, self.fields, self._path, self._line, self._column)
        return (*parts, self.resend_on_change)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, DesiredInvite):
            return NotImplemented
        return self._parts() == other._parts()

    __hash__ = None  # type: ignore[assignment]  # equal by value, and it holds a dict

    def __repr__(self) -> str:
        return (
            f"DesiredInvite(id={self.id!r}, fields={self.fields!r}, "
            f"source={self.source!r}, resend_on_change={self.resend_on_change!r})"
        )


@dataclass(frozen=True)
class CurrentInvite:
    """An invite as the server holds it, with canonical field names."""

    id: str
    status: str | None
    fields: Fields  # the updatable fields the server holds a value for

    @property
    def is_pending(self) -> bool:
        """Pending, compared without case (``PENDING`` is pending); with no status, taken as
        pending too: planned and applied as one, and never pruned by adopt."""
        return self.status is None or self.status.casefold() == "pending"


# -- outcome ---------------------------------------------------------------------------------
# What became of one call made for an item (an invite read, a write): done, failed, not run.
#
# Three cases, each its own type, matched with ``match`` or ``isinstance``: a
# result is never a record of optional parts to be unpacked by assertion. The
# API produces them (``api.concurrency.ordered_map``); the plan consumes readings
# without knowing the API: a failure's error is anything that says the little a
# plan needs of it (``ReadError``).


T_co = TypeVar("T_co", covariant=True)
E_co = TypeVar("E_co", covariant=True)


class ReadError(Protocol):
    """What a plan needs of a failed read: what to show, and whether it ends the run."""

    @property
    def status(self) -> int | None:
        """The HTTP status, when an answer came."""

    @property
    def request_id(self) -> str | None:
        """The server's requestId of the answer, when it gave one."""

    @property
    def run_fatal(self) -> bool:
        """The same would happen to every read (credentials, scope, the server down):
        the run stops rather than list it for each invite."""

    @property
    def message(self) -> str:
        """What went wrong, in words."""


@dataclass(frozen=True, slots=True)
class Done(Generic[T_co]):
    """The call returned ``value``."""

    value: T_co


@dataclass(frozen=True, slots=True)
class Failed(Generic[E_co]):
    """The call failed with ``error``."""

    error: E_co


@dataclass(frozen=True, slots=True)
class NotRun:
    """The run stopped before this call started."""


Outcome: TypeAlias = Done[T_co] | Failed[E_co] | NotRun


def utc_now() -> str:
    """Now, as every record of a run is stamped: UTC to the millisecond, ``Z``-suffixed."""
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def stop_if_run_fatal(error: ReadError) -> None:
    """Raise for an error that would repeat for every invite; per-invite ones pass."""
    if error.run_fatal:
        raise ReconcilerError(f"stopped reading invites: {error}")
