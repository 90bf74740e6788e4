"""Where each part of a loaded YAML value was written, kept compactly.

A position is one int: the offset of the value's first character in the
text, as libyaml reports it. Lines and columns are worked out only when
someone asks (an error, an invite's ``source``). A ``Spot`` holds the
positions of one mapping's or list's parts; values stay plain dicts and
lists, with the spot tree beside them, so a schema error at
``("invites", 3, "phone")`` can be reported at the line and column it names.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable
from typing import Any, NamedTuple

START = 0
_BREAK = re.compile("\r\n|[\r\n\x85\u2028\u2029]")


class Mark(NamedTuple):
    line: int  # 1-based
    column: int  # 1-based


class Lines:
    """Line and column of a character offset, counted as libyaml counts them.

    The text is decoded once, when first needed: offsets asked for in
    increasing order cost only the text between two answers; any other is
    looked up in a table of line starts, made the first time one is needed.
    (The builder places each streamed item by libyaml's own mark instead, so a
    valid file read in chunks is never read again: see ``Builder.mark``.)
    """

    def __init__(self, source: str | bytes | Callable[[], bytes]) -> None:
        # A callable gives the file's bytes again: a file read in chunks is
        # not kept in memory, and is read again only if a problem needs a line.
        self._source = source
        self._text: str | None = None  # decoded from ``data``: a BOM is dropped either way
        self._plain: bool | None = None
        self._offset = 0  # the last offset answered, its line, and where that line starts
        self._line = 0
        self._start = 0
        self._starts: list[int] | None = None  # where each line starts, for other texts

    @property
    def data(self) -> bytes:
        """The bytes read (the text's UTF-8 when the source is text)."""
        source = self._source
        if isinstance(source, str):
            return source.encode("utf-8", "surrogatepass")
        return source if isinstance(source, bytes) else source()

    @property
    def text(self) -> str:
        if self._text is None:
            data = self.data
            # Undecodable bytes past a syntax error still count as one character each.
            self._text = data.removeprefix(b"\xef\xbb\xbf").decode("utf-8", "replace")
        return self._text

    @property
    def plain(self) -> bool:
        """Whether "\\n" alone breaks lines, as in almost every file."""
        if self._plain is None:
            # libyaml also breaks lines at a lone CR, NEL, LS and PS.
            text = self.text
            self._plain = not any(c in text for c in "\x85\u2028\u2029") and text.count(
                "\r"
            ) == text.count("\r\n")
        return self._plain

    def mark(self, offset: int) -> Mark:
        if not self.plain or offset < self._offset:
            return self._looked_up(offset)
        text = self.text
        breaks = text.count("\n", self._offset, offset)
        if breaks:
            self._line += breaks
            self._start = text.rfind("\n", self._offset, offset) + 1
        self._offset = offset
        return Mark(self._line + 1, offset - self._start + 1)

    def _looked_up(self, offset: int) -> Mark:
        starts = self._line_starts()
        line = bisect.bisect_right(starts, offset) - 1
        return Mark(line + 1, offset - starts[line] + 1)

    def _line_starts(self) -> list[int]:
        if self._starts is None:
            self._starts = [0, *(m.end() for m in _BREAK.finditer(self.text))]
        return self._starts

    def offset(self, mark: Mark | tuple[int, int]) -> int:
        """The character offset of a line and column: ``mark``'s inverse."""
        line, column = mark
        starts = self._line_starts()
        return starts[line - 1] + column - 1 if 0 < line <= len(starts) else -1


class Spot:
    """Positions of the parts of one mapping or list.

    For a mapping, ``keys`` and ``at`` map each key to the position of the key
    and of its value; for a list, ``keys`` is None and ``at`` lists the
    position of each item. ``raw`` keeps the text of plain scalars YAML did
    not read as strings (``NO``, ``12:30``), ``kids`` the spots of nested
    mappings and lists; both are created only when needed.
    """

    __slots__ = ("at", "keys", "kids", "raw")

    def __init__(self, keys: dict[Any, int] | None, at: dict[Any, int] | list[int]) -> None:
        self.keys = keys
        self.at = at
        self.raw: dict[Any, str] | None = None
        self.kids: dict[Any, Spot] | None = None

    def position(self, step: Any) -> int | None:
        at = self.at
        if isinstance(at, dict):
            return at.get(step)
        if isinstance(step, int) and 0 <= step < len(at):
            return at[step]
        return None

    def kid(self, step: Any) -> Spot | None:
        return self.kids.get(step) if self.kids else None


class Located(NamedTuple):
    """A loaded value, its spot, its own position and the text's lines."""

    value: Any
    spot: Spot | None
    position: int
    lines: Lines

    def walk(self, path: tuple[Any, ...] | list[Any]) -> Walked:
        """The spot and position of the part at ``path``, or of the deepest part reached.

        Positions are kept only for parts that exist, so the value is not looked at.
        """
        spot, position = self.spot, self.position
        for taken, step in enumerate(path):
            if spot is None:  # a scalar: nothing inside
                return Walked(spot, position, taken)
            inner = spot.position(step)
            if inner is None:
                return Walked(spot, position, taken)
            spot, position = spot.kid(step), inner
        return Walked(spot, position, len(path))

    def mark(self, path: tuple[Any, ...] | list[Any] = ()) -> Mark:
        """Where the value at ``path`` was written (or the deepest part of it found)."""
        return self.lines.mark(self.walk(path).position)

    def key_mark(self, path: tuple[Any, ...] | list[Any]) -> Mark:
        """Where the key naming the value at ``path`` was written, else the value."""
        if path and isinstance(path[-1], str):
            keys = _keys(self.walk(path[:-1]).holder(path))
            if path[-1] in keys:
                return self.lines.mark(keys[path[-1]])
        return self.mark(path)

    def raw(self, path: tuple[Any, ...] | list[Any]) -> str | None:
        """The text of a plain scalar YAML read as a non-string, as written."""
        if not path:
            return None
        holder = self.walk(path[:-1]).holder(path)
        return holder.raw.get(path[-1]) if holder is not None and holder.raw else None


class Walked(NamedTuple):
    """How far a path went into a located value: the spot and position there."""

    spot: Spot | None
    position: int
    taken: int  # steps of the path taken

    def holder(self, path: tuple[Any, ...] | list[Any]) -> Spot | None:
        """The spot of what holds the last step of ``path``, if the walk got there."""
        return self.spot if self.taken == len(path) - 1 else None


def _keys(spot: Spot | None) -> dict[Any, int]:
    return (spot.keys if spot is not None else None) or {}
