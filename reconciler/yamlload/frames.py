"""The mapping, list or document being built while libyaml's events arrive.

Each frame receives its children one at a time (``add``) and keeps their
positions in its ``Spot``. A mapping frame is where YAML's silent traps are
caught: duplicate keys (``<<`` merge keys included), keys YAML reads as
something other than text, and merges of things that are not mappings.
"""

from __future__ import annotations

from typing import Any, Protocol

from reconciler.safetext import escape
from reconciler.yamlload.items import Item, ItemHook
from reconciler.yamlload.positions import START, Mark, Spot
from reconciler.yamlload.scalars import key_problem, kind_of


class Reporter(Protocol):
    """Where frames send problems and find places (the builder)."""

    def report(self, position: int, message: str) -> None: ...

    def line(self, position: int) -> int: ...

    def mark(self, position: int) -> Mark: ...

    def name(self, text: str) -> str: ...


# A list's text items this long or shorter are kept once (Builder.name): the items of
# sets (`groups`, `addOns`) repeat across thousands of invites.
SHARED_ITEM_LENGTH = 64
MERGE_KEY = object()  # the `<<` key of a YAML merge, while its mapping is being built
NO_KEY = object()  # a mapping frame waiting for its next key


class Frame:
    """What every frame has: its value, spot, where it starts, and what bounds need."""

    __slots__ = ("anchor", "expanded", "height", "nodes", "position", "spot", "start", "value")

    def __init__(self, value: Any, spot: Spot | None, position: int) -> None:
        self.value = value
        self.spot = spot
        self.position = position
        self.anchor: str | None = None
        self.start: Any = None  # libyaml's mark where the frame opened
        # Counters of the builder when the frame opened: its size is their growth.
        self.nodes = 0
        self.expanded = 0
        self.height = 1  # levels of nesting in this value, itself included

    def add(
        self, builder: Reporter, child: Any, position: int, raw: str | None, spot: Spot | None
    ) -> None:
        raise NotImplementedError

    def finish(self) -> Any:
        return self.value

    def wants_key(self) -> bool:
        return False


class DocumentFrame(Frame):
    """Holds the one top-level value of the document."""

    __slots__ = ("raw",)

    def __init__(self) -> None:
        super().__init__(None, None, START)
        self.raw: str | None = None

    def add(
        self, builder: Reporter, child: Any, position: int, raw: str | None, spot: Spot | None
    ) -> None:
        self.value, self.position, self.raw, self.spot = child, position, raw, spot


class ListFrame(Frame):
    __slots__ = ("hook", "index", "items_at", "own")

    def __init__(self, position: int) -> None:
        self.items_at: list[int] = []
        self.own = Spot(None, self.items_at)
        # Not super(): a super object less for each of the 80,000 lists and mappings.
        Frame.__init__(self, [], self.own, position)
        self.hook: ItemHook | None = None
        self.index = 0  # items handed to the hook so far

    def add(
        self, builder: Reporter, child: Any, position: int, raw: str | None, spot: Spot | None
    ) -> None:
        if self.hook is not None:  # the item is handed over instead of kept
            self.hook(Item(self.index, child, spot, position, builder.mark(position)))
            self.index += 1
            return
        index = len(self.value)
        if child.__class__ is str and len(child) <= SHARED_ITEM_LENGTH:  # identifiers repeat
            child = builder.name(child)
        self.value.append(child)
        self.items_at.append(position)
        own = self.own
        if raw is not None:
            if own.raw is None:
                own.raw = {}
            own.raw[index] = raw
        if spot is not None:
            if own.kids is None:
                own.kids = {}
            own.kids[index] = spot


class MappingFrame(Frame):
    __slots__ = (
        "key",
        "key_position",
        "keys_at",
        "merge_position",
        "merged",
        "own",
        "skip",
        "values_at",
    )

    def __init__(self, position: int) -> None:
        self.keys_at: dict[Any, int] = {}
        self.values_at: dict[Any, int] = {}
        self.own = Spot(self.keys_at, self.values_at)
        Frame.__init__(self, {}, self.own, position)
        self.key: Any = NO_KEY
        self.key_position = position
        self.skip = False  # the value of the current key is dropped (a repeated key)
        self.merged: dict[Any, Any] | None = None  # pairs brought in by `<<`
        self.merge_position: int | None = None

    def wants_key(self) -> bool:
        return self.key is NO_KEY

    def add(
        self, builder: Reporter, child: Any, position: int, raw: str | None, spot: Spot | None
    ) -> None:
        key = self.key
        if key is NO_KEY:
            if child.__class__ is str and child not in self.value:  # the usual key
                self.key = child
                self.key_position = position
            else:
                self._take_key(builder, child, position, raw, spot)
            return
        self.key = NO_KEY
        if self.skip:
            self.skip = False
        elif key is MERGE_KEY:
            self._merge(builder, child, position, spot)
        elif raw is None and spot is None and self.merged is None:  # the usual value
            self.value[key] = child
            self.keys_at[key] = self.key_position
            self.values_at[key] = position
        else:
            self.value[key] = child
            self._place(key, self.key_position, position, raw, spot)

    def _place(self, key: Any, key_at: int, at: int, raw: str | None, spot: Spot | None) -> None:
        own = self.own
        self.keys_at[key] = key_at
        self.values_at[key] = at
        if raw is not None:
            if own.raw is None:
                own.raw = {}
            own.raw[key] = raw
        elif own.raw and key in own.raw:
            del own.raw[key]
        if spot is not None:
            if own.kids is None:
                own.kids = {}
            own.kids[key] = spot
        elif own.kids and key in own.kids:
            del own.kids[key]

    def _take_key(
        self, builder: Reporter, key: Any, position: int, raw: str | None, spot: Spot | None
    ) -> None:
        self.key_position = position
        if key is MERGE_KEY:
            self.skip = self._repeated(builder, "<<", self.merge_position, position)
            if self.merge_position is None:
                self.merge_position = position
        elif spot is not None:  # only mappings and lists have a spot
            builder.report(
                position, f"a key must be text, not {kind_of(key)}; put the key in quotes"
            )
            self.skip = True
        elif not isinstance(key, str):
            text = raw if raw is not None else str(key)
            builder.report(position, key_problem(text, key))
            key = text
        if isinstance(key, str):
            first = self.keys_at.get(key) if key in self.value else None
            self.skip = self.skip or self._repeated(builder, key, first, position)
        self.key = key

    @staticmethod
    def _repeated(builder: Reporter, key: str, first: int | None, position: int) -> bool:
        if first is None:
            return False
        builder.report(
            position,
            f"duplicate key `{escape(key)}` (first set on line {builder.line(first)}); "
            "YAML would silently keep only the last one",
        )
        return True

    def _merge(self, builder: Reporter, child: Any, position: int, spot: Spot | None) -> None:
        if isinstance(child, dict):
            sources = [(child, spot)]
        elif isinstance(child, list) and all(isinstance(item, dict) for item in child):
            sources = [(item, spot.kid(i) if spot else None) for i, item in enumerate(child)]
        else:
            what = kind_of(child)
            if isinstance(child, list):  # one item at least is not a mapping
                what += " holding " + kind_of(next(i for i in child if not isinstance(i, dict)))
            builder.report(position, f"`<<` merges a mapping or a list of mappings, not {what}")
            return
        if self.merged is None:
            self.merged = {}
        # Keys written in the mapping win; among merged mappings, the first wins.
        for source, source_spot in sources:
            for key, value in source.items():
                if key in self.merged or key in self.value:
                    continue
                self.merged[key] = value
                if source_spot is not None:  # a mapping's spot holds every key of it
                    self._place(
                        key,
                        source_spot.keys[key],  # type: ignore[index]
                        source_spot.at[key],
                        source_spot.raw.get(key) if source_spot.raw else None,
                        source_spot.kid(key),
                    )

    def finish(self) -> Any:
        if self.merged is None:
            return self.value
        # As PyYAML orders them: merged pairs first, then the keys written here.
        combined = self.merged
        combined.update(self.value)
        return combined
