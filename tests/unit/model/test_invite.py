"""The invite model (reconciler.model.invite): its values, its field kinds (a server's
value of the wrong kind or size named, one definition of equal, what differs inside a
value), the fields read from the schema, the invites (the id rule, resendOnChange, where
an entry was written) and the outcome of a read."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any, TypeVar

import pytest
from deepdiff import DeepDiff
from hypothesis import given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator, ValidationError
from referencing import Registry, Resource
from support.values import typed, value

from reconciler.api.exceptions import (
    ApiError,
    AuthenticationFailed,
    Conflict,
    GatewayRefused,
    NotFound,
    PermissionDenied,
    RateLimited,
    ServerError,
    TokenRefused,
    TransportError,
)
from reconciler.desired.state import load_text, refuse_bad_ids
from reconciler.errors import ReconcilerError
from reconciler.files import invite_schema_path, resource_path
from reconciler.model import invite
from reconciler.model.invite import (
    ID_KEY,
    MAX_MARKS_IN_A_ROW,
    NO_DELTA,
    RECONCILER_KEYS,
    RESEND_KEY,
    Contact,
    ContactKind,
    CurrentInvite,
    DesiredInvite,
    Done,
    Failed,
    FieldDelta,
    FieldValue,
    IdentifierSet,
    NotRun,
    Outcome,
    SetKind,
    SourceLocation,
    TextKind,
    canonical,
    differences,
    field_kinds,
    fields_from_json,
    fields_json,
    kind_of,
    marks_in_a_row,
    nfc,
    stop_if_run_fatal,
    to_json,
    too_many_marks,
    updatable_fields,
)
from reconciler.sandbox.app import _patch_validator
from reconciler.schema.check import load_schema
from reconciler.service.export import export_entry
from reconciler.settings.contract import field_name_problems


def test_the_reconcilers_keys_are_never_fields_of_an_invite() -> None:
    assert RECONCILER_KEYS == (ID_KEY, RESEND_KEY)
    text = "invites:\n  - id: inv_1\n    name: Acme\n    resendOnChange: true\n"
    (desired,), problems = load_text(text, "a.yaml")
    assert problems == []
    assert desired.fields == {"name": "Acme"} and desired.resend_on_change


@pytest.mark.parametrize("ident", ["inv_1", "a.b-c", "x" * 128, ".a", "a."])
def test_ids_the_rule_accepts(ident: str) -> None:
    assert invite.INVITE_ID.fullmatch(ident)


@pytest.mark.parametrize("ident", ["", ".", "..", "x" * 129, "a b", "a/b", "inv_1\n"])
def test_ids_the_rule_refuses_with_one_wording_everywhere(ident: str) -> None:
    assert not invite.INVITE_ID.fullmatch(ident)
    with pytest.raises(ReconcilerError, match=f"\\({invite.ID_RULE}\\)"):
        refuse_bad_ids([ident], "--id")


def test_a_file_entry_with_a_bad_id_is_refused_in_the_same_words() -> None:
    _, problems = load_text("invites:\n  - id: ..\n    name: Acme\n", "a.yaml")
    assert any(invite.ID_RULE in str(problem) for problem in problems)


def test_the_model_imports_nothing_heavy() -> None:
    # Imported on the loader's path, whose start-up is benchmarked.
    code = (
        "import sys, reconciler.model.invite, reconciler.model.invite, reconciler.model.invite, "
        "reconciler.model.invite; reconciler.model.invite.field_kinds(); "
        "print(sorted(m for m in ('deepdiff', 'jsonschema', 'yaml', 'requests', 'click') "
        "if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


# resendOnChange: true after any update, a list only after an update carrying a listed field.
@pytest.mark.parametrize(
    ("written", "rule"),
    [
        ("true", True),
        ("false", False),
        ("[email, primaryContact]", ("email", "primaryContact")),
        ("[groups]", ("groups",)),
    ],
)
def test_resend_on_change_reads_true_false_or_a_list_of_fields(written: str, rule: object) -> None:
    text = f"invites:\n  - id: inv_1\n    name: Acme\n    resendOnChange: {written}\n"
    (desired,), problems = load_text(text, "a.yaml")
    assert problems == []
    assert desired.resend_on_change == rule
    assert desired.fields == {"name": "Acme"}  # never a field sent to the platform


@pytest.mark.parametrize(
    ("rule", "patched", "due"),
    [
        (True, ["groups"], True),
        (False, ["email"], False),
        (("email", "primaryContact"), ["groups"], False),
        (("email", "primaryContact"), ["groups", "email"], True),
        (("email", "primaryContact"), ["primaryContact"], True),
        (("email",), [], False),
    ],
)
def test_a_list_re_sends_only_when_the_update_carried_a_listed_field(
    rule: invite.ResendRule, patched: list[str], due: bool
) -> None:
    assert invite.resend_due(rule, patched) is due


def test_a_desired_invite_keeps_its_fields_in_order_and_shares_their_names() -> None:
    where = SourceLocation("invites/a.yaml", 3, 5)
    fields = typed({"name": "Acme", "groups": ["b", "a"], "primaryContact": {"name": "J"}})
    one = DesiredInvite("inv_1", fields, where)
    other = DesiredInvite("inv_2", typed({"name": "B", "groups": [], "primaryContact": {}}), where)
    assert list(one.fields) == ["name", "groups", "primaryContact"]
    assert one.get("groups") == ["b", "a"] and one.get("email") is None
    assert (one.name, one.source) == ("Acme", where)
    assert one._names is other._names  # one tuple for every invite naming the same fields
    assert one == DesiredInvite("inv_1", dict(fields), where)
    assert one != DesiredInvite("inv_1", fields, where, resend_on_change=True)


def test_a_source_location_is_named_as_every_message_names_it() -> None:
    assert str(SourceLocation("invites/a.yaml", 12)) == "invites/a.yaml:12"
    assert str(SourceLocation("in\x1bvites.yaml", 2)) == "in\\x1bvites.yaml:2"
    assert str(SourceLocation("a saved plan's own text", 0)) == "a saved plan's own text"


def test_a_current_invite_is_pending_unless_the_server_says_another_status() -> None:
    """Compared without case; no status is taken as pending (never pruned, issue 37 row 2)."""
    for pending in ("pending", "PENDING", "Pending", None):
        assert CurrentInvite("inv_1", pending, {}).is_pending
    for other in ("accepted", "expired", "", "pending "):
        assert not CurrentInvite("inv_1", other, {}).is_pending


# -- from test_values.py ------------------------------------------------------------------
# Typed values (reconciler.model.invite): a contact and a set as written, their JSON
# form.


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
    one, other = Contact({"name": "A", "email": "a"}), Contact({"name": "B", "email": "b"})
    assert one._names is other._names  # contacts naming the same sub-fields share one tuple


def test_a_contact_merged_keeps_its_sub_fields_and_takes_the_new_values() -> None:
    held = Contact({"name": "J", "email": "j@x.example", "phone": "+1"})
    sent = held.merged(Contact({"email": "new@x.example", "title": "CFO"}))
    assert list(sent.items()) == [
        ("name", "J"),
        ("email", "new@x.example"),
        ("phone", "+1"),
        ("title", "CFO"),
    ]


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


# -- from test_kinds.py -------------------------------------------------------------------
# Field kinds (reconciler.model.invite): a server's value of the wrong kind or size is
# named, one definition of equal, and what differs inside a value, checked against DeepDiff.
#
# A value the kind refuses leaves that invite alone (the API client's BadInviteValue:
# tests/unit/api/test_client.py); the message says which field and what the server sent.


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
        ("primaryContact", {"k" * 60: 1}, "field `" + "k" * 60 + "` is a number (1), not a string"),
        (
            "primaryContact",
            {"\x1b[2Jname": 1},
            "field `\\x1b[2Jname` is a number (1), not a string",
        ),
        # 64 characters, the most a name may have, each shown as a 6-character escape: whole,
        # so no escape is cut in half (the name is bounded; the message with it).
        (
            "primaryContact",
            {"\u202e" * MAX_KEY_CHARS: 5},
            "field `" + "\\u202e" * MAX_KEY_CHARS + "` is a number (5), not a string",
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
    check_invite_values({"primaryContact": {"name": None}})  # a sub-field with no value


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
    assert not differs("primaryContact", Contact({"a": "x"}), Contact({"a": "x", "b": "y"}))
    assert differs("primaryContact", Contact({"c": "z"}), Contact({"a": "x"}))


def test_a_contacts_text_moved_to_another_sub_field_is_a_change() -> None:
    # The same texts under other names is another contact: the name written into the
    # phone is a change a plan must show, not a contact equal to the first.
    contact = kind_of("primaryContact")
    was = Contact({"name": "Zoë Ndlovu", "phone": None})
    now = Contact({"name": None, "phone": "Zoë Ndlovu"})
    assert not contact.equal(was, now)
    assert canonical(was) != canonical(now)


# -- what differs inside a value ------------------------------------------------------------


def differs(field: str, want: Any, have: Any) -> bool:
    """Whether a PATCH carries ``field``: DeepDiff sees the part of ``have`` that ``want``
    manages move (compare_invite's question, one field)."""
    return field in differences({field: kind_of(field).managed(want, have)}, {field: want})


def inside(field: str, was: Any, now: Any) -> FieldDelta:
    """What a plan shows inside ``field`` from ``was`` to ``now`` (typed values)."""
    return differences({field: was}, {field: now}).get(field, NO_DELTA)


def delta(field: str, before: Any, after: Any) -> FieldDelta:
    was = None if before is None else value(field, before)
    now = None if after is None else value(field, after)
    return inside(field, was, now)


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


# DeepDiff with the options the plan once needed (order ignored at a set's top level
# only, no pairing of items, repetitions reported) over sorted lists: a second reading
# of the same canonical forms that ``differences`` (over sets and dicts) must agree with.


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
    assert inside("groups", before, after) == _deepdiff_set(before, after)


@settings(max_examples=300, deadline=None)
@given(before=contacts, after=contacts)
def test_a_contacts_delta_is_deepdiffs_over_canonical_forms(
    before: Contact, after: Contact
) -> None:
    assert inside("primaryContact", before, after) == _deepdiff_contact(before, after)


@settings(max_examples=300, deadline=None)
@given(want=contacts, have=contacts)
def test_a_contact_differs_exactly_when_deepdiff_sees_its_managed_part_move(
    want: Contact, have: Contact
) -> None:
    kind = kind_of("primaryContact")
    managed = kind.managed(want, have)
    assert isinstance(managed, Contact)
    deep = _deepdiff_contact(managed, want)
    assert differs("primaryContact", want, have) == (deep != NO_DELTA)


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


def test_a_contact_whose_name_the_server_holds_in_another_normal_form_is_not_sent_again() -> None:
    want = Contact({"name": ZOE_NFC, "email": "zoe@ndlovu-trading.example"})
    have = Contact(
        {"name": ZOE_NFD, "email": "zoe@ndlovu-trading.example", "phone": "+27821234567"}
    )
    assert not differs("primaryContact", want, have)
    assert differs("primaryContact", want, Contact({**have, "email": "zoe@ndlovu.example"}))


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


# -- from test_fields.py ------------------------------------------------------------------
# The invite's fields, read from the invite schema (reconciler.model.invite), and every
# other place that names them: each derives them from the schema, or is held equal here.


def schema(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(resource_path(f"schemas/{name}").read_text("utf-8"))
    return loaded


INVITE = schema("invites.schema.json")


def test_the_fields_are_the_schemas_invite_properties_in_order() -> None:
    properties = list(INVITE["$defs"]["invite"]["properties"])
    assert updatable_fields() == tuple(p for p in properties if p not in RECONCILER_KEYS)
    assert INVITE["$defs"]["resendField"]["enum"] == list(updatable_fields())  # resendOnChange's
    assert invite_schema_path() == resource_path("schemas/invites.schema.json")  # the package's


def test_each_fields_kind_follows_from_its_type() -> None:
    kinds = {name: type(kind) for name, kind in field_kinds().items()}
    assert [kinds[name] for name in ("name", "email", "phone")] == [TextKind] * 3
    assert kinds["primaryContact"] is ContactKind
    assert [kinds[name] for name in ("groups", "addOns", "attachments")] == [SetKind] * 3
    contact = kind_of("primaryContact")
    assert isinstance(contact, ContactKind)
    assert list(contact.sub_fields) == ["name", "email", "phone"]
    assert contact.required == ("name", "email")
    phones = [kind_of("phone"), contact.sub_fields["phone"]]
    assert all(isinstance(k, TextKind) and k.quoted for k in phones)  # E.164: always quoted
    assert not any(
        isinstance(k, TextKind) and k.quoted for k in (kind_of("name"), kind_of("email"))
    )


def test_the_config_file_may_rename_every_field_and_no_other() -> None:
    field_names = schema("config.schema.json")["properties"]["field_names"]
    assert list(field_names["properties"]) == list(updatable_fields())
    assert field_names["additionalProperties"] is False


def test_a_saved_plan_names_the_fields_by_the_invite_schemas_own_list() -> None:
    fields = schema("plan.schema.json")["$defs"]["fields"]
    assert fields["propertyNames"] == {"$ref": "invites.schema.json#/$defs/resendField"}
    plan = schema("plan.schema.json")
    registry: Registry[Any] = Registry().with_resource(
        INVITE["$id"], Resource.from_contents(INVITE)
    )
    named = Draft202012Validator(
        {"$id": plan["$id"], "$defs": plan["$defs"], "$ref": "#/$defs/fields"}, registry=registry
    )
    for name in updatable_fields():
        named.validate({name: None})
    with pytest.raises(ValidationError, match="'notAField' is not one of"):
        named.validate({"notAField": None})


def test_the_sandbox_takes_a_patch_of_every_field_and_no_other() -> None:
    validator = _patch_validator()
    assert list(validator.schema["properties"]) == list(updatable_fields())
    assert validator.schema["additionalProperties"] is False


def test_settings_check_the_wire_names_of_every_field() -> None:
    # Any two fields sent under one wire name are refused, whichever they are.
    first, *others = updatable_fields()
    for other in others:
        assert field_name_problems({other: first}) != []


def test_an_export_writes_the_fields_in_the_schemas_order() -> None:
    invite = CurrentInvite(
        "inv_1",
        "pending",
        typed(
            {
                "attachments": ["proof-of-address"],
                "addOns": ["edd"],
                "groups": ["emea"],
                "primaryContact": {"phone": "+442079460001", "email": "j@a.example", "name": "J"},
                "phone": "+442079460000",
                "email": "a@acme.example",
                "name": "Acme",
            }
        ),
    )
    entry, notes = export_entry(invite)
    assert notes == []
    assert list(entry) == [ID_KEY, *(f for f in updatable_fields() if f in invite.fields)]
    assert list(entry["primaryContact"]) == ["name", "email", "phone"]


def test_json_values_are_typed_by_their_fields_kind_and_others_left_out() -> None:
    raw = {"name": "Acme", "groups": ["a"], "primaryContact": {"name": "J", "phone": None}}
    assert fields_from_json({**raw, "notAField": "x", "email": 5}) == {
        "name": "Acme",
        "groups": IdentifierSet(["a"]),
        "primaryContact": Contact({"name": "J", "phone": None}),
    }


def _kinds_of(
    properties: dict[str, Any], tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> tuple[Any, Any]:
    """field_kinds() of the invite schema with ``properties`` set, and the edited file
    (the kinds, or the ReconcilerError raised)."""
    import reconciler.model.invite as fields_module
    from reconciler.errors import ReconcilerError

    schema = json.loads(invite_schema_path().read_text(encoding="utf-8"))
    fields = schema["$defs"]["invite"]["properties"]
    for name, sub in properties.items():
        if name in fields and "properties" in sub:
            fields[name]["properties"].update(sub["properties"])
        else:
            fields[name] = sub
    edited = tmp_path / "invites.schema.json"
    edited.write_text(json.dumps(schema), encoding="utf-8")
    monkeypatch.setattr(fields_module, "invite_schema_path", lambda: edited)
    field_kinds.cache_clear()
    try:
        return field_kinds(), edited
    except ReconcilerError as refused:
        return refused, edited
    finally:
        field_kinds.cache_clear()


KNOWN_KINDS = "text (type string), a set (type array) or an object of text"
NO_KIND = f"is of no kind this tool knows: {KNOWN_KINDS}"
SEATS = {"seats": {"type": "integer"}}
TAGS = {"tags": {"type": "array", "items": {"type": "string"}}}
BY_TEXT = "an object's sub-fields are compared one by one as text"
NOT_A_KIND = {  # the schema's properties edited, what is said after the file's name
    "a-contacts-list": (
        {"primaryContact": {"properties": TAGS}},
        f"`primaryContact.tags` must be text: {BY_TEXT}",
    ),
    "a-field-of-no-known-kind": (SEATS, f"the invite field `seats` {NO_KIND}"),
    "a-contacts-sub-field": (
        {"primaryContact": {"properties": SEATS}},
        f"the invite field `primaryContact.seats` {NO_KIND}",
    ),
}


@pytest.mark.parametrize(("properties", "said"), NOT_A_KIND.values(), ids=NOT_A_KIND)
def test_a_schemas_field_of_no_kind_is_refused_naming_it(
    tmp_path, monkeypatch, properties, said
) -> None:
    refused, edited = _kinds_of(properties, tmp_path, monkeypatch)
    assert str(refused) == f"{edited}: {said}"


def test_a_schemas_object_field_without_properties_is_a_contact_whose_sub_fields_none_manages(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    kinds, _ = _kinds_of({"billingContact": {"type": "object"}}, tmp_path, monkeypatch)
    billing = kinds["billingContact"]
    assert isinstance(billing, ContactKind)
    assert (billing.sub_fields, billing.required) == ({}, ())


# -- from test_outcome.py -----------------------------------------------------------------
# What became of a call (reconciler.model.invite): three cases, matched, never unpacked.


def described(outcome: Outcome[int, ApiError]) -> str:
    match outcome:
        case Done(value):
            return f"done {value}"
        case Failed(error):
            return f"failed {error.status}"
        case NotRun():
            return "not run"


def test_each_case_is_its_own_type() -> None:
    assert described(Done(3)) == "done 3"
    assert described(Failed(NotFound("gone", status=404))) == "failed 404"
    assert described(NotRun()) == "not run"
    assert Done(3) == Done(3) and Done(3) != Failed(3)


@pytest.mark.parametrize(
    "error",
    [
        AuthenticationFailed("token expired", status=401),
        TokenRefused("no token", status=401),
        PermissionDenied("missing scope", status=403),
        ServerError("bad gateway", status=502),
        GatewayRefused("busy", status=503),
        RateLimited("slow down", status=429),
        TransportError("connection refused", maybe_sent=False),
    ],
)
def test_an_error_every_read_would_meet_stops_the_run(error: ApiError) -> None:
    assert error.run_fatal
    with pytest.raises(ReconcilerError, match=r"^stopped reading invites: "):
        stop_if_run_fatal(error)


@pytest.mark.parametrize(
    "error", [NotFound("gone", status=404), Conflict("not pending", status=409)]
)
def test_an_error_about_one_invite_does_not(error: ApiError) -> None:
    assert not error.run_fatal
    stop_if_run_fatal(error)
