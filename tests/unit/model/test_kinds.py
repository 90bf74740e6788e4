"""Field kinds (reconciler.model.kinds): a server's value of the wrong kind or size is
named, one definition of equal, and what differs inside a value, checked against DeepDiff.

A value the kind refuses leaves that invite alone (the API client's BadInviteValue:
tests/unit/api/test_client.py); the message says which field and what the server sent.
"""

from __future__ import annotations

from typing import Any, TypeVar

import pytest
from deepdiff import DeepDiff
from hypothesis import given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator
from support.values import value

from reconciler.model.fields import field_kinds, kind_of
from reconciler.model.kinds import NO_DELTA, ContactKind, FieldDelta, SetKind, TextKind, canonical
from reconciler.model.values import Contact, IdentifierSet, nfc
from reconciler.resources import invite_schema_path
from reconciler.schema.check import load_schema

K = TypeVar("K")


def kind_as(field: str, kind: type[K]) -> K:
    found = kind_of(field)
    assert isinstance(found, kind)
    return found


MAX_TEXT_CHARS = kind_as("name", TextKind).max_chars
MAX_SET_ITEMS = kind_as("groups", SetKind).max_items
MAX_KEY_CHARS = kind_as("primaryContact", ContactKind).max_key_chars


def problem(field: str, raw: Any) -> str:
    said = kind_of(field).problem(raw)
    assert said is not None
    return said


def check_invite_values(fields: dict[str, Any]) -> None:
    for field, raw in fields.items():
        assert kind_of(field).problem(raw) is None, field


@pytest.mark.parametrize(
    ("field", "value", "said"),
    [
        ("name", True, "is a boolean (true), not a string"),
        ("name", False, "is a boolean (false), not a string"),
        ("name", 42, "is a number (42), not a string"),
        ("email", float("inf"), "is a number (inf), not a string"),
        ("name", 10**60, "is a number (" + "1" + "0" * 39 + "), not a string"),
        ("name", {"first": "Acme"}, "is an object, not a string"),
        ("name", ["Acme"], "is a list, not a string"),
        ("groups", "emea", "is a string, not a list of strings"),
        ("groups", {"emea": True}, "is an object, not a list of strings"),
        ("groups", ["emea", 7], "item 1 is a number (7), not a string"),
        ("groups", ["emea", None], "item 1 is null, not a string"),
        ("primaryContact", "Jane", "is a string, not an object of strings"),
        ("primaryContact", {"name": ["Jane"]}, "field `name` is a list, not a string"),
        (
            "primaryContact",
            {"k" * 60: 1},
            "field `" + "k" * 60 + "` is a number (1), not a string",
        ),
        (
            "primaryContact",
            {"\x1b[2Jname": 1},
            "field `\\x1b[2Jname` is a number (1), not a string",
        ),
    ],
)
def test_a_value_of_the_wrong_kind_is_named(field: str, value: Any, said: str) -> None:
    assert problem(field, value) == said


def test_sizes_up_to_the_limits_are_accepted_and_one_more_is_not() -> None:
    check_invite_values(
        {
            "name": "n" * MAX_TEXT_CHARS,
            "groups": [f"g{i}" for i in range(MAX_SET_ITEMS)],
            "primaryContact": {f"{i:02}" + "k" * (MAX_KEY_CHARS - 2): "v" for i in range(20)},
            "phone": None,
        }
    )
    assert problem("name", "n" * (MAX_TEXT_CHARS + 1)) == (
        "has 1,001 characters, more than the 1,000 allowed"
    )
    assert problem("groups", ["g"] * (MAX_SET_ITEMS + 1)) == (
        "has 1,001 items, more than MAX_SET_ITEMS (1,000)"
    )
    assert problem("primaryContact", {f"k{i}": "v" for i in range(21)}) == (
        "has 21 keys, more than the 20 allowed"
    )
    assert problem("groups", ["ok", "g" * (MAX_TEXT_CHARS + 1)]) == (
        "item 1 has 1,001 characters, more than the 1,000 allowed"
    )


def test_a_servers_text_with_a_long_run_of_combining_marks_is_refused_unnormalised() -> None:
    # NFC reorders a run of combining marks in quadratic time: 1,900 set items of 1,000
    # characters, within max_response_bytes, cost seconds of CPU for each invite read.
    zalgo = "a" + "\u0301\u0316" * 400
    assert problem("groups", ["ok", zalgo]) == (
        "item 1 holds 800 combining marks in a row, more than the 30 allowed"
    )
    assert problem("name", "Z" + "\u0316" * 31) == (
        "holds 31 combining marks in a row, more than the 30 allowed"
    )
    check_invite_values({"name": "Zoe\u0308 " + "\u0316" * 30, "groups": ["e\u0301"]})


def test_a_contact_field_with_no_value_is_fine() -> None:
    check_invite_values({"primaryContact": {"name": None}})


def test_a_contact_key_is_bounded_like_a_value_and_shown_cut_short() -> None:
    said = problem("primaryContact", {"name": "J", "k" * 100_000: "v"})
    assert said == (
        "has a field named `" + "k" * 40 + "…` of 100,000 characters, more than the "
        f"{MAX_KEY_CHARS} allowed"
    )
    said = problem("primaryContact", {"\u202e" * 65: "v"})
    assert "\u202e" not in said and "\\u202e" in said


# -- a server's values against the schema's own words for them ------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=3),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner),
    max_leaves=6,
)
SERVER_DEFINITION = {TextKind: "serverText", SetKind: "serverSet", ContactKind: "serverContact"}


@settings(max_examples=200, deadline=None)
@given(field=st.sampled_from(sorted(field_kinds())), raw=json_values)
def test_a_kind_refuses_what_the_schemas_server_definition_refuses(field: str, raw: Any) -> None:
    """The bounds are read from the schema's serverText, serverSet and serverContact, and a
    kind's check says what jsonschema says of them (a null: no value held)."""
    schema = load_schema(invite_schema_path())
    kind = kind_of(field)
    definition = {"$ref": f"#/$defs/{SERVER_DEFINITION[type(kind)]}", "$defs": schema["$defs"]}
    fits = raw is None or Draft202012Validator(definition).is_valid(raw)
    assert (kind.problem(raw) is None) == fits


# -- one definition of equal ----------------------------------------------------------------


def test_text_is_equal_in_nfc_and_nowhere_else() -> None:
    assert kind_of("name").equal("Cafe\u0301", "Caf\u00e9")
    assert kind_of("groups").equal(
        value("groups", ["e\u0301", "a"]), value("groups", ["a", "\u00e9"])
    )
    contact = kind_of("primaryContact")
    assert contact.equal(Contact({"name": "Zoe\u0308"}), Contact({"name": "Zo\u00eb"}))
    assert not kind_of("name").equal("\ufb01nance", "finance")  # NFKC is not NFC
    assert not kind_of("name").equal("a\u200bb", "ab")


def test_a_set_is_equal_whatever_its_order_and_repeats_and_nothing_else_is() -> None:
    groups = kind_of("groups")
    assert groups.equal(IdentifierSet(["b", "a", "a"]), IdentifierSet(["a", "b"]))
    assert canonical(IdentifierSet(["b", "a", "b"])) == frozenset({"a", "b"})
    assert not groups.equal(IdentifierSet(["a"]), None)
    assert canonical(None) is None


def test_a_contact_is_equal_sub_field_by_sub_field_and_a_null_is_not_a_missing_one() -> None:
    contact = kind_of("primaryContact")
    assert contact.equal(Contact({"a": "x", "b": "y"}), Contact({"b": "y", "a": "x"}))
    assert not contact.equal(Contact({"a": "x", "b": None}), Contact({"a": "x"}))
    # Managed: only the sub-fields the files name, a missing one held as None.
    managed = contact.managed(Contact({"a": "x"}), Contact({"a": "x", "b": "y"}))
    assert managed == {"a": "x"}
    assert not contact.differs(Contact({"a": "x"}), Contact({"a": "x", "b": "y"}))
    assert contact.differs(Contact({"c": "z"}), Contact({"a": "x"}))


def test_a_contacts_text_moved_to_another_sub_field_is_a_change() -> None:
    # The same texts under other names is another contact: the name written into the
    # phone is a change a plan must show, not a contact equal to the first.
    contact = kind_of("primaryContact")
    was = Contact({"name": "Zoë Ndlovu", "phone": None})
    now = Contact({"name": None, "phone": "Zoë Ndlovu"})
    assert not contact.equal(was, now)
    assert canonical(was) != canonical(now)


# -- what differs inside a value ------------------------------------------------------------


def delta(field: str, before: Any, after: Any) -> FieldDelta:
    was = None if before is None else value(field, before)
    now = None if after is None else value(field, after)
    return kind_of(field).delta(was, now)


def test_a_set_item_is_added_or_removed_never_changed_into_another() -> None:
    # DeepDiff on its own pairs 'c' with 'e' as one changed value at the same index.
    assert delta("groups", ["a", "b", "c"], ["b", "e", "d"]) == FieldDelta(
        ["e", "d"], ["a", "c"], []
    )


def test_items_show_as_written_in_their_lists_order_with_the_servers_repeats() -> None:
    assert delta("addOns", ["aml", "aml", "kyc"], ["zeta", "kyc", "beta"]) == FieldDelta(
        ["zeta", "beta"], ["aml", "aml"], []
    )


def test_contact_sub_fields_in_the_files_order_then_the_servers() -> None:
    before = {"phone": "+1", "email": "old@x.example", "title": "CFO"}
    after = {"name": "Jane", "email": "new@x.example"}
    assert delta("primaryContact", before, after).sub_changes == [
        ("name", None, "Jane"),
        ("email", "old@x.example", "new@x.example"),
        ("phone", "+1", None),
        ("title", "CFO", None),
    ]


def test_a_missing_sub_field_is_a_null_one() -> None:
    assert delta("primaryContact", {"phone": None}, {}) == NO_DELTA


def test_text_fields_and_unchanged_sets_have_no_delta() -> None:
    assert delta("name", "A", "B") == NO_DELTA
    assert delta("groups", ["b", "a"], ["a", "b"]) == NO_DELTA


def test_a_value_that_is_not_there_counts_as_an_empty_one() -> None:
    assert delta("groups", None, ["a"]) == FieldDelta(["a"], [], [])
    assert delta("primaryContact", None, {"name": "J"}).sub_changes == [("name", None, "J")]


# DeepDiff, as the plan once used it, over the same canonical forms: an independent
# oracle the kinds' plain set and dict operations must agree with.


def _deepdiff_set(before: IdentifierSet, after: IdentifierSet) -> FieldDelta:
    old, new = sorted(before.canonical()), sorted(after.canonical())
    if old == new:
        return NO_DELTA
    tree = DeepDiff(
        {"f": old},
        {"f": new},
        ignore_order_func=lambda level: level.path(output_format="list") == ["f"],
        cutoff_intersection_for_pairs=0,
        report_repetition=True,
        view="tree",
    )
    added = {level.t2 for level in tree.get("iterable_item_added", [])}
    removed = {level.t1 for level in tree.get("iterable_item_removed", [])}
    return FieldDelta(
        [i for i in after if nfc(i) in added], [i for i in before if nfc(i) in removed], []
    )


def _deepdiff_contact(before: Contact, after: Contact) -> FieldDelta:
    names = list(dict.fromkeys([*after, *before]))

    def canonical_form(contact: Contact) -> dict[str, Any]:
        return {k: None if (v := contact.get(k)) is None else nfc(v) for k in names}

    tree = DeepDiff(canonical_form(before), canonical_form(after), view="tree")
    changed = {level.path(output_format="list")[0] for levels in tree.values() for level in levels}
    subs = [(k, before.get(k), after.get(k)) for k in names if k in changed]
    return FieldDelta([], [], subs) if subs else NO_DELTA


texts = st.sampled_from(["emea", "vip", "enterprise", "apac", "kyc", "Ünïcødé", "Ünïcødé", ""])
id_sets = st.lists(texts, max_size=6).map(IdentifierSet)
contacts = st.dictionaries(
    st.sampled_from(["name", "email", "phone", "title"]), st.none() | texts, max_size=4
).map(Contact)


@settings(max_examples=300, deadline=None)
@given(before=id_sets, after=id_sets)
def test_a_sets_delta_is_deepdiffs_over_canonical_forms(
    before: IdentifierSet, after: IdentifierSet
) -> None:
    assert kind_of("groups").delta(before, after) == _deepdiff_set(before, after)


@settings(max_examples=300, deadline=None)
@given(before=contacts, after=contacts)
def test_a_contacts_delta_is_deepdiffs_over_canonical_forms(
    before: Contact, after: Contact
) -> None:
    assert kind_of("primaryContact").delta(before, after) == _deepdiff_contact(before, after)


@settings(max_examples=300, deadline=None)
@given(want=contacts, have=contacts)
def test_a_contact_differs_exactly_when_deepdiff_sees_its_managed_part_move(
    want: Contact, have: Contact
) -> None:
    kind = kind_of("primaryContact")
    managed = kind.managed(want, have)
    assert isinstance(managed, Contact)
    deep = _deepdiff_contact(managed, want)
    assert kind.differs(want, have) == (deep != NO_DELTA)


def test_a_servers_value_is_redacted_every_text_and_contact_name_included(
    registered_secret: str,
) -> None:
    contact = Contact({registered_secret: "x", "title": registered_secret.upper()})
    assert kind_of("primaryContact").redacted(contact) == {"[redacted]": "x", "title": "[redacted]"}
    groups = IdentifierSet(["a", f"b {registered_secret}"])
    assert kind_of("groups").redacted(groups) == ["a", "b [redacted]"]
    assert kind_of("name").redacted(registered_secret) == "[redacted]"


def test_an_export_names_the_sub_fields_a_file_cannot_hold_five_at_most() -> None:
    contact = kind_as("primaryContact", ContactKind)
    many = Contact({"name": "A", **{f"x{n}": "v" for n in range(7)}})
    notes: list[str] = []
    assert contact.for_file(many, "primaryContact", notes) == Contact({"name": "A"})
    five = Contact({"name": "A", **{f"x{n}": "v" for n in range(5)}})
    contact.for_file(five, "primaryContact", notes)
    tail = (
        "left out: a file cannot hold them; "
        "unmanaged, they keep their values when the contact is sent"
    )
    assert notes == [
        f"`primaryContact` sub-fields `x0`, `x1`, `x2`, `x3`, `x4` and 2 more {tail}",
        f"`primaryContact` sub-fields `x0`, `x1`, `x2`, `x3`, `x4` {tail}",
    ]


def test_an_export_writes_a_contacts_phone_quoted_and_other_sub_fields_as_they_are() -> None:
    written = kind_as("primaryContact", ContactKind).written(
        Contact({"name": "A", "phone": "+15550000000", "title": "CFO", "fax": None})
    )
    assert written == {"name": "A", "phone": "+15550000000", "title": "CFO"}
    assert isinstance(written, dict)
    assert [type(v).__name__ for v in written.values()] == ["str", "Quoted", "str"]


# -- what a plan sends and shows, the server's value beside the files' ----------------------

ZOE_NFC = "Zo\u00eb Ndlovu"  # as typed on most keyboards
ZOE_NFD = "Zoe\u0308 Ndlovu"  # as some platforms store it back: e and a combining diaeresis


def test_a_name_the_server_holds_in_another_normal_form_is_not_sent_again() -> None:
    name = kind_of("name")
    assert not name.differs(ZOE_NFC, ZOE_NFD)
    assert name.differs(ZOE_NFC, "Zoe Ndlovu")
    assert name.differs(ZOE_NFC, None)


def test_a_contact_whose_name_the_server_holds_in_another_normal_form_is_not_sent_again() -> None:
    contact = kind_of("primaryContact")
    want = Contact({"name": ZOE_NFC, "email": "zoe@ndlovu-trading.example"})
    have = Contact(
        {"name": ZOE_NFD, "email": "zoe@ndlovu-trading.example", "phone": "+27821234567"}
    )
    assert not contact.differs(want, have)
    assert contact.differs(want, Contact({**have, "email": "zoe@ndlovu.example"}))


def test_a_contact_set_where_the_server_holds_none_carries_nothing_of_the_servers() -> None:
    contact = kind_of("primaryContact")
    want = Contact({"name": "Ana Lúcia Brandão", "email": "ana@brandao-exportadora.example"})
    assert contact.kept(want, None) == ()
    held = Contact({"name": "Ana", "email": "ana@brandao-exportadora.example", "fax": "+5511"})
    assert contact.kept(want, held) == ("fax",)


def test_a_contact_with_a_number_or_a_list_for_a_sub_field_is_no_contact_value() -> None:
    # What a saved plan holds is read back through from_json: such a contact refuses it.
    contact = kind_of("primaryContact")
    assert contact.from_json({"name": "Björk Guðmundsdóttir", "phone": 3545511234}) is None
    assert contact.from_json({"name": "Björk Guðmundsdóttir", "email": ["b@x.example"]}) is None
    assert contact.from_json({"name": "Björk Guðmundsdóttir", "phone": None}) == Contact(
        {"name": "Björk Guðmundsdóttir", "phone": None}
    )


def test_a_servers_sub_field_name_within_the_bound_is_shown_whole_and_escaped() -> None:
    # 64 characters, the most a name may have, each shown as a 6-character escape: whole,
    # so no escape is cut in half (the name is bounded; the message with it).
    said = problem("primaryContact", {"\u202e" * MAX_KEY_CHARS: 5})
    shown = "\\u202e" * MAX_KEY_CHARS
    assert said == f"field `{shown}` is a number (5), not a string"


def test_an_export_says_how_many_sub_fields_there_are_past_the_five_it_names() -> None:
    contact = kind_as("primaryContact", ContactKind)
    six = Contact({"name": "Søren Kierkegaard", **{f"x-{n}": "v" for n in range(6)}})
    notes: list[str] = []
    contact.for_file(six, "primaryContact", notes)
    assert notes == [
        "`primaryContact` sub-fields `x-0`, `x-1`, `x-2`, `x-3`, `x-4` and 1 more left out: "
        "a file cannot hold them; unmanaged, they keep their values when the contact is sent"
    ]


def test_a_required_sub_field_a_file_cannot_hold_leaves_the_whole_contact_out() -> None:
    # A contact without its name or e-mail would not validate: the export leaves the
    # field out whole; an optional sub-field (the phone) goes alone.
    contact = kind_of("primaryContact")
    held = Contact({"name": "Nguyễn Thị Hoa", "email": "hoa@", "phone": "0912 345 678"})
    assert contact.without(held, "email") is None
    assert contact.without(held, "name") is None
    assert contact.without(held, "phone") == Contact({"name": "Nguyễn Thị Hoa", "email": "hoa@"})


def test_a_plan_shows_the_files_sub_fields_as_written_and_the_servers_redacted(
    registered_secret: str,
) -> None:
    # What the files say is what apply sends, so it is kept as written even when it
    # happens to hold the secret; what the server holds is shown redacted.
    contact = kind_of("primaryContact")
    before = Contact({"name": "Old", "email": "o@x.example", "title": registered_secret})
    value = Contact({"name": f"Team {registered_secret}", "email": "o@x.example"})
    patched = contact.patch_value(value, before)
    assert contact.server_parts_redacted(patched, before) == Contact(
        {"name": f"Team {registered_secret}", "email": "o@x.example", "title": "[redacted]"}
    )


def test_a_saved_plan_setting_a_contact_where_the_server_held_none_sends_it_as_planned() -> None:
    contact = kind_of("primaryContact")
    planned = Contact({"name": "Ólafur Arnalds", "email": "olafur@arnalds.example"})
    assert contact.with_server_parts(planned, None, None) == planned
    held = Contact({"name": "Ólafur", "email": "olafur@arnalds.example", "title": "CEO"})
    assert contact.with_server_parts(planned, held, held) == Contact(
        {"name": "Ólafur Arnalds", "email": "olafur@arnalds.example", "title": "CEO"}
    )
