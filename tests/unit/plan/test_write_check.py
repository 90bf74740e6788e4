"""What a fresh copy means for a change, before its write and after it: pure, by kinds."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from support.values import held, typed

from reconciler.model.invite import CurrentInvite, SourceLocation, fields_from_json
from reconciler.plan.model import InviteChange
from reconciler.plan.write_check import AlreadyApplied, Moved, Write, before_write, stored_as_sent

CONTACT = {"name": "José", "email": "jose@a.example", "phone": "+5215500000000"}


def change(before: dict[str, Any], patch: dict[str, Any], **extra: Any) -> InviteChange:
    return InviteChange(
        "inv_1", SourceLocation("a.yaml", 3), None, held(before), typed(patch), True, **extra
    )


def now(**fields: Any) -> CurrentInvite:
    return CurrentInvite("inv_1", "pending", fields_from_json(fields))


def test_each_field_is_to_write_already_so_or_moved() -> None:
    planned = change(
        {"name": "A", "email": "a@x.example", "groups": ["g1"]},
        {"name": "B", "email": "b@x.example", "groups": ["g2", "g3"]},
    )
    # The set already wanted, in another order: left out; the rest still as planned.
    decided = before_write(planned, now(name="A", email="a@x.example", groups=["g3", "g2"]))
    assert isinstance(decided, Write)
    assert set(decided.change.patch) == {"name", "email"}
    # Someone else made it: whether they e-mailed the business is unknown, so it is owed.
    assert before_write(planned, now(name="B", email="b@x.example", groups=["g2", "g3"])) == (
        AlreadyApplied(resend_owed=True)
    )
    unsent = replace(planned, resend=False)
    assert before_write(unsent, now(name="B", email="b@x.example", groups=["g2", "g3"])) == (
        AlreadyApplied(resend_owed=False)
    )
    moved = before_write(planned, now(name="C", email="a@x.example", groups=["g1"]))
    assert isinstance(moved, Moved)
    assert [(m.field, m.planned, m.now, m.wanted) for m in moved.fields] == [
        ("name", "A", "C", "B")
    ]


def test_text_in_another_normal_form_has_not_moved() -> None:
    planned = change({"name": "Cafe\u0301"}, {"name": "Bar"})
    assert isinstance(before_write(planned, now(name="Caf\u00e9")), Write)


def test_a_kept_sub_field_that_moved_makes_the_contact_a_conflict() -> None:
    wanted = {**CONTACT, "name": "María", "email": "maria@a.example"}
    planned = change(
        {"primaryContact": CONTACT}, {"primaryContact": wanted}, kept={"primaryContact": ("phone",)}
    )
    decided = before_write(planned, now(primaryContact={**CONTACT, "phone": "+5215511111111"}))
    assert isinstance(decided, Moved)


def test_stored_as_sent_tells_managed_parts_from_kept_ones() -> None:
    sent = {**CONTACT, "name": "María"}
    written = change(
        {"primaryContact": CONTACT, "email": "a@x.example"},
        {"primaryContact": sent, "email": "Compliance@Acme.example"},
        kept={"primaryContact": ("phone",)},
    )
    stored = now(
        primaryContact={**sent, "phone": "+52 1 55 0000 0000"}, email="compliance@acme.example"
    )
    check = stored_as_sent(written, stored)
    assert check.as_sent == ("primaryContact",)
    assert [(d.field, d.sent, d.stored) for d in check.diverged] == [
        ("email", "Compliance@Acme.example", "compliance@acme.example")
    ]
    assert [(n.field, n.sent, n.stored) for n in check.noted] == [
        ("primaryContact.phone", "+5215500000000", "+52 1 55 0000 0000")
    ]


def test_only_fields_stored_as_sent_trigger_a_re_send() -> None:
    listed = change({"email": "a@x.example"}, {"email": "b@x.example"}, resend_on=("email",))
    assert not listed.triggers_resend(["name"])
    assert listed.triggers_resend(["email"])
    anything = change({"email": "a@x.example"}, {"email": "b@x.example"})
    assert anything.triggers_resend(["name"]) and not anything.triggers_resend([])


def test_a_re_send_whose_field_someone_else_wrote_is_owed_not_due() -> None:
    planned = change(
        {"name": "A", "email": "a@x.example"},
        {"name": "B", "email": "b@x.example"},
        resend_on=("email",),
    )
    decided = before_write(planned, now(name="A", email="b@x.example"))
    assert isinstance(decided, Write)
    assert set(decided.change.patch) == {"name"} and not decided.change.resend
    assert decided.resend_owed
    # The name alone was written by someone else: the e-mail still follows this write.
    decided = before_write(planned, now(name="B", email="a@x.example"))
    assert isinstance(decided, Write)
    assert decided.change.resend and not decided.resend_owed


def test_a_field_stored_otherwise_changed_or_kept_as_it_was() -> None:
    written = change(
        {"email": "old@x.example", "name": "A"}, {"email": "New@X.example", "name": "B"}
    )
    # Lower-cased: the address changed all the same. Ignored: the platform kept the old one.
    lowered = stored_as_sent(written, now(email="new@x.example", name="B"))
    assert (lowered.as_sent, lowered.changed_otherwise) == (("name",), ("email",))
    ignored = stored_as_sent(written, now(email="old@x.example", name="A"))
    assert (ignored.as_sent, ignored.changed_otherwise) == ((), ())
    assert [d.field for d in ignored.diverged] == ["email", "name"]


def test_a_contact_stored_otherwise_names_each_sub_field_as_sent_and_as_stored() -> None:
    sent = {**CONTACT, "email": "Jose@A.example"}
    written = change({"primaryContact": CONTACT}, {"primaryContact": sent})
    check = stored_as_sent(written, now(primaryContact=CONTACT))
    assert check.as_sent == ()
    assert [(d.field, d.sent, d.stored) for d in check.diverged] == [
        ("primaryContact.email", "Jose@A.example", "jose@a.example")
    ]
    # The platform dropped the contact: every sub-field sent, none stored.
    dropped = stored_as_sent(written, now())
    assert [(d.field, d.sent, d.stored) for d in dropped.diverged] == [
        ("primaryContact.name", "José", None),
        ("primaryContact.email", "Jose@A.example", None),
        ("primaryContact.phone", "+5215500000000", None),
    ]


def test_a_write_of_part_of_a_change_carries_only_that_parts_before_and_kept() -> None:
    wanted = {**CONTACT, "name": "María"}
    planned = change(
        {"name": "A", "email": "a@x.example", "primaryContact": CONTACT},
        {"name": "B", "email": "b@x.example", "primaryContact": wanted},
        kept={"primaryContact": ("phone",)},
        resend_on=("email",),
    )
    # The name is already so; the e-mail and the contact are still to write.
    decided = before_write(planned, now(name="B", email="a@x.example", primaryContact=CONTACT))
    assert isinstance(decided, Write)
    assert decided.change.before == held({"email": "a@x.example", "primaryContact": CONTACT})
    assert decided.change.kept == {"primaryContact": ("phone",)}
    assert decided.change.resend is True  # the e-mail, which re-sends it, is still to write
    # The contact is already so: what it kept from the platform goes with it.
    decided = before_write(planned, now(name="A", email="a@x.example", primaryContact=wanted))
    assert isinstance(decided, Write)
    assert (decided.change.before, decided.change.kept) == (
        {"name": "A", "email": "a@x.example"},
        {},
    )
