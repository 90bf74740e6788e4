"""Typed values (reconciler.model.values): a contact and a set as written, their JSON
form."""

from __future__ import annotations

import pytest

from reconciler.model.values import (
    MAX_MARKS_IN_A_ROW,
    Contact,
    FieldValue,
    IdentifierSet,
    fields_json,
    marks_in_a_row,
    nfc,
    to_json,
    too_many_marks,
)


def test_a_set_keeps_its_items_as_written_and_equals_the_list_it_was_read_from() -> None:
    groups = IdentifierSet(["vip", "emea", "vip"])
    assert list(groups) == ["vip", "emea", "vip"]
    assert groups == ["vip", "emea", "vip"] and groups != ["emea", "vip"]
    assert groups.canonical() == frozenset({"emea", "vip"})
    assert IdentifierSet(["e\u0301"]).canonical() == frozenset({"\u00e9"})


def test_a_contact_keeps_its_sub_fields_in_order_and_a_null_one_apart() -> None:
    contact = Contact({"name": "J", "phone": None, "title": "CFO"})
    assert list(contact) == ["name", "phone", "title"]
    assert contact["phone"] is None and "phone" in contact and "email" not in contact
    with pytest.raises(KeyError) as missing:
        contact["email"]
    assert missing.value.args == ("email",)  # a Mapping's error names the key, as dict's
    assert contact == {"title": "CFO", "name": "J", "phone": None}  # order means nothing
    assert contact != {"name": "J", "title": "CFO"}
    assert hash(contact) == hash(Contact({"title": "CFO", "phone": None, "name": "J"}))


def test_a_contact_merged_keeps_its_sub_fields_and_takes_the_new_values() -> None:
    held = Contact({"name": "J", "email": "j@x.example", "phone": "+1"})
    sent = held.merged(Contact({"email": "new@x.example", "title": "CFO"}))
    assert list(sent.items()) == [
        ("name", "J"),
        ("email", "new@x.example"),
        ("phone", "+1"),
        ("title", "CFO"),
    ]


def test_contacts_naming_the_same_sub_fields_share_one_tuple_of_names() -> None:
    one, other = Contact({"name": "A", "email": "a"}), Contact({"name": "B", "email": "b"})
    assert one._names is other._names


def test_values_as_json() -> None:
    fields: dict[str, FieldValue] = {
        "name": "Café",
        "groups": IdentifierSet(["b"]),
        "primaryContact": Contact({"x": None}),
    }
    assert fields_json({**fields, "phone": None}) == {
        "name": "Café",
        "groups": ["b"],
        "primaryContact": {"x": None},
        "phone": None,
    }
    assert to_json(None) is None


def test_nfc_leaves_ascii_alone_and_composes_the_rest() -> None:
    assert nfc("Cafe\u0301") == "Caf\u00e9"
    text = "plain"
    assert nfc(text) is text


def test_a_contact_made_from_another_mapping_holds_its_sub_fields() -> None:
    first = Contact({"name": "Ann", "email": "ann@x.example", "phone": None})
    assert Contact(first) == first
    assert list(Contact(first).items()) == [
        ("name", "Ann"),
        ("email", "ann@x.example"),
        ("phone", None),
    ]


@pytest.mark.parametrize(
    ("text", "refused"),
    [
        ("e" + "\u0301" * MAX_MARKS_IN_A_ROW, False),  # as many as allowed
        ("e" + "\u0301" * (MAX_MARKS_IN_A_ROW + 1), True),
        ("\u0301" * (MAX_MARKS_IN_A_ROW + 1), True),  # marks with no letter before them
        ("Zoë Ünal " * 10, False),  # long, in NFC: no mark at all
        (("e\u0301" * 20) + "x", False),  # many marks, never two in a row
        ("Ä" * 40 + "\u0301" * MAX_MARKS_IN_A_ROW + "x" + "\u0301" * 31, True),  # the second run
        ("\u0301" * 10, False),  # shorter than a run that is refused
        ("\u0301" * MAX_MARKS_IN_A_ROW + "x", False),  # as many as allowed, first
        ("Жёлтый" * 10, False),  # 60 letters from U+0300 up in a row, no mark: walked
        ("山田太郎" * 10, False),
    ],
)
def test_too_many_marks_refuses_only_a_run_longer_than_the_stream_safe_limit(
    text: str, refused: bool
) -> None:
    assert too_many_marks(text) is refused
    assert (marks_in_a_row(text) > MAX_MARKS_IN_A_ROW) is refused


def test_marks_in_a_row_counts_the_longest_run() -> None:
    assert marks_in_a_row("Zoe") == 0
    assert marks_in_a_row("Zoe\u0308 e\u0301\u0302x") == 2
