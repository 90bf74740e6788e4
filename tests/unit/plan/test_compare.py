"""What counts as a change: one definition of equal, whatever else the invite holds."""

from __future__ import annotations

from typing import Any

from deepdiff import DeepDiff
from hypothesis import example, given, settings
from hypothesis import strategies as st

from reconciler.invite import canonical, values_equal
from reconciler.plan.changes import FieldChange
from reconciler.plan.compare import compare_invite, managed_part

FIELDS = ("name", "email", "phone", "primaryContact", "groups", "addOns", "attachments")
CONTACT = {"name": "Jane Doe", "email": "jane@acme.example", "phone": "+442079460001"}

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 3),
    st.sampled_from([0.0, -0.0, 1.0, 1.5, float("nan")]),
    st.sampled_from(["", "a", "b", "Ünïcødé", "1", "true"]),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(st.sampled_from(["name", "email", "phone"]), inner, max_size=3),
    ),
    max_leaves=8,
)
invites = st.dictionaries(st.sampled_from(FIELDS), values, max_size=len(FIELDS))


def test_a_bool_and_a_number_differ_alone_and_beside_another_change():
    alone = compare_invite({"name": True}, {"name": 1})
    beside = compare_invite(
        {"name": True, "email": "new@acme.example"}, {"name": 1, "email": "old@acme.example"}
    )
    assert alone == {"name": True}
    assert beside == {"name": True, "email": "new@acme.example"}


def test_an_integer_and_a_float_differ_but_nan_and_negative_zero_do_not():
    assert compare_invite({"name": 1.0}, {"name": 1}) == {"name": 1.0}
    assert compare_invite({"name": float("nan")}, {"name": float("nan")}) == {}
    assert compare_invite({"name": -0.0}, {"name": 0.0}) == {}
    assert compare_invite({"groups": [0.0]}, {"groups": [-0.0, 0.0]}) == {}


def test_set_fields_ignore_order_and_repeats_even_when_another_field_changes():
    current = {"groups": ["emea", "enterprise"], "email": "old@acme.example"}
    repeated = {"groups": ["enterprise", "emea", "emea"]}
    assert compare_invite(repeated, current) == {}
    changed_email = compare_invite({**repeated, "email": "new@acme.example"}, current)
    assert changed_email == {"email": "new@acme.example"}  # groups not sent along
    server_repeats = {"groups": ["emea", "emea", "enterprise"]}
    assert compare_invite({"groups": ["emea", "enterprise"]}, server_repeats) == {}


def test_a_set_field_change_sends_the_whole_desired_list():
    patch = compare_invite({"groups": ["vip", "emea"]}, {"groups": ["emea", "enterprise"]})
    assert patch == {"groups": ["vip", "emea"]}


def test_strange_server_lists_are_compared_without_crashing():
    mixed = [{"a": 1}, [1, "x"], None, 2, "b"]
    assert compare_invite({"groups": list(reversed(mixed))}, {"groups": mixed}) == {}
    assert compare_invite({"groups": ["b"]}, {"groups": mixed}) == {"groups": ["b"]}


def test_a_partial_contact_that_matches_is_no_change_whatever_its_unmanaged_phone():
    desired = {"primaryContact": {"name": "Jane Doe", "email": "jane@acme.example"}}
    assert compare_invite(desired, {"primaryContact": CONTACT}) == {}


def test_a_partial_contact_change_alone_keeps_the_servers_unmanaged_sub_fields():
    desired = {"primaryContact": {"email": "janet@acme.example"}}
    patch = compare_invite(desired, {"primaryContact": CONTACT, "name": "Acme"})
    assert patch == {"primaryContact": {**CONTACT, "email": "janet@acme.example"}}


def test_a_contact_where_the_server_has_none_is_sent_as_written():
    desired = {"primaryContact": {"name": "Jane Doe"}}
    assert compare_invite(desired, {"primaryContact": None}) == desired
    assert compare_invite(desired, {}) == desired


def test_fields_the_files_do_not_manage_are_never_compared():
    assert compare_invite({"email": "a@x.example"}, {"email": "a@x.example", "name": "Z"}) == {}


@settings(max_examples=100, deadline=None)
@given(desired=invites, current=invites)
@example(desired={"name": True, "email": "a"}, current={"name": 1, "email": "b"})
def test_a_fields_patch_never_depends_on_the_other_fields(desired, current):
    whole = compare_invite(desired, current)
    for field in desired:
        alone = compare_invite({field: desired[field]}, {field: current.get(field)})
        assert repr(whole.get(field, "unchanged")) == repr(alone.get(field, "unchanged"))
    assert set(whole) <= set(desired)


@settings(max_examples=100, deadline=None)
@given(field=st.sampled_from(FIELDS), want=values, have=values)
def test_the_quick_check_and_deepdiff_agree_on_every_value(field, want, have):
    held = managed_part(field, want, have)
    same = values_equal(field, want, held)
    deep = DeepDiff(canonical(field, held), canonical(field, want))
    assert same == (not deep)
    assert same == (field not in compare_invite({field: want}, {field: have}))


@given(value=values)
def test_every_value_equals_itself(value: Any):
    for field in FIELDS:
        assert compare_invite({field: value}, {field: value}) == {}


# From test_contact_and_group_comparison.py:
# Changes a reviewer expects to see in a plan, and the ones that are not changes.
#
# Each case is something a user would notice: a contact's new email left out of the
# plan, a saved plan refused because the server listed the same groups in another
# order, or two different numbers taken for one.
CONTACT = {"name": "Jane Doe", "email": "jane@acme.example", "phone": "+442079460001"}


def test_a_contact_whose_email_alone_changed_is_a_change():
    # The schema makes a contact carry both a name and an email; only the email moved.
    desired = {"primaryContact": {"name": "Jane Doe", "email": "janet@acme.example"}}

    patch = compare_invite(desired, {"primaryContact": CONTACT})

    assert patch == {"primaryContact": {**CONTACT, "email": "janet@acme.example"}}


def test_a_contact_whose_name_alone_changed_is_a_change():
    desired = {"primaryContact": {"name": "Janet Doe", "email": "jane@acme.example"}}

    patch = compare_invite(desired, {"primaryContact": CONTACT})

    assert patch == {"primaryContact": {**CONTACT, "name": "Janet Doe"}}


def test_groups_the_server_lists_in_another_order_are_still_the_planned_groups():
    # A saved plan is checked against the server with this before it is applied.
    assert values_equal("groups", ["emea", "vip"], ["vip", "emea", "vip"])
    assert values_equal("groups", ["vip", "emea", "vip"], ["emea", "vip"])
    assert values_equal("addOns", ["kyc", "aml"], ["aml", "kyc"])
    assert not values_equal("groups", ["emea", "vip"], ["emea"])


def test_a_text_field_is_not_compared_as_a_set():
    assert not values_equal("name", ["a", "b"], ["b", "a"])
    assert compare_invite({"name": ["a"]}, {"name": ["b"]}) == {"name": ["a"]}


def test_objects_the_server_lists_in_a_group_count_once_whatever_their_key_order():
    first = {"kind": "x", "code": "x"}
    same_reordered = {"code": "x", "kind": "x"}
    other = {"kind": "x", "code": "y"}

    assert compare_invite({"groups": [first]}, {"groups": [same_reordered, first]}) == {}
    assert values_equal("groups", [first, other], [other, same_reordered])
    assert not values_equal("groups", [first], [other])


def test_only_the_contact_is_compared_by_the_sub_fields_the_files_name():
    desired = {"name": {"short": "Acme"}}
    current = {"name": {"short": "Acme", "legal": "Acme Ltd"}}

    assert compare_invite(desired, current) == desired


def test_different_numbers_are_never_the_same_value():
    assert compare_invite({"name": 1.5}, {"name": 2.5}) == {"name": 1.5}
    # Tiny values that adding 1.0 would round together.
    assert compare_invite({"name": 2e-20}, {"name": 1e-20}) == {"name": 2e-20}
    assert not values_equal("groups", [0.5], [0.25])


def test_a_plan_shows_each_part_of_a_contact_or_group_the_server_did_not_have():
    contact = FieldChange("primaryContact", None, {"name": "Jane Doe", "email": "j@a.example"})
    assert contact.sub_changes() == [("name", None, "Jane Doe"), ("email", None, "j@a.example")]
    groups = FieldChange("groups", None, ["emea", "enterprise"])
    assert (groups.added, groups.removed) == (["emea", "enterprise"], [])
    cleared = FieldChange("groups", ["emea"], None)
    assert (cleared.added, cleared.removed) == ([], ["emea"])
