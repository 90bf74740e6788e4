"""What a plan shows inside a field comes from one DeepDiff of canonical forms.

The items added to and removed from a set field and the changed sub-fields of
an object field (reconciler.plan.compare.field_deltas) are checked against the
hand-written differences the plan showed before DeepDiff made them, for the
values the platform's fields hold (text, lists of text, objects of text).
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from reconciler.plan.changes import FieldChange, InviteChange, NotUpdatable
from reconciler.plan.compare import NO_DELTA, FieldDelta, compare_invite, field_deltas


def _old_set_difference(a: Any, b: Any) -> list[Any]:
    b_items = b if isinstance(b, list) else []
    return [x for x in (a if isinstance(a, list) else []) if x not in b_items]


def _old_sub_changes(before: Any, after: Any) -> list[tuple[str, Any, Any]]:
    before = before if isinstance(before, dict) else {}
    after = after if isinstance(after, dict) else {}
    keys = list(dict.fromkeys([*after, *before]))
    return [(k, before.get(k), after.get(k)) for k in keys if before.get(k) != after.get(k)]


texts = st.sampled_from(["emea", "vip", "enterprise", "apac", "kyc", "Ünïcødé", ""])
sets = st.one_of(st.none(), st.lists(texts, max_size=6))
contacts = st.one_of(
    st.none(),
    st.dictionaries(
        st.sampled_from(["name", "email", "phone", "title"]), st.one_of(st.none(), texts)
    ),
)


@settings(max_examples=200, deadline=None)
@given(before=sets, after=sets)
def test_set_items_added_and_removed_as_before(before: Any, after: Any) -> None:
    change = FieldChange("groups", before, after)
    assert change.added == _old_set_difference(after, before)
    assert change.removed == _old_set_difference(before, after)


@settings(max_examples=200, deadline=None)
@given(before=contacts, after=contacts)
def test_contact_sub_changes_as_before(before: Any, after: Any) -> None:
    change = FieldChange("primaryContact", before, after)
    assert change.sub_changes() == _old_sub_changes(before, after)


@settings(max_examples=100, deadline=None)
@given(groups=sets, add_ons=sets, contact=contacts, want_groups=sets, want_contact=contacts)
def test_one_diff_per_invite_gives_what_each_field_alone_gives(
    groups: Any, add_ons: Any, contact: Any, want_groups: Any, want_contact: Any
) -> None:
    before = {"groups": groups, "addOns": add_ons, "primaryContact": contact, "name": "A"}
    after = {"groups": want_groups, "addOns": ["kyc"], "primaryContact": want_contact, "name": "B"}
    whole = InviteChange("inv_1", "a.yaml:2", None, before, after, False).field_changes
    for change in whole:
        alone = FieldChange(change.field, change.before, change.after)
        assert (change.added, change.removed) == (alone.added, alone.removed)
        assert change.sub_changes() == alone.sub_changes()


def test_a_set_item_is_added_or_removed_never_changed_into_another() -> None:
    # DeepDiff on its own pairs 'c' with 'e' as one changed value at the same index.
    deltas = field_deltas({"groups": ["a", "b", "c"]}, {"groups": ["b", "e", "d"]})
    assert deltas["groups"] == FieldDelta(["e", "d"], ["a", "c"], [])


def test_items_show_as_written_in_their_lists_order_with_the_servers_repeats() -> None:
    deltas = field_deltas({"addOns": ["aml", "aml", "kyc"]}, {"addOns": ["zeta", "kyc", "beta"]})
    assert deltas["addOns"] == FieldDelta(["zeta", "beta"], ["aml", "aml"], [])


def test_set_items_compare_canonically() -> None:
    # True is not 1 (canonical's rule), though Python's `in` says it is.
    deltas = field_deltas({"groups": [1, "a"]}, {"groups": [True, "a"]})
    assert deltas["groups"] == FieldDelta([True], [1], [])


def test_order_inside_a_set_item_counts_as_the_patch_counts_it() -> None:
    # The schema keeps file items to text; a server's list items are compared as
    # canonical compares them, so the plan shows the change the PATCH makes.
    before, after = {"attachments": [["b", "a"]]}, {"attachments": [["a", "b"]]}

    assert compare_invite(after, before) == after
    assert field_deltas(before, after)["attachments"] == FieldDelta([["a", "b"]], [["b", "a"]], [])


def test_contact_sub_fields_in_the_files_order_then_the_servers() -> None:
    before = {"phone": "+1", "email": "old@x.example", "title": "CFO"}
    after = {"name": "Jane", "email": "new@x.example"}
    deltas = field_deltas({"primaryContact": before}, {"primaryContact": after})
    assert deltas["primaryContact"].sub_changes == [
        ("name", None, "Jane"),
        ("email", "old@x.example", "new@x.example"),
        ("phone", "+1", None),
        ("title", "CFO", None),
    ]


def test_a_missing_sub_field_is_a_null_one() -> None:
    deltas = field_deltas({"primaryContact": {"phone": None}}, {"primaryContact": {}})
    assert deltas["primaryContact"] == NO_DELTA


def test_text_fields_and_unchanged_sets_have_no_delta() -> None:
    deltas = field_deltas({"name": "A", "groups": ["b", "a"]}, {"name": "B", "groups": ["a", "b"]})
    assert deltas == {"groups": NO_DELTA}


def test_a_plan_record_shows_only_the_managed_sub_fields_that_change() -> None:
    server = {"name": "Jane", "email": "old@x.example", "phone": "+1"}
    desired = {"primaryContact": {"email": "new@x.example"}}
    patch = compare_invite(desired, {"primaryContact": server})
    change = InviteChange("inv_1", "a.yaml:2", None, {"primaryContact": server}, patch, False)
    (contact,) = change.field_changes
    assert contact.sub_changes() == [("email", "old@x.example", "new@x.example")]
    stuck = NotUpdatable("inv_1", "a.yaml:2", None, "accepted", {"groups": ["a"]}, {"groups": []})
    (groups,) = stuck.field_changes
    assert (groups.added, groups.removed) == ([], ["a"])
