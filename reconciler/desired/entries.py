"""Each entry of an invite file checked and turned into a record as soon as it is read.

The loader hands every entry of `invites:` here while the file is still being
parsed; the entry's positions are dropped once it is checked, so memory holds
the compact records, not the document.
"""

from __future__ import annotations

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
    resend_rule,
)
from reconciler.safetext import escape
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

    def __call__(self, item: Item) -> None:
        entry = item.value
        problems: list[FileProblem] = []
        if not self.schema.entry_is_valid(entry):
            where = Where(item.located(self.lines), self.source, ("invites", item.index))
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
        resend = resend_rule(entry.get(RESEND_KEY, False))
        line, column = item.mark
        source = SourceLocation(self.source, line, column)
        self.invites.append(DesiredInvite(ident, fields, source, resend))

    def _bad_id(self, ident: str, entry: Located) -> None:
        line, column = entry.mark(("id",))
        message = f"`id`: {say(ident)} is not a valid inviteId ({ID_RULE})"
        self.problems.append(FileProblem(self.source, line, column, message))
