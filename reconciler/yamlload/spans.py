"""Where each value of an invite file begins and ends in its text, for editing it in place.

The loader keeps only where each value begins (``positions``), which is all a
message needs. Rewriting a value needs where it ends too, and whether it is
shared: a value written under an ``&anchor`` (or inside one), an ``*alias``
or a ``<<`` merge stands for more than one place, and editing its text would
change them all. This reads the same libyaml event stream as the loader, once
more and only for a file about to be edited, and keeps for each entry of the
top-level ``invites`` list the spans of its values. Offsets are characters of
the decoded text (BOM dropped), as libyaml counts them.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any

import yaml

from reconciler.yamlload.builder import Parser

# A blank line to YAML: spaces, tabs and the line break. Other Unicode spaces (U+3000)
# are text, and a line of them is a value's.
_WHITE = " \t\r\n"


@dataclass(slots=True)
class Span:
    """One value as written: ``text[start:end]``; for a list its items, for a mapping its keys."""

    start: int
    end: int  # just past its last character; for a block collection, past its last value
    kind: str  # "scalar", "list", "mapping" or "alias"
    shared: bool  # an anchor, an alias or a merge: editing it would change other places
    style: str | None = None  # a scalar's: None (plain), "'", '"', "|", ">"; a collection's: flow
    flow: bool = False  # a collection written in [ ] or { }
    value: Any = None  # a scalar's text as read
    key_end: int = -1  # just past the key naming this value (in a mapping)
    items: list[Span] = field(default_factory=list)
    keys: dict[str, Span] = field(default_factory=dict)
    merged: bool = False  # a mapping with a `<<` key: some of its values come from elsewhere


@dataclass
class InviteSpans:
    """The ``invites`` list as written: its span and its entries (None when not a plain list)."""

    list_span: Span | None
    entries: list[Span]


def invite_spans(text: str, wanted: Collection[int] | None = None) -> InviteSpans:
    """The spans of the top-level ``invites`` list of ``text`` (which the loader accepted).

    ``wanted``: where the entries to be edited start; the others get their own span
    only, not one per value (a 20,000-invite file is read for one edit).
    """
    root = _read(text, wanted)
    if root is None or root.kind != "mapping":
        return InviteSpans(None, [])
    found = root.keys.get("invites")
    if found is None or found.kind != "list":
        return InviteSpans(found, [])
    return InviteSpans(found, found.items)


def _read(text: str, wanted: Collection[int] | None, base: int = 0) -> Span | None:
    """The spans of the document in ``text``, offsets counted from ``base``."""
    parser = Parser(text)
    try:
        return _Reader(text, wanted, base).read(parser)
    finally:
        parser.dispose()


class _Open:
    """A mapping or list being read: its span, and a mapping's pending key."""

    __slots__ = ("key", "span")

    def __init__(self, span: Span) -> None:
        self.span = span
        self.key: tuple[str, int] | None = None  # a mapping's pending key and where it ends


class _Reader:
    """Spans made from one parser's events: a stack of the collections open."""

    def __init__(self, text: str, wanted: Collection[int] | None, base: int) -> None:
        self.text = text
        self.wanted = wanted
        self.base = base
        self.stack: list[_Open] = []
        self.top: Span | None = None  # the document's value, once read
        self.skipped: Span | None = None  # an entry not wanted, read through for its end only
        self.flows: list[bool] = []  # the skipped entry's open collections: in flow style?

    def read(self, parser: Any) -> Span | None:
        while (event := parser.get_event()).__class__ is not yaml.StreamEndEvent:
            if self.skipped is not None:
                self._skip(event)
            elif isinstance(event, yaml.ScalarEvent | yaml.AliasEvent):
                self._give(self._leaf(event))
            elif isinstance(event, yaml.CollectionStartEvent):
                self._open(event)
            elif isinstance(event, yaml.CollectionEndEvent):
                self._close(event)
        return self.top

    def _leaf(self, event: Any) -> Span:
        start, end = self.base + event.start_mark.index, self.base + _end(self.text, event)
        if isinstance(event, yaml.AliasEvent):
            return Span(start, end, "alias", True)
        shared = self._inherited() or event.anchor is not None
        return Span(start, end, "scalar", shared, event.style or None, value=event.value)

    def _open(self, event: Any) -> None:
        start = self.base + event.start_mark.index
        kind = "mapping" if isinstance(event, yaml.MappingStartEvent) else "list"
        flow = bool(event.flow_style)
        # A merge's value is shared whatever it is: its keys belong elsewhere.
        key = self.stack[-1].key if self.stack else None
        merging = key is not None and key[0] == "<<"
        shared = self._inherited() or event.anchor is not None or merging
        span = Span(start, start, kind, shared, flow=flow)
        if self.wanted is not None and self._is_entry() and start not in self.wanted:
            self.skipped, self.flows = span, [flow]
        else:
            self.stack.append(_Open(span))

    def _close(self, event: Any) -> None:
        done = self.stack.pop().span
        end = self.base + event.end_mark.index
        if done.flow and end > done.end:  # a block collection's end mark is past what follows
            done.end = end
        self._give(done)

    def _skip(self, event: Any) -> None:
        """An event inside an entry not wanted: only where the entry ends is kept."""
        skipped = self.skipped
        assert skipped is not None
        if isinstance(event, yaml.ScalarEvent | yaml.AliasEvent):
            skipped.end = max(skipped.end, self.base + _end(self.text, event))
        elif isinstance(event, yaml.CollectionStartEvent):
            self.flows.append(bool(event.flow_style))
        elif isinstance(event, yaml.CollectionEndEvent):
            end: Any = event.end_mark  # a block collection's is past what follows it
            if self.flows.pop():
                skipped.end = max(skipped.end, self.base + end.index)
            if not self.flows:
                self.skipped = None
                self._give(skipped)

    def _inherited(self) -> bool:
        return bool(self.stack) and self.stack[-1].span.shared

    def _is_entry(self) -> bool:
        """Whether a collection opening now is an item of the top-level ``invites`` list."""
        stack = self.stack
        if len(stack) != 2 or stack[1].span.kind != "list":
            return False
        key = stack[0].key
        return key is not None and key[0] == "invites"

    def _give(self, span: Span) -> None:
        """``span`` to the collection being read, or the document's value."""
        if not self.stack:
            self.top = span
        elif self.stack[-1].span.kind == "list":
            self.stack[-1].span.items.append(span)
            _grow(self.stack[-1].span, span)
        elif self.stack[-1].key is None:
            _take_key(self.stack[-1], span)
        else:
            _take_value(self.stack[-1], span)


def entry_span(text: str, start: int, end: int) -> Span | None:
    """The span of the one entry of a block list that starts at ``start`` and whose
    lines end at ``end`` (where the next entry's line starts), read from them alone.

    None when that is not possible (the entry is not `- ` on its own line, or what it
    holds needs the rest of the file, an alias of an anchor elsewhere): read the file.
    """
    place = dash_line(text, start)
    if place is None:
        return None
    line = place[0]
    try:
        found = _read(text[line:end], None, base=line)
    except yaml.YAMLError:
        return None
    if found is None or found.kind != "list" or len(found.items) != 1:
        return None
    entry = found.items[0]
    return entry if entry.start == start and entry.kind == "mapping" else None


def _grow(parent: Span, span: Span) -> None:
    parent.end = max(parent.end, span.end)


def _take_key(holder: _Open, span: Span) -> None:
    _grow(holder.span, span)
    key = span.value if span.kind == "scalar" and isinstance(span.value, str) else ""
    holder.key = (key, span.end)
    if key == "<<" and span.style is None and span.kind == "scalar":
        holder.span.merged = True


def _take_value(holder: _Open, span: Span) -> None:
    parent = holder.span
    _grow(parent, span)
    assert holder.key is not None
    key, span.key_end = holder.key
    holder.key = None
    if key == "<<" and parent.merged:
        return
    parent.keys.setdefault(key, span)  # a repeated key is refused by the loader before this


# -- the lines a block list's entry stands on ------------------------------------------------


def _end(text: str, event: Any) -> int:
    """Where ``event``'s value ends in ``text``: libyaml's end mark, but for a block scalar
    (``|``, ``>``) past its last line that holds text. libyaml's mark also takes the blank
    lines after it, which are the value's only when it keeps them (``|+``, ``>+``)."""
    end: int = event.end_mark.index
    if getattr(event, "style", None) not in ("|", ">"):
        return end
    start: int = event.start_mark.index
    if "+" in text[start + 1 : start + 3]:  # the chomping indicator, before or after a digit
        return end
    while True:
        line = text.rfind("\n", start, end - 1) + 1  # where the last line before ``end`` starts
        if line <= start or text[line:end].strip(_WHITE):
            return end
        end = line


def line_end(text: str, position: int) -> int:
    """Just past the line break that ends the line holding ``position`` (or the text's end)."""
    found = text.find("\n", position)
    return len(text) if found < 0 else found + 1


def value_end(text: str, end: int) -> int:
    """Just past the line break that ends the last line of a value ending at ``end``: a
    block scalar (``|``, ``>``) ends past its own line break, and the next line is not its."""
    return end if text[end - 1 : end] == "\n" else line_end(text, end)


def dash_line(text: str, start: int) -> tuple[int, int] | None:
    """Where the line of a block list's item starting at ``start`` begins, and where its
    dash is; None when the item is not `- item` on a line of its own."""
    dash = text.rfind("-", 0, start)
    line = text.rfind("\n", 0, dash) + 1
    if dash < 0 or text[line:dash].strip(" ") or text[dash + 1 : start].strip():
        return None
    return (line, dash)


def entry_lines(text: str, entry: Span) -> tuple[int, int] | None:
    """The lines of a block list's entry: its comment lines just above, and itself."""
    place = dash_line(text, entry.start)
    if place is None:
        return None
    start, dash = place
    indent = text[start:dash]
    while start > 0:  # its own comments: lines just above, at its indentation
        above = text.rfind("\n", 0, start - 1) + 1
        if not text[above:start].startswith(indent + "#"):
            break
        start = above
    return (start, value_end(text, entry.end))


def cut_lines(text: str, start: int, end: int) -> tuple[int, int]:
    """What removing the whole lines ``start``..``end`` cuts: them, and the blank lines
    after them or, when none follow (the list's last entry), those before them; the lines
    around are then spaced as they were."""
    after = end
    while after < len(text) and _blank(text, after):
        after = line_end(text, after)
    if after > end:
        return (start, after)
    while start > 0:
        above = text.rfind("\n", 0, start - 1) + 1
        if not _blank(text, above):
            break
        start = above
    return (start, end)


def _blank(text: str, start: int) -> bool:
    end = text.find("\n", start)
    return not text[start : len(text) if end < 0 else end].strip(_WHITE)
