"""Field kinds: text, a contact, an identifier set, each a class that owns its rules.

A kind says, for a field of that kind: whether a server's value is one it can
hold (type and size, checked before anything else sees it), the typed value of
a JSON one and back, when two values are the same to the platform, which part
of the server's value the files manage, what a PATCH carries, what differs
inside a value that changed, and how an export writes it. Callers ask the
field's kind (``reconciler.model.fields``); no other module branches on which
field it is.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping
from typing import NamedTuple, TypeVar

from reconciler.model.values import (
    MAX_MARKS_IN_A_ROW,
    Contact,
    FieldValue,
    IdentifierSet,
    marks_in_a_row,
    nfc,
    too_many_marks,
)
from reconciler.safetext import cut, redact, redact_and_escape

V = TypeVar("V", str, Contact, IdentifierSet)


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


def canonical(value: FieldValue | None) -> object:
    """``value`` as compared: two values are the same to the platform when these are ``==``.

    Text in NFC (see ``nfc``), a set's items as a set, a contact's sub-fields each in
    NFC; None (no value held) is only the same as None.
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
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, str):
        return "a string"
    return "null"  # JSON holds nothing else


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
        """Equal as the platform means it (``canonical``)."""
        return a == b or canonical(a) == canonical(b)

    def managed(self, want: FieldValue, have: FieldValue | None) -> FieldValue | None:
        """The part of the server's value ``have`` that the files' value ``want`` manages."""
        return have

    @abstractmethod
    def differs(self, want: FieldValue, have: FieldValue | None) -> bool:
        """Whether a PATCH must carry this field: ``want`` and the part of ``have`` it
        manages are not the same to the platform."""

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

    def delta(self, before: FieldValue | None, after: FieldValue | None) -> FieldDelta:
        """What differs inside the value, from ``before`` to ``after``."""
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


class TextKind(FieldKind):
    """Text: a name, an e-mail, a phone number. The same in NFC."""

    value_type = str  # str(text) is text itself

    def __init__(self, max_chars: int, *, quoted: bool = False) -> None:
        self.max_chars = max_chars
        self.quoted = quoted  # an export writes it in double quotes

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

    def differs(self, want: FieldValue, have: FieldValue | None) -> bool:
        if want == have:  # almost always: no normal form to make
            return False
        if not isinstance(want, str) or not isinstance(have, str):
            return True
        return nfc(want) != nfc(have)

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


class SetKind(FieldKind):
    """An identifier set (groups, add-ons, attachments): order and repeats mean nothing."""

    value_type = IdentifierSet

    def __init__(self, max_items: int, item: TextKind) -> None:
        self.max_items = max_items
        self.item = item

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

    def differs(self, want: FieldValue, have: FieldValue | None) -> bool:
        if want == have:
            return False
        if not isinstance(want, IdentifierSet) or not isinstance(have, IdentifierSet):
            return True
        return want.canonical() != have.canonical()

    def delta(self, before: FieldValue | None, after: FieldValue | None) -> FieldDelta:
        # Each item is whole: added or removed, never changed into another. A value that
        # is not a set counts as an empty one, as a plan shows it.
        was = before if isinstance(before, IdentifierSet) else IdentifierSet()
        now = after if isinstance(after, IdentifierSet) else IdentifierSet()
        old, new = was.canonical(), now.canonical()
        if old == new:
            return NO_DELTA
        added = [item for item in now if nfc(item) not in old]
        removed = [item for item in was if nfc(item) not in new]
        return FieldDelta(added, removed, [])

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


class ContactKind(FieldKind):
    """An object (primaryContact): compared sub-field by sub-field, replaced whole on PATCH.

    A sub-field the files leave out is unmanaged: never compared, and a PATCH of the
    contact carries the server's value of it.
    """

    value_type = Contact

    def __init__(
        self,
        sub_fields: Mapping[str, TextKind],
        required: tuple[str, ...],
        *,
        max_keys: int,
        max_key_chars: int,
        text: TextKind,
    ) -> None:
        self.sub_fields = dict(sub_fields)  # those a file may hold, in the schema's order
        self.required = required
        self.max_keys = max_keys
        # A sub-field's name is bounded like its value: a server's names are compared,
        # merged into PATCH bodies and shown, so a plan's cost must not grow with them.
        self.max_key_chars = max_key_chars
        self.text = text  # a server's sub-field, whatever its name

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

    def differs(self, want: FieldValue, have: FieldValue | None) -> bool:
        if not isinstance(want, Contact) or not isinstance(have, Contact):
            return want != have
        for name, value in want.items():
            held = have.get(name)
            if value != held and _sub_text(value) != _sub_text(held):
                return True
        return False

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
        held = stored if isinstance(stored, Contact) else Contact()
        managed: list[str | None] = []
        noted: list[str] = []
        for name, item in sent.items():
            if _sub_text(item) != _sub_text(held.get(name)):
                (noted if name in kept else managed).append(name)
        return managed, noted

    def delta(self, before: FieldValue | None, after: FieldValue | None) -> FieldDelta:
        was = before if isinstance(before, Contact) else Contact()
        now = after if isinstance(after, Contact) else Contact()
        names = dict.fromkeys([*now, *was])
        subs = [
            (name, was.get(name), now.get(name))
            for name in names
            if _sub_text(was.get(name)) != _sub_text(now.get(name))
        ]
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
