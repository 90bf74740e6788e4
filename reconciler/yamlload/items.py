"""The loader's contract with whoever takes the items of the one list it streams.

A file of 200,000 invites is read without keeping them: the builder hands each
item of the list under a chosen top-level key to a hook as soon as the item is
built (an ``Item``), and leaves an empty list in the document in its place.
A list the builder could not stream (it came whole through an alias or a
merge) stays in the document, and its items come back in the ``ListRead``, so
no reader has to guess whether an empty list was empty or streamed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import Any

from reconciler.yamlload.positions import Lines, Located, Mark, Spot


# Not frozen: a frozen dataclass sets each field through object.__setattr__,
# four times the cost of building this one, and one is built per invite.
@dataclass(slots=True)
class Item:
    """One item of the streamed list, as the builder hands it over."""

    index: int  # its place in the list
    value: Any
    spot: Spot | None  # positions of its parts; None for a scalar
    position: int  # offset of its first character
    # Worked out by the builder, which knows where the item's mapping opened
    # without reading the text again (a file read in chunks is not kept).
    mark: Mark

    def located(self, lines: Lines) -> Located:
        """The item with its positions, for placing problems inside it."""
        return Located(self.value, self.spot, self.position, lines)


ItemHook = Callable[[Item], None]


class Delivery(Enum):
    """How the items of the list under the hook's key reached the reader."""

    STREAMED = "streamed"  # each went to the hook as it was read; none kept in the document
    WHOLE = "whole"  # the list came through an alias or a merge: kept, its items in ``left``
    NO_LIST = "no list"  # the key is missing, or holds something other than a list


@dataclass(frozen=True, slots=True)
class ListRead:
    """What became of the list the hook was given for."""

    delivery: Delivery
    streamed: int  # items the hook took while the file was read
    left: tuple[Item, ...]  # items it has not had: every item of a WHOLE list

    @property
    def count(self) -> int:
        """Items in the list as written, streamed or not."""
        return self.streamed + len(self.left)


NO_LIST = ListRead(Delivery.NO_LIST, 0, ())
