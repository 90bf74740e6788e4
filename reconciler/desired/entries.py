"""Each entry of an invite file checked and turned into a record as soon as it is read.

The loader hands every entry of `invites:` here while the file is still being
parsed; the entry's positions are dropped once it is checked, so memory holds
the compact records, not the document.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable
from typing import Any, NamedTuple

from reconciler.errors import FileProblem, ReconcilerError
from reconciler.invite import (
    ID_KEY,
    ID_RULE,
    INVITE_ID,
    RECONCILER_KEYS,
    RESEND_KEY,
    ResendRule,
    nfc_value,
    resend_rule,
)
from reconciler.safetext import NOT_IN_TEXT, escape
from reconciler.schema.check import invite_validators, validate
from reconciler.schema.messages import Where, say
from reconciler.yamlload.items import Item
from reconciler.yamlload.positions import Lines, Located


def refuse_bad_ids(ids: Iterable[str], given_as: str) -> None:
    """Refuse ids given on the command line that no invite can have, before any request."""
    bad = [i for i in dict.fromkeys(ids) if not INVITE_ID.fullmatch(i)]
    if bad:
        shown = ", ".join(say(i) for i in bad[:10]) + (
            f" and {len(bad) - 10} more" if len(bad) > 10 else ""
        )
        raise ReconcilerError(
            f"{given_as} {shown}: not a valid invite id ({ID_RULE}); nothing was read"
        )


class SourceLocation(NamedTuple):
    path: str
    line: int
    column: int = 1

    def __str__(self) -> str:
        return f"{escape(self.path)}:{self.line}"


# Every tuple of field names seen, kept once: the estate's invites name the same
# few sets of fields, so 200,000 invites share a handful of tuples.
_SHARED_NAMES: dict[tuple[str, ...], tuple[str, ...]] = {}


class DesiredInvite:
    """One invite entry: the fields it manages and where it was written.

    Compact, for 200,000 of them: ``__slots__``; the field names as one tuple
    shared by every invite naming the same fields, the values as a tuple (no
    dict per invite: ``fields`` builds one when asked); the source kept as its
    parts (``source`` makes the ``SourceLocation`` when asked).
    """

    __slots__ = ("_column", "_line", "_names", "_path", "_values", "id", "resend_on_change")

    def __init__(
        self,
        id: str,  # the field's name in the files and the API
        fields: dict[str, Any],  # managed fields only; absent means unmanaged
        source: SourceLocation,
        resend_on_change: ResendRule = False,
    ) -> None:
        self.id = id
        names = tuple(fields)
        self._names = _SHARED_NAMES.setdefault(names, names)
        self._values = tuple(fields.values())
        self.resend_on_change = resend_on_change
        self._path, self._line, self._column = source

    @property
    def fields(self) -> dict[str, Any]:
        """The managed fields, in the order written; a new dict each time."""
        return dict(zip(self._names, self._values, strict=True))

    @property
    def source(self) -> SourceLocation:
        return SourceLocation(self._path, self._line, self._column)

    @property
    def name(self) -> str | None:
        if "name" not in self._names:
            return None
        value = self._values[self._names.index("name")]
        return value if isinstance(value, str) else None

    def _parts(self) -> tuple[Any, ...]:
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


class EntryReader:
    """Takes the entries of one file (the loader's item hook); keeps records and problems."""

    def __init__(self, source: str, lines: Lines) -> None:
        self.source = source
        self.lines = lines
        self.schema = invite_validators()
        self.invites: list[DesiredInvite] = []
        self.problems: list[FileProblem] = []
        self._invisible: set[FileProblem] = set()

    def __call__(self, item: Item) -> None:
        # One normal form: what the files say is checked, compared and sent in NFC, so
        # the schema's bounds hold for what is sent (NFC can lengthen text: U+0958 is
        # two characters in NFC) and two spellings of one item are one item.
        # Almost every value is ASCII: only the others are looked at again, in one walk.
        texts: list[str] = []
        _non_ascii(item.value, texts)
        normal = all(unicodedata.is_normalized("NFC", text) for text in texts)
        entry = item.value if normal else nfc_value(item.value)
        problems: list[FileProblem] = []
        if not self.schema.entry_is_valid(entry):
            located = item.located(self.lines)._replace(value=entry)
            where = Where(located, self.source, ("invites", item.index))
            problems = validate(self.schema.entry, where)
            self.problems.extend(problems)
        # Entries with a usable id are kept even when they have problems, so that
        # duplicate ids are reported in the same run; any problem stops the run anyway.
        if not isinstance(entry, dict):
            return
        ident = entry.get(ID_KEY)
        if not isinstance(ident, str):
            return
        if not INVITE_ID.fullmatch(ident) and not problems:
            self._bad_id(ident, item.located(self.lines))
        fields = dict(entry)  # the entry itself may be shared through an alias
        for key in RECONCILER_KEYS:
            fields.pop(key, None)
        if any(NOT_IN_TEXT.search(text) for text in texts):
            self._refuse_invisible(fields, item, problems)
        resend = resend_rule(entry.get(RESEND_KEY, False))
        line, column = item.mark
        source = SourceLocation(self.source, line, column)
        self.invites.append(DesiredInvite(ident, fields, source, resend))

    def _refuse_invisible(
        self, fields: dict[str, Any], item: Item, problems: list[FileProblem]
    ) -> None:
        """A problem for each text value holding a character that ``NOT_IN_TEXT`` refuses.

        ASCII text (almost all of it) is passed over at once. A value the schema has
        already refused (a control character, say) is not reported twice.
        """
        found = [
            (path, text, match.group())
            for path, text in _texts(fields, ())
            if not text.isascii() and (match := NOT_IN_TEXT.search(text)) is not None
        ]
        if not found:
            return
        located = item.located(self.lines)
        reported = {(p.line, p.column) for p in problems}
        for path, text, char in found:
            line, column = located.mark(path)
            if (line, column) in reported:
                continue
            where = ".".join(str(p) for p in path if isinstance(p, str))
            message = f"`{escape(where)}`: {say(text)} {invisible_problem(char)}"
            problem = FileProblem(self.source, line, column, message)
            if problem not in self._invisible:  # a value shared through an alias: once
                self._invisible.add(problem)
                self.problems.append(problem)

    def _bad_id(self, ident: str, entry: Located) -> None:
        line, column = entry.mark(("id",))
        message = f"`id`: {say(ident)} is not a valid inviteId ({ID_RULE})"
        self.problems.append(FileProblem(self.source, line, column, message))


def _non_ascii(value: Any, found: list[str]) -> None:
    """Append to ``found`` every string in ``value`` that is not ASCII."""
    kind = type(value)
    if kind is str:
        if not value.isascii():
            found.append(value)
    elif kind is dict or isinstance(value, dict):
        for item in value.values():
            _non_ascii(item, found)
    elif isinstance(value, list):
        for item in value:
            _non_ascii(item, found)


def _texts(value: Any, path: tuple[Any, ...]) -> Iterable[tuple[tuple[Any, ...], str]]:
    if isinstance(value, str):
        yield path, value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _texts(item, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _texts(item, (*path, index))


def invisible_problem(char: str) -> str:
    """Why a text value may not hold ``char`` (one of ``NOT_IN_TEXT``), and the fix."""
    code = ord(char)
    name = unicodedata.name(char, "")
    shown = f"U+{code:04X}" + (f" {name}" if name else "")
    category = unicodedata.category(char)
    if category == "Zs":
        return f"holds {shown}, which looks like a space but is not one; write a plain space"
    if category in ("Zl", "Zp"):
        return f"holds {shown}, a line break; write the value on one line"
    if category == "Cs":
        return f"holds {shown}, half of a UTF-16 pair and no character at all; remove it"
    return f"holds {shown}, which does not show on screen (two values would look alike); remove it"
