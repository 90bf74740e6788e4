"""What counts as a change: one definition of equal, whatever else the invite holds.

Values that are not text, lists of text or objects of text never reach a compare: the
files' are refused by the schema, the server's on reading (tests/unit/model/test_kinds.py).
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from support.values import held, typed

from reconciler.model.fields import kind_of
from reconciler.model.values import Contact, IdentifierSet
from reconciler.plan.changes import FieldChange
from reconciler.plan.compare import compare_invite

FIELDS = ("name", "email", "phone", "primaryContact", "groups", "addOns", "attachments")
CONTACT = {"name": "Jane Doe", "email": "jane@acme.example", "phone": "+442079460001"}

texts = st.sampled_from(["", "a", "b", "Ünïcødé", "Ünïcødé", "1", "true"])
contacts = st.dictionaries(st.sampled_from(["name", "email", "phone"]), texts, max_size=3).map(
    Contact
)
sets = st.lists(texts, max_size=4).map(IdentifierSet)


def values_of(field: str) -> st.SearchStrategy[Any]:
    if field == "primaryContact":
        return contacts
    if field in ("groups", "addOns", "attachments"):
        return sets
    return texts


invites = st.fixed_dictionaries({}, optional={field: values_of(field) for field in FIELDS})


def equal(field: str, a: Any, b: Any) -> bool:
    return kind_of(field).equal(held({field: a})[field], held({field: b})[field])


def test_set_fields_ignore_order_and_repeats_even_when_another_field_changes():
    current = typed({"groups": ["emea", "enterprise"], "email": "old@acme.example"})
    repeated = typed({"groups": ["enterprise", "emea", "emea"]})
    assert compare_invite(repeated, current) == {}
    changed_email = compare_invite({**repeated, "email": "new@acme.example"}, current)
    assert changed_email == {"email": "new@acme.example"}  # groups not sent along
    server_repeats = typed({"groups": ["emea", "emea", "enterprise"]})
    assert compare_invite(typed({"groups": ["emea", "enterprise"]}), server_repeats) == {}


def test_a_set_field_change_sends_the_whole_desired_list():
    patch = compare_invite(
        typed({"groups": ["vip", "emea"]}), typed({"groups": ["emea", "enterprise"]})
    )
    assert patch == {"groups": ["vip", "emea"]}


def test_a_partial_contact_that_matches_is_no_change_whatever_its_unmanaged_phone():
    desired = typed({"primaryContact": {"name": "Jane Doe", "email": "jane@acme.example"}})
    assert compare_invite(desired, typed({"primaryContact": CONTACT})) == {}


def test_a_partial_contact_change_alone_keeps_the_servers_unmanaged_sub_fields():
    desired = typed({"primaryContact": {"email": "janet@acme.example"}})
    patch = compare_invite(desired, typed({"primaryContact": CONTACT, "name": "Acme"}))
    assert patch == {"primaryContact": {**CONTACT, "email": "janet@acme.example"}}


def test_a_contact_where_the_server_has_none_is_sent_as_written():
    desired = typed({"primaryContact": {"name": "Jane Doe"}})
    assert compare_invite(desired, {}) == desired


def test_fields_the_files_do_not_manage_are_never_compared():
    desired = typed({"email": "a@x.example"})
    assert compare_invite(desired, typed({"email": "a@x.example", "name": "Z"})) == {}


@settings(max_examples=100, deadline=None)
@given(desired=invites, current=invites)
def test_a_fields_patch_never_depends_on_the_other_fields(desired, current):
    whole = compare_invite(desired, current)
    for field in desired:
        alone = compare_invite(
            {field: desired[field]}, {f: current[f] for f in [field] if f in current}
        )
        assert repr(whole.get(field, "unchanged")) == repr(alone.get(field, "unchanged"))
    assert set(whole) <= set(desired)


@settings(max_examples=100, deadline=None)
@given(desired=invites, current=invites)
def test_a_field_is_patched_exactly_when_its_kind_says_it_differs(desired, current):
    patch = compare_invite(desired, current)
    for field, want in desired.items():
        kind = kind_of(field)
        same = kind.equal(want, kind.managed(want, current.get(field)))
        assert same == (field not in patch)


@given(value=invites)
def test_every_value_equals_itself(value: Any):
    assert compare_invite(value, value) == {}


# From test_contact_and_group_comparison.py:
# Changes a reviewer expects to see in a plan, and the ones that are not changes.
#
# Each case is something a user would notice: a contact's new email left out of the
# plan, a saved plan refused because the server listed the same groups in another
# order, or two different numbers taken for one.


def test_a_contact_whose_email_alone_changed_is_a_change():
    # The schema makes a contact carry both a name and an email; only the email moved.
    desired = typed({"primaryContact": {"name": "Jane Doe", "email": "janet@acme.example"}})

    patch = compare_invite(desired, typed({"primaryContact": CONTACT}))

    assert patch == {"primaryContact": {**CONTACT, "email": "janet@acme.example"}}


def test_a_contact_whose_name_alone_changed_is_a_change():
    desired = typed({"primaryContact": {"name": "Janet Doe", "email": "jane@acme.example"}})

    patch = compare_invite(desired, typed({"primaryContact": CONTACT}))

    assert patch == {"primaryContact": {**CONTACT, "name": "Janet Doe"}}


def test_groups_the_server_lists_in_another_order_are_still_the_planned_groups():
    # A saved plan is checked against the server with this before it is applied.
    assert equal("groups", ["emea", "vip"], ["vip", "emea", "vip"])
    assert equal("groups", ["vip", "emea", "vip"], ["emea", "vip"])
    assert equal("addOns", ["kyc", "aml"], ["aml", "kyc"])
    assert not equal("groups", ["emea", "vip"], ["emea"])


def test_a_plan_shows_each_part_of_a_contact_or_group_the_server_did_not_have():
    contact = FieldChange(
        "primaryContact", None, Contact({"name": "Jane Doe", "email": "j@a.example"})
    )
    assert contact.sub_changes() == [("name", None, "Jane Doe"), ("email", None, "j@a.example")]
    groups = FieldChange("groups", None, IdentifierSet(["emea", "enterprise"]))
    assert (groups.added, groups.removed) == (["emea", "enterprise"], [])
    cleared = FieldChange("groups", IdentifierSet(["emea"]), IdentifierSet())
    assert (cleared.added, cleared.removed) == ([], ["emea"])
