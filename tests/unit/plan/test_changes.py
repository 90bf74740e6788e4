"""The records a plan is made of: what an output shows of a change's kept sub-fields, and
what every output shows of a change redacted."""

from __future__ import annotations

from support.values import held, typed

from reconciler.model.invite import SourceLocation
from reconciler.plan.changes import InviteChange
from reconciler.safetext import register_secret

CONTACT = {"name": "Ann", "email": "ann@x.example", "phone": "+15550000000"}


def _change(**extra: object) -> InviteChange:
    return InviteChange(
        "inv_1",
        SourceLocation("invites/a.yaml", 3),
        None,
        held({"primaryContact": CONTACT, "name": "A"}),
        typed({"primaryContact": {**CONTACT, "name": "Ann Q."}, "name": "B"}),
        False,
        **extra,  # type: ignore[arg-type]
    )


def test_the_kept_values_are_the_sub_fields_a_contacts_patch_carries_from_the_platform():
    change = _change(kept={"primaryContact": ("phone",)})
    assert change.kept_values("primaryContact") == [("phone", "+15550000000")]
    assert change.kept_values("name") == []  # text keeps nothing
    assert _change().kept_values("primaryContact") == []


def test_a_kept_sub_field_named_after_a_secret_is_shown_redacted():
    secret = "changes-echoed-secret-31"
    register_secret(secret)
    change = _change(kept={"primaryContact": (f"x-{secret}",)}, recipient=f"{secret}@x.example")
    shown = change.redacted()
    assert shown.kept == {"primaryContact": ("x-[redacted]",)}
    assert shown.recipient == "[redacted]@x.example"
