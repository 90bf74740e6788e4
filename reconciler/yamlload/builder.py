"""Plain values built straight from libyaml's event stream, bounded as events arrive.

Events, not PyYAML's composer and constructor: five times faster than its C loader,
and each value's position kept. No node graph and no recursion: each event updates a
stack of frames (a mapping, a list, the document), so the nesting depth is checked
before a container is opened, and the size of what aliases expand to is counted at
each alias, before anything downstream (the schema, a diff, a copy) could walk the
expansion: a "billion laughs" file is refused at the alias that crosses the bound,
having cost nothing. A mapping frame is where YAML's silent traps are caught:
duplicate keys (``<<`` merge keys included), keys YAML reads as something other than
text, and merges of things that are not mappings.

The items of one chosen list (the invite entries) are handed, each ``Located``, to a
hook as soon as they are built, and not kept: a file of 200,000 invites is read
without holding them. Each part's position (``Lines``, ``Spot``, ``Located``) is kept
compactly beside the values, first below.

What YAML 1.1 makes of a scalar comes first: PyYAML's own rules (its implicit resolvers
and safe constructors), so values load exactly as ``yaml.safe_load`` would read them;
only the way of reporting changes: the text as written, never a Python repr. A value is
written back (``render_scalar``) as a scalar that reads as that value.
"""

from __future__ import annotations

import bisect
import json
import re
from collections.abc import Callable
from typing import Any, NamedTuple

import yaml

from reconciler.safetext import escape, kind_in_words, quote_value

# What YAML 1.1 makes of a scalar.

YAML_TAG = "tag:yaml.org,2002:"
STR_TAG = YAML_TAG + "str"
MERGE_TAG = YAML_TAG + "merge"
MAP_TAGS = frozenset({YAML_TAG + "map"})
SEQ_TAGS = frozenset({YAML_TAG + "seq", YAML_TAG + "omap"})
# The patterns YAML 1.1 reads a plain scalar by, by its first character; most keys and
# values start with none of these, and are not looked at again.
_RESOLVERS: dict[str | None, tuple[tuple[str, Callable[[str], object]], ...]] = {
    first: tuple((tag, regexp.match) for tag, regexp in resolvers)
    for first, resolvers in yaml.resolver.Resolver.yaml_implicit_resolvers.items()
}
RESOLVED_FIRST = frozenset(_RESOLVERS)
# Tags YAML resolves that have no value of their own: the text stays a string.
_STAYS_TEXT = frozenset({STR_TAG, YAML_TAG + "value", YAML_TAG + "yaml"})
# Python will not write out an int of more than 4,300 digits (about 14,284 bits):
# `0x` and 5,000 `f`s would break every message that shows the value.
_MAX_INT_BITS = 14_000
_SAFE = yaml.constructor.SafeConstructor()
SCALAR_TAGS = frozenset(
    YAML_TAG + name for name in ("null", "bool", "int", "float", "timestamp", "binary", "str")
)


class TagProblem(Exception):
    """A scalar whose explicit tag does not fit it, or a tag the loader does not know."""


def resolve_plain(value: str) -> str:
    """The tag YAML 1.1 gives a plain (unquoted, untagged) scalar."""
    for tag, match in _RESOLVERS.get(value[:1], ()):
        if match(value):
            return tag
    return STR_TAG


def misplaced_tag(tag: str, found: str) -> str:
    """What to say of ``tag`` written on ``found`` (a mapping, a list, a single value),
    which it does not fit."""
    if tag in MAP_TAGS:
        needs = "a mapping"
    elif tag in SEQ_TAGS:
        needs = "a list"
    elif tag in SCALAR_TAGS:
        needs = "a single value"
    else:
        return unknown_tag(tag)
    return f"the tag {escape(short_tag(tag))} needs {needs}, but the value is {found}"


def construct(tag: str, value: str) -> Any:
    """The value of a scalar with ``tag``, as PyYAML's safe loader builds it."""
    if tag in _STAYS_TEXT:
        return value
    if tag not in SCALAR_TAGS:
        raise TagProblem(unknown_tag(tag))
    node = yaml.ScalarNode(tag, value)
    try:
        result = _SAFE.yaml_constructors[tag](_SAFE, node)
    except (yaml.YAMLError, ValueError, TypeError, KeyError, IndexError, AttributeError) as exc:
        fix = "remove the tag or fix the value"
        raise TagProblem(
            f"{quote_value(cut(value))} does not fit its tag {short_tag(tag)}; {fix}"
        ) from exc
    except OverflowError as exc:
        raise TagProblem(_out_of_range(value, tag)) from exc
    if result.__class__ is int and result.bit_length() > _MAX_INT_BITS:
        raise TagProblem(_out_of_range(value, tag))
    return result


_SHOWN = 40  # characters of such a value a message quotes (a file may hold a 5 MB one)


def cut(text: str) -> str:
    """Text YAML read as something else, as a message quotes it."""
    return text if len(text) <= _SHOWN else text[:_SHOWN] + "…"


def quote_it(raw: str) -> str:
    """The advice for text YAML read as something else: the value quoted, to copy,
    when it is short enough to be shown whole."""
    return f'put it in quotes: "{escape(raw)}"' if len(raw) <= _SHOWN else "put it in quotes"


def _out_of_range(text: str, tag: str) -> str:
    return f"{quote_value(cut(text))} is out of range for {short_tag(tag)}"


def short_tag(tag: str) -> str:
    """``!!int`` for YAML's own tags, the tag as written otherwise."""
    return "!!" + tag[len(YAML_TAG) :] if tag.startswith(YAML_TAG) else tag


def unknown_tag(tag: str) -> str:
    return f"the tag {escape(short_tag(tag))} is not supported here; remove it"


def reading(raw: str, value: Any) -> str:
    """``NO as a boolean (false)``: how YAML read the text ``raw``, without Python reprs."""
    kind, shown = kind_in_words(value), escape(cut(raw))
    if isinstance(value, bool):
        return f"{shown} as {kind} ({str(value).lower()})"
    if isinstance(value, int | float) and str(value) != raw:
        return f"{shown} as {kind} ({cut(str(value))})"
    return f"{shown} as {kind}"


def key_problem(raw: str, value: Any) -> str:
    """The message for a mapping key YAML did not read as text."""
    if raw == "":
        return "a key is empty; write a field name before the `:`"
    return f"YAML reads the key {reading(raw, value)}; {quote_it(raw)}"


# -- a value written back as scalar text, in the style it was written in --------------------

# Characters a double-quoted scalar must escape: YAML reads them as breaks, or refuses them.
_UNPRINTABLE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\ufeff\ud800-\udfff\ufffe\uffff]")
# A plain scalar's first character is no indicator; inside [ ] or { } no character of
# `,[]{}` either, where in block context they are text like any other.
_PLAIN_FLOW = re.compile(r"[^\s\-?:,\[\]{}#&*!|>'\"%@`](?:[^,\[\]{}]*[^\s,\[\]{}:])?")
_PLAIN_BLOCK = re.compile(r"[^\s\-?:,\[\]{}#&*!|>'\"%@`](?:.*[^\s:])?", re.DOTALL)


def render_scalar(value: Any, style: str | None, flow: bool) -> str:
    """``value`` as a YAML scalar: in the style it was written in where that reads it back."""
    if not isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if style == "'" and not _UNPRINTABLE.search(value):
        return "'" + value.replace("'", "''") + "'"
    if style is None and _plain_ok(value, flow):
        return value
    return _double_quoted(value)


def _plain_ok(value: str, flow: bool) -> bool:
    plain = _PLAIN_FLOW if flow else _PLAIN_BLOCK
    if not plain.fullmatch(value) or ": " in value or " #" in value or "\n" in value:
        return False
    if _UNPRINTABLE.search(value):
        return False
    return resolve_plain(value) == STR_TAG


def _double_quoted(value: str) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return _UNPRINTABLE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


# Where each part of a loaded YAML value was written, kept compactly.
#
# A position is one int: the offset of the value's first character in the text, as libyaml reports
# it. Lines and columns are worked out only when someone asks (an error, an invite's ``source``).
# A ``Spot`` holds the positions of one mapping's or list's parts; values stay plain dicts and
# lists, with the spot tree beside them, so a schema error at ``("invites", 3, "phone")`` can be
# reported at the line and column it names.

START = 0
_BREAK = re.compile("\r\n|[\r\n\x85\u2028\u2029]")


class Mark(NamedTuple):
    line: int  # 1-based
    column: int  # 1-based


class Lines:
    """Line and column of a character offset, counted as libyaml counts them; the text is
    decoded, and its line starts found, only when a position is first asked for."""

    def __init__(self, source: str | bytes | Callable[[], bytes]) -> None:
        # A callable gives the file's bytes again: a file read in chunks is not kept in
        # memory, and is read again only if a problem needs a line.
        self._source = source
        self._text: str | None = None
        self._starts: list[int] | None = None

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
            # A BOM is dropped; undecodable bytes past a syntax error count one character each.
            self._text = self.data.removeprefix(b"\xef\xbb\xbf").decode("utf-8", "replace")
        return self._text

    def _line_starts(self) -> list[int]:
        if self._starts is None:
            self._starts = [0, *(m.end() for m in _BREAK.finditer(self.text))]
        return self._starts

    def mark(self, offset: int) -> Mark:
        starts = self._line_starts()
        line = bisect.bisect_right(starts, offset) - 1
        return Mark(line + 1, offset - starts[line] + 1)


class Spot:
    """Positions of the parts of one mapping or list.

    For a mapping, ``keys`` and ``at`` map each key to the position of the key and of its
    value; for a list, ``keys`` is None and ``at`` lists the position of each item.
    ``raw`` keeps the text of plain scalars YAML did not read as strings (``NO``,
    ``12:30``), ``kids`` the spots of nested mappings and lists.
    """

    __slots__ = ("at", "keys", "kids", "raw")

    def __init__(self, keys: dict[Any, int] | None, at: dict[Any, int] | list[int]) -> None:
        self.keys = keys
        self.at = at
        self.raw: dict[Any, str] = {}
        self.kids: dict[Any, Spot] = {}

    def place(self, step: Any, raw: str | None, kid: Spot | None) -> None:
        """The raw text and spot of the part at ``step`` (a merged value's overridden)."""
        if raw is not None:
            self.raw[step] = raw
        elif step in self.raw:
            del self.raw[step]
        if kid is not None:
            self.kids[step] = kid
        elif step in self.kids:
            del self.kids[step]

    def position(self, step: Any) -> int | None:
        at = self.at
        if isinstance(at, dict):
            return at.get(step)
        if isinstance(step, int) and 0 <= step < len(at):
            return at[step]
        return None


class Located(NamedTuple):
    """A loaded value, its spot, its own position and the text's lines."""

    value: Any
    spot: Spot | None
    position: int
    lines: Lines

    def walk(self, path: tuple[Any, ...] | list[Any]) -> tuple[Spot | None, int, int]:
        """The spot and position of the part at ``path``, or of the deepest part reached, and
        the steps of ``path`` taken. Positions are kept only for parts that exist, so the
        value is not looked at."""
        spot, position = self.spot, self.position
        for taken, step in enumerate(path):
            inner = None if spot is None else spot.position(step)  # a scalar holds none
            if spot is None or inner is None:
                return spot, position, taken
            spot, position = spot.kids.get(step), inner
        return spot, position, len(path)

    def mark(self, path: tuple[Any, ...] | list[Any] = ()) -> Mark:
        """Where the value at ``path`` was written (or the deepest part of it found)."""
        return self.lines.mark(self.walk(path)[1])

    def key_mark(self, path: tuple[Any, ...] | list[Any]) -> Mark:
        """Where the key naming the value at ``path`` was written, else the value."""
        holder = self._holder(path) if path and isinstance(path[-1], str) else None
        if holder is not None and holder.keys and path[-1] in holder.keys:
            return self.lines.mark(holder.keys[path[-1]])
        return self.mark(path)

    def raw(self, path: tuple[Any, ...] | list[Any]) -> str | None:
        """The text of a plain scalar YAML read as a non-string, as written."""
        holder = self._holder(path)
        return holder.raw.get(path[-1]) if holder is not None else None

    def _holder(self, path: tuple[Any, ...] | list[Any]) -> Spot | None:
        """The spot of what holds the last step of ``path``, if the walk gets there."""
        spot, _, taken = self.walk(path[:-1])
        return spot if path and taken == len(path) - 1 else None


# -- building ----------------------------------------------------------------------------------

# libyaml's parser, as PyYAML's wheels are built with it: the events every reader here reads.
Parser = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
# Real invite files nest five levels deep; nothing legitimate comes near this.
DEPTH_LIMIT = 100
# What aliases may expand to: a fixed allowance plus ten values per value
# written. A file sharing a `groups` list between invites stays far below;
# a file that multiplies itself through aliases crosses it within a few lines.
ALIAS_ALLOWANCE = 100_000
ALIAS_PER_NODE = 10


class Fatal(Exception):
    """A problem after which the rest of the file cannot be read."""

    def __init__(self, position: int, message: str) -> None:
        super().__init__(message)
        self.position = position
        self.message = message


# Takes each item of the streamed list: its index, the item located, and where it begins
# (worked out by the builder, which knows where the item's mapping opened without reading
# the text again: a file read in chunks is not kept).
ItemHook = Callable[[int, "Located", Mark], None]


class Anchor(NamedTuple):
    value: Any
    spot: Spot | None
    raw: str | None
    size: int  # values it stands for, counting what its own aliases expand to
    height: int  # levels of nesting (0 for a scalar)
    position: int


class Builder:
    """Turns one parser's events into a value, its spot and the problems found.

    ``hook`` receives, one at a time, the items of the list under ``hook_key`` in a
    top-level mapping (the invite entries), which are then not kept: ``None`` stands in
    for each, so the list keeps its length. ``streamed``: that list opened.
    """

    def __init__(
        self, lines: Lines, hook_key: str | None = None, hook: ItemHook | None = None
    ) -> None:
        self.lines = lines
        self.hook_key = hook_key
        self.hook = hook
        self.streamed = False
        self.last_closed: Any = None  # libyaml's start mark of the container closed last
        self.problems: list[tuple[int, str]] = []
        self.document = ListFrame(None)  # the bottom of the stack: its one item is the value
        self.stack: list[Frame] = [self.document]
        self.anchors: dict[str, Anchor] = {}
        self.open_anchors: dict[str, int] = {}
        self.nodes = 0  # values written in the file so far
        self.expanded = 0  # values aliases stood for so far
        self.documents = 0
        # One copy of each key and short list item: 20,000 invites repeat a few dozen.
        self.names: dict[str, str] = {}

    def report(self, position: int, message: str) -> None:
        self.problems.append((position, message))

    def line(self, position: int) -> int:
        return self.lines.mark(position).line

    def mark(self, position: int) -> Mark:
        """Where ``position`` is. An item just closed (an invite entry) is placed by
        libyaml's own mark: a file read in chunks is not read again for it."""
        closed = self.last_closed
        if closed is not None and closed.index == position:
            return Mark(closed.line + 1, closed.column + 1)
        return self.lines.mark(position)

    def build(self, parser: Any) -> Located:
        """Read every event; return the document's value located (None for an empty
        document). Raises Fatal or yaml.MarkedYAMLError."""
        handlers = {
            yaml.AliasEvent: self._alias,
            yaml.MappingStartEvent: self._mapping_start,
            yaml.SequenceStartEvent: self._sequence_start,
            yaml.MappingEndEvent: self._end,
            yaml.SequenceEndEvent: self._end,
            yaml.DocumentStartEvent: self._document_start,
        }
        while (event := parser.get_event()).__class__ is not yaml.StreamEndEvent:
            if event.__class__ is yaml.ScalarEvent:  # most events: no look-up
                self._scalar(event)
            elif (handler := handlers.get(event.__class__)) is not None:
                handler(event)
        done = self.document
        if not done.value:
            return Located(None, None, START, self.lines)
        return Located(done.value[0], done.spot.kids.get(0), done.items_at[0], self.lines)

    def _document_start(self, event: Any) -> None:
        self.documents += 1
        if self.documents > 1:
            raise Fatal(
                event.start_mark.index,
                "holds more than one YAML document; keep one document per file",
            )

    def _scalar(self, event: Any) -> None:
        self.nodes += 1
        position = event.start_mark.index
        value, raw = event.value, None  # raw: the text, when YAML reads it as something else
        if event.tag is not None and event.tag != "!":
            value, raw = self._tagged(event, position)
        elif event.implicit[0] and value[:1] in RESOLVED_FIRST:  # plain: YAML 1.1 resolves it
            tag = resolve_plain(value)
            if tag != STR_TAG:
                value, raw = self._implicit(tag, value, position)
        if event.anchor is not None:
            self._name(event.anchor, position)
            plain = "<<" if value is MERGE_KEY else value  # an alias to it is the text
            self.anchors[event.anchor] = Anchor(plain, None, raw, 1, 0, position)
        self.stack[-1].add(self, value, position, raw, None)

    @staticmethod
    def _tagged(event: Any, position: int) -> tuple[Any, str | None]:
        tag = event.tag
        try:  # a value its tag cannot hold stops the file: its meaning is anyone's guess
            if tag in MAP_TAGS or tag in SEQ_TAGS:
                raise TagProblem(misplaced_tag(tag, "a single value"))
            value = construct(tag, event.value)
        except TagProblem as exc:
            raise Fatal(position, str(exc)) from None
        return value, event.value if not event.style and not isinstance(value, str) else None

    def _implicit(self, tag: str, text: str, position: int) -> tuple[Any, str | None]:
        if tag == MERGE_TAG:
            return (MERGE_KEY if self.stack[-1].wants_key() else text), None
        try:
            return construct(tag, text), text
        except TagProblem:
            shown = escape(cut(text))
            raise Fatal(position, f"YAML cannot read {shown}; put it in quotes") from None

    def _alias(self, event: Any) -> None:
        position: int = event.start_mark.index
        name = event.anchor
        anchor = self.anchors.get(name)
        if anchor is None:
            if name in self.open_anchors:
                raise Fatal(position, f"alias `*{escape(name)}` is used inside its own anchor")
            raise Fatal(
                position,
                f"found undefined alias `*{escape(name)}` "
                "(an `*alias` needs an `&anchor` earlier in the file)",
            )
        self.expanded += anchor.size
        limit = ALIAS_ALLOWANCE + ALIAS_PER_NODE * self.nodes
        if self.expanded > limit:
            raise Fatal(
                position,
                f"aliases expand to more than {limit} values (limit {ALIAS_ALLOWANCE} plus "
                f"{ALIAS_PER_NODE} per value written); write the values out",
            )
        if len(self.stack) - 1 + anchor.height > DEPTH_LIMIT:
            raise Fatal(position, f"nested too deeply (limit {DEPTH_LIMIT})")
        parent = self.stack[-1]
        if parent.height <= anchor.height:
            parent.height = anchor.height + 1
        parent.add(self, anchor.value, position, anchor.raw, anchor.spot)

    def _mapping_start(self, event: Any) -> None:
        self._open(event, MappingFrame(event.start_mark), MAP_TAGS, "a mapping")

    def _sequence_start(self, event: Any) -> None:
        frame = ListFrame(event.start_mark)
        parent = self.stack[-1]
        if (
            self.hook is not None
            and len(self.stack) == 2
            and isinstance(parent, MappingFrame)
            and parent.key == self.hook_key
            and not parent.skip
        ):
            frame.hook = self.hook
            self.streamed = True
        self._open(event, frame, SEQ_TAGS, "a list")

    def _open(self, event: Any, frame: Frame, tags: frozenset[str], what: str) -> None:
        if len(self.stack) > DEPTH_LIMIT:
            raise Fatal(frame.position, f"nested too deeply (limit {DEPTH_LIMIT})")
        frame.nodes = self.nodes
        frame.expanded = self.expanded
        self.nodes += 1
        tag = event.tag
        if tag is not None and tag != "!" and tag not in tags:
            raise Fatal(frame.position, misplaced_tag(tag, what))
        if event.anchor is not None:
            self._name(event.anchor, frame.position)
            self.open_anchors[event.anchor] = frame.position
            frame.anchor = event.anchor
        self.stack.append(frame)

    def _name(self, name: str, position: int) -> None:
        first = self.open_anchors.get(name)
        if first is None and name in self.anchors:
            first = self.anchors[name].position
        if first is not None:
            self.report(
                position,
                f"anchor `&{escape(name)}` is already defined on line {self.line(first)}; "
                "give this one another name",
            )

    def _end(self, event: Any) -> None:
        frame = self.stack.pop()
        value = frame.finish()
        if frame.anchor is not None:
            self.open_anchors.pop(frame.anchor, None)  # an inner one may have reused the name
            size = self.nodes - frame.nodes + self.expanded - frame.expanded
            self.anchors[frame.anchor] = Anchor(
                value, frame.spot, None, size, frame.height, frame.position
            )
        self.last_closed = frame.start_mark
        parent = self.stack[-1]
        if parent.height <= frame.height:
            parent.height = frame.height + 1
        parent.add(self, value, frame.position, None, frame.spot)


# -- the frames: the mapping, list or document being built while the events arrive --------


SHARED_ITEM_LENGTH = 64  # a list's text items this short are kept once (Builder.names)
MERGE_KEY = object()  # the `<<` key of a YAML merge, while its mapping is being built
NO_KEY = object()  # a mapping frame waiting for its next key


class Frame:
    """What every frame has: its value, spot, where it starts, and what bounds need."""

    __slots__ = ("anchor", "expanded", "height", "nodes", "position", "spot", "start_mark", "value")

    def __init__(self, value: Any, spot: Spot, start_mark: Any) -> None:
        self.value = value
        self.spot = spot
        self.start_mark = start_mark  # libyaml's mark where the frame opened
        self.position: int = start_mark.index if start_mark is not None else START
        self.anchor: str | None = None
        # Counters of the builder when the frame opened: its size is their growth.
        self.nodes = 0
        self.expanded = 0
        self.height = 1  # levels of nesting in this value, itself included

    def add(
        self, builder: Builder, child: Any, position: int, raw: str | None, spot: Spot | None
    ) -> None:
        raise NotImplementedError

    def finish(self) -> Any:
        return self.value

    def wants_key(self) -> bool:
        return False


class ListFrame(Frame):
    __slots__ = ("hook", "items_at")

    def __init__(self, start_mark: Any) -> None:
        self.items_at: list[int] = []
        super().__init__([], Spot(None, self.items_at), start_mark)
        self.hook: ItemHook | None = None

    def add(
        self, builder: Builder, child: Any, position: int, raw: str | None, spot: Spot | None
    ) -> None:
        if self.hook is not None:  # handed over, not kept: None holds its place
            self.hook(
                len(self.value),
                Located(child, spot, position, builder.lines),
                builder.mark(position),
            )
            self.value.append(None)
            return
        if isinstance(child, str) and len(child) <= SHARED_ITEM_LENGTH:
            child = builder.names.setdefault(child, child)
        if raw is not None or spot is not None:
            self.spot.place(len(self.value), raw, spot)
        self.value.append(child)
        self.items_at.append(position)


def _merged_mappings(child: Any, spot: Spot | None) -> list[tuple[Any, Spot | None]] | None:
    """What `<<` merges, each mapping with its spot; None when it is no mapping."""
    if isinstance(child, dict):
        return [(child, spot)]
    if isinstance(child, list) and all(isinstance(item, dict) for item in child):
        return [(item, spot.kids.get(i) if spot else None) for i, item in enumerate(child)]
    return None


def _not_mergeable(child: Any) -> str:
    what = kind_in_words(child)
    if isinstance(child, list):  # one item at least is not a mapping
        what += " holding " + kind_in_words(next(i for i in child if not isinstance(i, dict)))
    return f"`<<` merges a mapping or a list of mappings, not {what}"


class MappingFrame(Frame):
    __slots__ = ("key", "key_position", "keys_at", "merge_position", "merged", "skip", "values_at")

    def __init__(self, start_mark: Any) -> None:
        self.keys_at: dict[Any, int] = {}
        self.values_at: dict[Any, int] = {}
        super().__init__({}, Spot(self.keys_at, self.values_at), start_mark)
        self.key: Any = NO_KEY
        self.key_position = self.position
        self.skip = False  # the value of the current key is dropped (a repeated key)
        self.merged: dict[Any, Any] | None = None  # pairs brought in by `<<`
        self.merge_position: int | None = None

    def wants_key(self) -> bool:
        return self.key is NO_KEY

    def add(
        self, builder: Builder, child: Any, position: int, raw: str | None, spot: Spot | None
    ) -> None:
        # The usual key (new text) and value (no parts) take the short way: the builder's
        # hot spot (3% of a 20,000-invite load alone; 7% with the scalar's two short cuts).
        key = self.key
        if key is NO_KEY:
            if child.__class__ is str and child not in self.value:
                self.key, self.key_position = builder.names.setdefault(child, child), position
            else:
                self._take_key(builder, child, position, raw, spot)
            return
        self.key = NO_KEY
        if self.skip:
            self.skip = False
        elif key is MERGE_KEY:
            self._merge(builder, child, position, spot)
        elif raw is None and spot is None and self.merged is None:
            self.value[key] = child
            self.keys_at[key] = self.key_position
            self.values_at[key] = position
        else:
            self.value[key] = child
            self._place(key, self.key_position, position, raw, spot)

    def _place(self, key: Any, key_at: int, at: int, raw: str | None, spot: Spot | None) -> None:
        self.keys_at[key] = key_at
        self.values_at[key] = at
        self.spot.place(key, raw, spot)

    def _take_key(
        self, builder: Builder, key: Any, position: int, raw: str | None, spot: Spot | None
    ) -> None:
        self.key_position = position
        if key is MERGE_KEY:
            self.skip = self._repeated(builder, "<<", self.merge_position, position)
            if self.merge_position is None:
                self.merge_position = position
        elif spot is not None:  # only mappings and lists have a spot
            builder.report(
                position, f"a key must be text, not {kind_in_words(key)}; put the key in quotes"
            )
            self.skip = True
        elif not isinstance(key, str):
            text = raw if raw is not None else str(key)
            builder.report(position, key_problem(text, key))
            key = text
        if isinstance(key, str):
            key = builder.names.setdefault(key, key)
            first = self.keys_at.get(key) if key in self.value else None
            self.skip = self.skip or self._repeated(builder, key, first, position)
        self.key = key

    @staticmethod
    def _repeated(builder: Builder, key: str, first: int | None, position: int) -> bool:
        if first is None:
            return False
        builder.report(
            position,
            f"duplicate key `{escape(key)}` (first set on line {builder.line(first)}); "
            "YAML would silently keep only the last one",
        )
        return True

    def _merge(self, builder: Builder, child: Any, position: int, spot: Spot | None) -> None:
        sources = _merged_mappings(child, spot)
        if sources is None:
            builder.report(position, _not_mergeable(child))
            return
        if self.merged is None:
            self.merged = {}
        # Keys written in the mapping win; among merged mappings, the first wins.
        for source, source_spot in sources:
            for key, value in source.items():
                if key not in self.merged and key not in self.value:
                    self.merged[key] = value
                    if source_spot is not None:  # a mapping's spot holds every key of it
                        at = source_spot.keys[key]  # type: ignore[index]
                        raw = source_spot.raw.get(key)
                        self._place(key, at, source_spot.at[key], raw, source_spot.kids.get(key))

    def finish(self) -> Any:
        if self.merged is None:
            return self.value
        # As PyYAML orders them: merged pairs first, then the keys written here.
        combined = self.merged
        combined.update(self.value)
        return combined
