"""Where a loaded value's parts were written, asked for parts that were not.

A problem can name a part the file does not have (a field left out, an index
past the end, a field inside a plain value): the message then points at the
deepest part that was written, never at another part, and never fails.
"""

from __future__ import annotations

from reconciler.yamlload.positions import Lines, Located, Mark
from reconciler.yamlload.source import parse

TEXT = """\
invites:
  - id: inv_1
    name: Acme
    email: kyb@acme.example
    phone: +442079460000
"""


def located(text: str = TEXT) -> Located:
    document = parse(text, "t.yaml", Lines(text)).document
    assert document is not None
    return document


def test_a_part_that_was_written_is_found_whole() -> None:
    document = located()
    walked = document.walk(("invites", 0, "name"))
    assert walked.taken == 3 and walked.spot is None  # a plain value holds nothing
    assert document.mark(("invites", 0, "name")) == Mark(3, 11)


def test_a_field_left_out_points_at_its_entry() -> None:
    document = located()
    entry = document.walk(("invites", 0))

    walked = document.walk(("invites", 0, "addOns"))

    assert walked == (entry.spot, entry.position, 2)
    assert document.mark(("invites", 0, "addOns")) == Mark(2, 5)


def test_a_field_inside_a_plain_value_points_at_the_value() -> None:
    document = located()
    name = document.walk(("invites", 0, "name"))

    walked = document.walk(("invites", 0, "name", "first"))

    assert walked == (None, name.position, 3)
    assert document.mark(("invites", 0, "name", "first")) == Mark(3, 11)


def test_an_index_past_the_end_or_a_name_in_a_list_points_at_the_list() -> None:
    document = located()
    listed = document.walk(("invites",))
    for step in (1, 5, -1, "id"):  # 1: one past the only entry
        assert document.walk(("invites", step, "id")) == (listed.spot, listed.position, 1), step
        assert document.mark(("invites", step)) == Mark(2, 3), step


def test_a_key_is_shown_where_it_was_written() -> None:
    assert located().key_mark(("invites", 0, "email")) == Mark(4, 5)


def test_a_key_under_a_part_left_out_is_shown_at_the_deepest_part_written() -> None:
    # `email` is a key of the entry, but not of the `primaryContact` left out:
    # pointing at the entry's `email` would send the reader to the wrong line.
    document = located()
    assert document.key_mark(("invites", 0, "primaryContact", "email")) == Mark(2, 5)
    assert document.key_mark(("invites", 0, "name", "first")) == Mark(3, 11)


def test_the_text_yaml_read_as_a_number_is_kept_only_where_it_was_written() -> None:
    document = located()
    assert document.raw(("invites", 0, "phone")) == "+442079460000"
    assert document.raw(("invites", 0, "name")) is None  # read as text
    assert document.raw(("invites", 0, "primaryContact", "phone")) is None  # left out
    assert document.raw(("invites", 0, "phone", "x")) is None
    assert document.raw(()) is None
