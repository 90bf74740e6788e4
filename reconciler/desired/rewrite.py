"""An invite file's text with some values replaced, and entries removed, in place.

`reconcile adopt` brings the platform's values into git without reformatting
anything it does not change: each value is replaced where it is written
(its span, below), in the style it is written in (plain, quoted, a flow or
block list), and every other character of the file stays as it was. A value
that is shared through an anchor, an alias or a merge is not edited: it is
returned as refused, for the author to change by hand; so is a value no file can
hold (``desired.state.unheld``: U+00A0, a tab), and the file stays valid.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import yaml

from reconciler.desired.state import cannot_hold
from reconciler.model.invite import (
    Contact,
    Fields,
    FieldValue,
    HeldFields,
    IdentifierSet,
    canonical,
    nfc,
)
from reconciler.yamlload.builder import Lines, Mark, Parser, render_scalar


@dataclass(frozen=True)
class Wanted:
    """What one entry should say: the platform's value of each field that differs."""

    id: str
    line: int  # where the entry starts, as the loader placed it
    column: int
    fields: HeldFields  # field -> the platform's value (a contact: the whole of it), or None
    written: Fields  # field -> the value the file holds now
    remove: str | None = None  # the invite's status, when its entry is to be removed


@dataclass(frozen=True)
class Edit:
    line: int
    id: str
    field: str  # "primaryContact.name" for a sub-field
    old: FieldValue | None  # a sub-field's: its text
    new: FieldValue | None


@dataclass(frozen=True)
class Refused:
    line: int
    id: str
    field: str | None  # None: the entry as a whole (removal)
    new: FieldValue | None  # a removal's: the invite's status
    reason: str


@dataclass
class Rewritten:
    text: str
    edits: list[Edit] = field(default_factory=list)
    removed: list[Edit] = field(default_factory=list)  # field "", old = status
    refused: list[Refused] = field(default_factory=list)


SHARED = "it comes through an anchor, alias or merge (editing it would change other places)"
NO_VALUE = "the platform holds no value for it; delete it from the file to stop managing it"
_ODD_LAYOUT = "it is written in a layout adopt does not edit"
# Line breaks to YAML besides the line feed (and a CR before it): `value_end` knows only LF.
_OTHER_BREAK = re.compile("\r(?!\n)|[\x85\u2028\u2029]")


def rewrite(text: str, wanted: Iterable[Wanted]) -> Rewritten:
    """``text`` with each wanted entry's fields set to the platform's values."""
    return _Rewrite(text).run(list(wanted))


Replacement = tuple[int, int, str]  # text[start:end] becomes the new text


class _Rewrite:
    """One file's edits: what is replaced, and in ``result`` what was edited or refused."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.lines = Lines(text)
        self.result = Rewritten(text)

    def run(self, wanted: list[Wanted]) -> Rewritten:
        spans = invite_spans(self.text, {(w.line, w.column) for w in wanted})
        placed = {self.lines.mark(entry.start): entry for entry in spans.items} if spans else {}
        entries = {w.id: placed.get(Mark(w.line, w.column)) for w in wanted}
        made = self._removals(spans, self._owned(wanted, entries))
        removed = {edit.id for edit in self.result.removed}
        for want in wanted:
            if want.id not in removed:
                made += self._entry_edits(want, entries[want.id])
        self.result.text = _apply(self.text, made)
        self.result.edits.sort(key=lambda e: e.line)
        self.result.refused.sort(key=lambda r: r.line)
        return self.result

    def _entry_edits(self, want: Wanted, entry: Span | None) -> list[Replacement]:
        """The edits of one entry's fields; those refused are said in ``result``."""
        made: list[Replacement] = []
        for name, new in want.fields.items():
            old = want.written.get(name)
            span = entry.keys.get(name) if entry is not None and not entry.shared else None
            if isinstance(old, Contact):  # edited sub-field by sub-field
                made += self._object(want, name, span, old, new)
            else:
                made += self._field(want, name, span, new)
        return made

    def _line(self, span: Span | None, want: Wanted) -> int:
        return self.lines.mark(span.start).line if span is not None else want.line

    def _field(
        self, want: Wanted, name: str, span: Span | None, new: FieldValue | None
    ) -> list[Replacement]:
        """The edit of one field's value; none when it is refused, with why, in ``result``."""
        place = self._line(span, want)
        if new is None:
            reason = NO_VALUE
        elif span is None or span.shared:
            reason = SHARED
        else:
            unheld = cannot_hold(want.id, name, new)
            made = _value(self.text, span, new) if unheld is None else None
            if made is not None:
                self.result.edits.append(Edit(place, want.id, name, want.written.get(name), new))
                return made
            reason = unheld or _ODD_LAYOUT
        self.result.refused.append(Refused(place, want.id, name, new, reason))
        return []

    def _object(
        self, want: Wanted, name: str, span: Span | None, old: Contact, new: FieldValue | None
    ) -> list[Replacement]:
        """Edits of the sub-fields of an object the entry manages one by one."""
        held = new if isinstance(new, Contact) else Contact()
        made: list[Replacement] = []
        for key, was in old.items():
            now = held.get(key)
            if canonical(was) == canonical(now):
                continue
            label = f"{name}.{key}"
            inner = span.keys.get(key) if span is not None and span.kind == "mapping" else None
            place = self._line(inner or span, want)
            if now is None:
                reason: str | None = NO_VALUE
            elif span is None or inner is None or inner.shared or span.shared:
                reason = SHARED
            elif inner.kind != "scalar":
                reason = _ODD_LAYOUT
            else:
                reason = cannot_hold(want.id, name, old.merged(Contact({key: now})), key)
            if reason is not None:
                self.result.refused.append(Refused(place, want.id, label, now, reason))
                continue
            assert span is not None and inner is not None and now is not None
            made.append((inner.start, inner.end, _scalar(now, inner, self.text, span.flow)))
            self.result.edits.append(Edit(place, want.id, label, was, now))
        return made

    def _owned(
        self, wanted: list[Wanted], entries: dict[str, Span | None]
    ) -> list[tuple[int, int]]:
        """The lines of each entry to remove; one that does not stand alone on them: refused."""
        owned = []
        for want in (w for w in wanted if w.remove is not None):
            entry = entries[want.id]
            own = None if entry is None or entry.shared else entry_lines(self.text, entry)
            if own is None:
                reason = SHARED if entry is None or entry.shared else _ODD_LAYOUT
                self.result.refused.append(Refused(want.line, want.id, None, want.remove, reason))
            else:
                owned.append(own)
                self.result.removed.append(Edit(want.line, want.id, "", want.remove, None))
        return owned

    def _removals(self, spans: Span | None, owned: list[tuple[int, int]]) -> list[Replacement]:
        text = self.text
        made = [(*cut_lines(text, start, end), "") for start, end in _runs(text, owned)]
        if spans is not None and owned and len(owned) == len(spans.items):
            # Every entry goes: a comment on the key's line or among the entries (none's
            # own) stays, as does the file's line break.
            return [_emptied(text, spans), *made]
        return made


def _value(text: str, span: Span, new: FieldValue) -> list[Replacement] | None:
    """The edit of a value to ``new`` in its own layout; None when adopt does not edit it."""
    if span.kind == "scalar" and isinstance(new, str):
        return [(span.start, span.end, _scalar(new, span, text, False))]
    if span.kind != "list" or not isinstance(new, IdentifierSet):
        return None
    if any(item.kind != "scalar" or item.shared for item in span.items):
        return None
    if not span.flow:
        return _block_list(text, span, new)
    if _flow_comments(text, span):
        return _commented_flow_list(span, new)
    return [(span.start, span.end, _flow_list(_kept_then_added(span, new)))]


def _flow_comments(text: str, span: Span) -> bool:
    """Whether a comment sits between the items of a flow list (never inside an item)."""
    bounds = [span.start, *(at for item in span.items for at in (item.start, item.end)), span.end]
    return any("#" in text[a:b] for a, b in zip(bounds[::2], bounds[1::2], strict=True))


def _commented_flow_list(span: Span, new: IdentifierSet) -> list[Replacement] | None:
    """A flow list with comments inside, edited without losing them: items the platform
    added follow the last item; removing an item is left to the author (None)."""
    items = _kept_then_added(span, new)
    if sum(item is not None for item, _ in items) != len(span.items) or not span.items:
        return None
    added = "".join(
        ", " + render_scalar(value, None, True) for item, value in items if item is None
    )
    return [(span.items[-1].end, span.items[-1].end, added)]


def _kept_then_added(span: Span, new: IdentifierSet) -> list[tuple[Span | None, object]]:
    """The set's items: those written that the platform still holds, in their order, then
    the platform's others, sorted."""
    held = {nfc(v): v for v in new}
    kept = [(item, item.value) for item in span.items if _item_key(item) in held]
    written = {_item_key(item) for item in span.items}
    added = sorted(v for k, v in held.items() if k not in written)
    return [*kept, *((None, v) for v in added)]


def _item_key(item: Span) -> str | None:
    """An item as written, compared as the set's items are; None: not text at all."""
    return nfc(item.value) if isinstance(item.value, str) else None


def _flow_list(items: list[tuple[Span | None, object]]) -> str:
    return "[" + ", ".join(_item_text(item, value, True) for item, value in items) + "]"


def _item_text(item: Span | None, value: object, flow: bool) -> str:
    if item is not None and item.style is None:
        return str(item.value)  # kept as written
    return render_scalar(value, item.style if item is not None else None, flow)


def _block_list(text: str, span: Span, new: IdentifierSet) -> list[Replacement] | None:
    """Item by item: lines of items the platform no longer holds go, new items follow the last.
    None when an item is not `- item` on a line of its own, or one cannot be cut alone."""
    places = [place for item in span.items if (place := dash_line(text, item.start))]
    if not places or len(places) != len(span.items):
        return None
    items = _kept_then_added(span, new)
    kept = {id(item) for item, _ in items if item is not None}
    cuts = [
        _item_cut(text, item, *place)
        for item, place in zip(span.items, places, strict=True)
        if id(item) not in kept
    ]
    made = [cut for cut in cuts if cut is not None]
    if len(made) != len(cuts):
        return None
    added = [value for item, value in items if item is None]
    if not added and not kept:  # nothing left; comments among its items stay
        return [_emptied(text, span), *made]
    if added:
        first_line, first_dash = places[0]
        made.append(_items_after(text, span.items[-1], text[first_line:first_dash], added))
    return made


def _emptied(text: str, span: Span) -> Replacement:
    """A list left with nothing becomes `[]` after its key (a colon in a comment above its
    first item is not the key's), the file stays valid."""
    colon = text.index(":", span.key_end)
    return (colon + 1, colon + 1, " []")


def _item_cut(text: str, item: Span, start: int, dash: int) -> Replacement | None:
    """A removed item's line cut, from ``start``; a comment on it stays, on a line of its own."""
    end = value_end(text, item.end)
    if _OTHER_BREAK.search(text, item.end, end):
        # YAML ends the line there (a lone CR, NEL, LS, PS) and what follows is a
        # line of its own, a comment perhaps: cut to the line feed, it would go.
        return None
    # A block scalar's comment is on its header line, after the indicators (`- |-  # why`).
    if item.style in ("|", ">"):  # after a tag, if any (`- !!str |-  # why`)
        indicator = text.find(item.style, item.start)
        header = text[indicator + 1 : text.find("\n", indicator) + 1]
        comment = header.lstrip("+-0123456789").lstrip(" \t")
    else:
        comment = text[item.end : end].lstrip(" \t")
    return (start, end, text[start:dash] + comment if comment.startswith("#") else "")


def _items_after(text: str, last: Span, indent: str, added: list[object]) -> Replacement:
    """New items as lines after the ``last`` item's, at ``indent``, in the file's line ends."""
    end = value_end(text, last.end)
    newline = "\r\n" if text.endswith("\r\n", 0, end) else "\n"
    lines = "".join(f"{indent}- {render_scalar(value, None, False)}{newline}" for value in added)
    if not text.endswith("\n", 0, end):
        lines = newline + lines.removesuffix(newline)
    return (end, end, lines)


# -- removing entries ------------------------------------------------------------------------------


def _runs(text: str, owned: list[tuple[int, int]]) -> list[list[int]]:
    """Entries to remove with only blank lines between them, as one run each."""
    # Entries with only blank lines between them go as one run, cut as one entry is. Cut
    # one by one, each takes the blank lines on one side of it, and two could take the
    # same ones (the last two of a list: overlapping cuts, `_apply` makes only the first
    # and adopt refuses the file) or those on both sides of the pair (two in the middle
    # with none between them: the entries kept around them joined with no blank line).
    runs: list[list[int]] = []
    for start, end in sorted(owned):
        if runs and not text[runs[-1][1] : start].strip():
            runs[-1][1] = end
        else:
            runs.append([start, end])
    return runs


# -- scalars ---------------------------------------------------------------------------------------


def _scalar(value: str, span: Span, text: str, flow: bool) -> str:
    rendered = render_scalar(value, span.style, flow)
    written = text[span.start : span.end]
    if span.style in ("|", ">") and written.endswith("\n"):
        # A block scalar's span ends with its line break: the file's own (CRLF or LF).
        rendered += "\r\n" if written.endswith("\r\n") else "\n"
    return rendered


def _apply(text: str, replacements: list[Replacement]) -> str:
    pieces = []
    at = 0
    for start, end, new in sorted(replacements, key=lambda r: (r[0], r[1])):
        if start < at:  # two edits of one place: never expected; the check after catches it
            continue
        pieces.append(text[at:start])
        pieces.append(new)
        at = end
    pieces.append(text[at:])
    return "".join(pieces)


# Where each value of an invite file begins and ends in its text, for editing it in place.
#
# The loader keeps only where each value begins, which is all a message needs. Rewriting a value
# needs where it ends too, its style, and whether it is shared: a value written under an
# ``&anchor`` (or inside one), an ``*alias`` or a ``<<`` merge stands for more than one place, and
# editing its text would change them all. This reads the same libyaml event stream as the loader,
# once more and only for a file about to be edited. The loader accepted the file, so its nesting
# is bounded (DEPTH_LIMIT) and the reading may recurse. Offsets are characters of the decoded text
# (BOM dropped), as libyaml counts them.

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
    style: str | None = None  # a scalar's: None (plain), "'", '"', "|", ">"
    flow: bool = False  # a collection written in [ ] or { }
    value: Any = None  # a scalar's text as read
    key_end: int = -1  # just past the key naming this value (in a mapping)
    items: list[Span] = field(default_factory=list)
    keys: dict[str, Span] = field(default_factory=dict)  # a `<<`'s value is not one of them


Places = Collection[tuple[int, int]]  # where entries start: 1-based line and column


def invite_spans(text: str, wanted: Places | None = None) -> Span | None:
    """The span of the top-level ``invites`` list of ``text`` (which the loader accepted), its
    entries its items; None when there is no such list.

    ``wanted``: where the entries to be edited start; the others get their own span
    only, not one per value (a 20,000-invite file is read for one edit: 1 s and 120 MB less).
    """
    parser = Parser(text)
    try:
        events = iter(parser.get_event, None)
        root = next((e for e in events if isinstance(e, _PARTS)), None)
        top = _Reader(text, events).span(root, False, wanted) if root is not None else None
    finally:
        parser.dispose()
    found = top.keys.get("invites") if top is not None else None
    return found if found is not None and found.kind == "list" else None


_PARTS = (yaml.ScalarEvent, yaml.AliasEvent, yaml.CollectionStartEvent)


class _Reader:
    """Spans made from one parser's events, a value at a time."""

    def __init__(self, text: str, events: Iterator[Any]) -> None:
        self.text = text
        self.events = events

    def span(self, event: Any, shared: bool, wanted: Places | None = None) -> Span:
        """The value ``event`` begins; ``wanted``: in the top-level mapping, its invites'."""
        start = event.start_mark.index
        if isinstance(event, yaml.AliasEvent):
            return Span(start, _end(self.text, event), "alias", True)
        shared = shared or event.anchor is not None
        if isinstance(event, yaml.ScalarEvent):
            style = event.style or None
            return Span(start, _end(self.text, event), "scalar", shared, style, value=event.value)
        kind = "mapping" if isinstance(event, yaml.MappingStartEvent) else "list"
        span = Span(start, start, kind, shared, flow=bool(event.flow_style))
        while not isinstance(part := next(self.events), yaml.CollectionEndEvent):
            if kind == "list":
                item = self._entry(part, span, wanted)
                span.items.append(item)
                span.end = max(span.end, item.end)
                continue
            key = self.span(part, shared)
            name = key.value if key.kind == "scalar" and isinstance(key.value, str) else ""
            # A merge's value is shared whatever it is: its keys belong elsewhere.
            inner = wanted if name == "invites" and wanted is not None else None
            value = self.span(next(self.events), shared or name == "<<", inner)
            value.key_end = key.end
            if name != "<<":
                span.keys.setdefault(name, value)  # a repeated key: refused by the loader
            span.end = max(span.end, value.end)
        if span.flow:  # a block collection's end mark is past what follows
            span.end = max(span.end, _index(part.end_mark))
        return span

    def _entry(self, event: Any, into: Span, wanted: Places | None) -> Span:
        at = event.start_mark  # placed as the loader places an entry: by libyaml's mark
        if wanted is None or isinstance(event, _LEAVES) or (at.line + 1, at.column + 1) in wanted:
            return self.span(event, into.shared)
        flow = bool(event.flow_style)
        kind = "mapping" if isinstance(event, yaml.MappingStartEvent) else "list"
        shared = into.shared or event.anchor is not None
        return Span(event.start_mark.index, self._end_of(event), kind, shared, flow=flow)

    def _end_of(self, event: Any) -> int:
        """Where the value ``event`` begins ends, its parts read for that alone."""
        if isinstance(event, _LEAVES):
            return _end(self.text, event)
        end = _index(event.start_mark)
        while not isinstance(part := next(self.events), yaml.CollectionEndEvent):
            end = max(end, self._end_of(part))
        return max(end, _index(part.end_mark)) if event.flow_style else end


_LEAVES = (yaml.ScalarEvent, yaml.AliasEvent)


def _index(mark: Any) -> int:
    return int(mark.index)  # every event of libyaml's has its marks


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
