"""An invite as the files want it (DesiredInvite) and as the server holds it (CurrentInvite).

Each is made once, where it comes in: a DesiredInvite by the loader
(``desired.state``) from an entry the schema has checked, a CurrentInvite by
the API client from an answer whose values its kinds have checked. Past that
point an invite's values are typed (``reconciler.model.values``), never JSON.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import NamedTuple

from reconciler.model.values import Fields, FieldValue, shared
from reconciler.safetext import escape

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

    Compact, for 200,000 of them: ``__slots__``; the field names as one tuple
    shared by every invite naming the same fields, the values as a tuple (no
    dict per invite: ``fields`` builds one when asked); the source kept as its
    parts (``source`` makes the ``SourceLocation`` when asked).
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
