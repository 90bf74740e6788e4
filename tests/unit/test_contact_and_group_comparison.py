"""Changes a reviewer expects to see in a plan, and the ones that are not changes.

Each case is something a user would notice: a contact's new email left out of the
plan, a saved plan refused because the server listed the same groups in another
order, or two different numbers taken for one.
"""

from __future__ import annotations

from reconciler.invite import values_equal
from reconciler.plan.changes import FieldChange
from reconciler.plan.compare import compare_invite

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
