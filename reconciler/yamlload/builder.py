"""Plain values built straight from libyaml's event stream, bounded as events arrive.

No node graph and no recursion: each event updates a stack of frames, so
the nesting depth is checked before a container is opened, and the size of
what aliases expand to is counted at each alias, before anything downstream
(the schema, a diff, a copy) could walk the expansion. A "billion laughs"
file is refused at the alias that crosses the bound, having cost nothing.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import yaml

from reconciler.safetext import escape
from reconciler.yamlload.frames import (
    MERGE_KEY,
    NO_KEY,
    SHARED_ITEM_LENGTH,
    DocumentFrame,
    Frame,
    ListFrame,
    MappingFrame,
)
from reconciler.yamlload.items import ItemHook
from reconciler.yamlload.positions import Lines, Mark, Spot
from reconciler.yamlload.scalars import (
    MAP_TAGS,
    MERGE_TAG,
    RESOLVED_FIRST,
    SEQ_TAGS,
    STR_TAG,
    TagProblem,
    construct,
    construct_tagged,
    cut,
    misplaced_tag,
    resolve_plain,
)

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


class Anchor(NamedTuple):
    value: Any
    spot: Spot | None
    raw: str | None
    size: int  # values it stands for, counting what its own aliases expand to
    height: int  # levels of nesting (0 for a scalar)
    position: int


class Builder:
    """Turns one parser's events into a value, its spot and the problems found.

    ``hook`` receives, one at a time, the items of the list under ``hook_key``
    in a top-level mapping (the invite entries), which are then not kept;
    ``hooked`` is that list's frame, once it has opened.
    """

    def __init__(
        self, lines: Lines, hook_key: str | None = None, hook: ItemHook | None = None
    ) -> None:
        self.lines = lines
        self.hook_key = hook_key
        self.hook = hook
        self.hooked: ListFrame | None = None
        self.closed: Any = None  # libyaml's mark where the container last closed opened
        self.problems: list[tuple[int, str]] = []
        self.document = DocumentFrame()  # the bottom of the stack, what build() returns
        self.stack: list[Frame] = [self.document]
        self.anchors: dict[str, Anchor] = {}
        self.open_anchors: dict[str, int] = {}
        self.nodes = 0  # values written in the file so far
        self.expanded = 0  # values aliases stood for so far
        self.documents = 0
        self.names: dict[str, str] = {}  # one copy of each key and short list item

    def report(self, position: int, message: str) -> None:
        self.problems.append((position, message))

    def line(self, position: int) -> int:
        return self.lines.mark(position).line

    def mark(self, position: int) -> Mark:
        """Where ``position`` is. An item just closed (an invite entry) is placed by
        libyaml's own mark, without reading the text again."""
        closed = self.closed
        if closed is not None and closed.index == position:
            return Mark(closed.line + 1, closed.column + 1)
        return self.lines.mark(position)

    def name(self, text: str) -> str:
        return self.names.setdefault(text, text)

    def build(self, parser: Any) -> DocumentFrame:
        """Read every event; return the document frame. Raises Fatal or yaml.MarkedYAMLError."""
        handlers = {
            yaml.AliasEvent: self._alias,
            yaml.MappingStartEvent: self._mapping_start,
            yaml.SequenceStartEvent: self._sequence_start,
            yaml.MappingEndEvent: self._end,
            yaml.SequenceEndEvent: self._end,
            yaml.DocumentStartEvent: self._document_start,
        }
        get_event = parser.get_event
        scalar = self._scalar
        scalar_event = yaml.ScalarEvent
        while True:
            event = get_event()
            if event.__class__ is scalar_event:  # most events: tested first
                scalar(event)
                continue
            handler = handlers.get(event.__class__)
            if handler is not None:
                handler(event)
            elif event.__class__ is yaml.StreamEndEvent:
                return self.document

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
        value = event.value
        tag = event.tag
        raw = None
        if tag is not None and tag != "!":
            raw = value if not event.style else None
            try:  # a value its tag cannot hold stops the file: its meaning is anyone's guess
                value = construct_tagged(tag, value)
            except TagProblem as exc:
                raise Fatal(position, str(exc)) from None
            if isinstance(value, str):
                raw = None
        elif event.implicit[0] and value[:1] in RESOLVED_FIRST:
            tag = resolve_plain(value)
            if tag != STR_TAG:
                value, raw = self._implicit(tag, value, position)
        if event.anchor is not None:
            self._name(event.anchor, position)
            plain = "<<" if value is MERGE_KEY else value  # an alias to it is the text
            self.anchors[event.anchor] = Anchor(plain, None, raw, 1, 0, position)
        frame = self.stack[-1]
        if raw is None:
            if frame.__class__ is MappingFrame:
                # MappingFrame.add's usual cases, inlined: a new text key, or a text
                # value for it (nine events in ten).
                mapping: MappingFrame = frame
                key = mapping.key
                if key is NO_KEY:
                    if value.__class__ is str and value not in mapping.value:
                        mapping.key = self.names.setdefault(value, value)
                        mapping.key_position = position
                        return
                elif key.__class__ is str and not mapping.skip and mapping.merged is None:
                    mapping.value[key] = value
                    mapping.keys_at[key] = mapping.key_position
                    mapping.values_at[key] = position
                    mapping.key = NO_KEY
                    return
            elif frame.__class__ is ListFrame and frame.hook is None:
                # ListFrame.add's usual case, inlined: an item of a set (`groups`).
                items: ListFrame = frame
                if value.__class__ is str and len(value) <= SHARED_ITEM_LENGTH:
                    value = self.names.setdefault(value, value)
                items.value.append(value)
                items.items_at.append(position)
                return
        frame.add(self, value, position, raw, None)

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
        parent = self.stack[-1]
        if len(self.stack) - 1 + anchor.height > DEPTH_LIMIT:
            raise Fatal(position, f"nested too deeply (limit {DEPTH_LIMIT})")
        if parent.height <= anchor.height:
            parent.height = anchor.height + 1
        parent.add(self, anchor.value, position, anchor.raw, anchor.spot)

    def _mapping_start(self, event: Any) -> None:
        start = event.start_mark
        frame = MappingFrame(start.index)
        frame.start = start
        self._open(event, frame, MAP_TAGS, "a mapping")

    def _sequence_start(self, event: Any) -> None:
        start = event.start_mark
        frame = ListFrame(start.index)
        frame.start = start
        parent = self.stack[-1]
        if (
            self.hook is not None
            and len(self.stack) == 2
            and isinstance(parent, MappingFrame)
            and parent.key == self.hook_key
            and not parent.skip
        ):
            frame.hook = self.hook
            self.hooked = frame
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
        parent = self.stack[-1]
        if parent.height <= frame.height:
            parent.height = frame.height + 1
        self.closed = frame.start  # places an invite entry without reading the text
        parent.add(self, value, frame.position, None, frame.spot)
