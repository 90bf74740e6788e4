"""The loader's contract with the reader of a streamed list, in its types: each item as
an ``Item`` placed by the builder, and a ``ListRead`` saying which items were streamed
and which are left to hand over."""

from __future__ import annotations

import io

from reconciler.yamlload.items import NO_LIST, Delivery, Item, ListRead
from reconciler.yamlload.positions import Lines, Mark
from reconciler.yamlload.source import FileSource, Streamed, stream

BLOCK = """\
invites:
  - id: inv_0
    name: Acme
  - {id: inv_1}
  -   id: inv_2
  - just text
"""


def _stream(text: str) -> tuple[Streamed, list[Item]]:
    taken: list[Item] = []
    return stream(text, "t.yaml", Lines(text), "invites", taken.append), taken


def _placed(text: str, position: int) -> Mark:
    return Lines(text).mark(position)  # worked out from the text alone


def test_each_streamed_item_is_handed_over_with_its_place() -> None:
    (document, problems, items), taken = _stream(BLOCK)
    assert problems == [] and document is not None
    assert [(i.index, i.value) for i in taken] == [
        (0, {"id": "inv_0", "name": "Acme"}),
        (1, {"id": "inv_1"}),
        (2, {"id": "inv_2"}),
        (3, "just text"),
    ]
    assert [i.mark for i in taken] == [Mark(2, 5), Mark(4, 5), Mark(5, 7), Mark(6, 5)]
    assert [i.mark for i in taken] == [_placed(BLOCK, i.position) for i in taken]
    first = taken[0].located(Lines(BLOCK))
    assert first.mark(("name",)) == Mark(3, 11)
    assert taken[3].spot is None  # a scalar has no parts
    assert items == ListRead(Delivery.STREAMED, 4, ())
    assert document.value == {"invites": []}  # streamed items are not kept


def test_streamed_items_are_placed_without_reading_the_file_again() -> None:
    # The builder knows where each entry's mapping opened: a file read in chunks is not
    # read a second time for the place of every invite.
    data = BLOCK.replace("  - just text\n", "").encode()
    reads: list[int] = []

    def read_again() -> bytes:
        reads.append(1)
        return data

    taken: list[Item] = []
    source = FileSource(io.BytesIO(data), 1 << 20)
    read = stream(source, "t.yaml", Lines(read_again), "invites", taken.append)
    assert read.problems == [] and read.items.count == 3
    assert [i.mark for i in taken] == [Mark(2, 5), Mark(4, 5), Mark(5, 7)]
    assert reads == []


def test_a_list_that_came_through_a_merge_is_left_with_its_items_placed() -> None:
    text = "<<:\n  invites:\n    - id: inv_0\n    - {id: inv_1}\n"
    (document, problems, items), taken = _stream(text)
    assert problems == [] and document is not None
    assert taken == []  # not a list opening under the top-level key: nothing streamed
    assert items.delivery is Delivery.WHOLE and items.streamed == 0 and items.count == 2
    assert [(i.index, i.value, i.mark) for i in items.left] == [
        (0, {"id": "inv_0"}, Mark(3, 7)),
        (1, {"id": "inv_1"}, Mark(4, 7)),
    ]
    assert items.left[1].located(document.lines).mark(("id",)) == Mark(4, 12)
    assert document.value == {"invites": [{"id": "inv_0"}, {"id": "inv_1"}]}


def test_a_list_that_came_through_an_alias_is_left_with_its_items_placed() -> None:
    text = "<<: {invites: &all [{id: inv_0}, text]}\ninvites: *all\n"
    (_, problems, items), taken = _stream(text)
    assert problems == [] and taken == []
    assert items.delivery is Delivery.WHOLE and items.count == 2
    assert [(i.index, i.value, i.mark) for i in items.left] == [
        (0, {"id": "inv_0"}, Mark(1, 21)),
        (1, "text", Mark(1, 34)),
    ]
    assert items.left[0].spot is not None and items.left[1].spot is None


def test_an_empty_streamed_list_is_told_from_no_list() -> None:
    assert _stream("invites: []\n")[0].items == ListRead(Delivery.STREAMED, 0, ())
    for text in ("other: [1]\n", "invites: text\n", "invites:\n", "- a list\n", ""):
        assert _stream(text)[0].items == NO_LIST, text
    assert NO_LIST.count == 0


def test_a_list_nested_deeper_or_under_another_key_is_kept_not_streamed() -> None:
    text = "other:\n  invites: [1, 2]\nmore: [3]\n"
    (document, problems, items), taken = _stream(text)
    assert problems == [] and taken == [] and items == NO_LIST
    assert document is not None
    assert document.value == {"other": {"invites": [1, 2]}, "more": [3]}


def test_a_file_that_cannot_be_read_says_how_far_the_stream_went() -> None:
    (document, problems, items), taken = _stream("invites:\n  - id: a\n  - *nowhere\n")
    assert document is None and len(problems) == 1
    assert items == ListRead(Delivery.STREAMED, 1, ()) and len(taken) == 1
