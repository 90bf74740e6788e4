"""The Plan record: max_changes and max_resends, its records and hash, the saved document
(scoped or not).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from support.plans import BASE, changed, current, desired, of_change
from support.values import held, typed

from reconciler.errors import ReconcilerError
from reconciler.model.invite import DesiredInvite, Done, SourceLocation
from reconciler.plan.make import make_plan
from reconciler.plan.model import (
    InviteChange,
    Plan,
    TooManyResends,
    TooMuchChange,
)
from reconciler.plan.saved import plan_chunks, plan_digest, plan_from_document
from reconciler.safetext import register_secret


def saved_document(plan: Plan) -> dict[str, Any]:
    """The plan as `plan --out` writes it, parsed."""
    return json.loads("".join(plan_chunks(plan)))


def _plan_with(changes: int, max_changes: int | None = None) -> Plan:
    return make_plan(BASE, [(desired(i), Done(current(i))) for i in range(changes)], max_changes)


def test_the_audit_logs_plan_hash_changes_with_anything_the_plan_would_write():
    # Audit lines carry the hash so a write can be traced to the plan that made it.
    def hash_of(base: str = BASE, **change: Any) -> str:
        fields: dict[str, Any] = {
            "before": {"email": "o@x"},
            "patch": {"email": "n@x"},
            "resend": False,
        }
        fields |= change
        fields["before"], fields["patch"] = held(fields["before"]), typed(fields["patch"])
        record = InviteChange("inv_a", SourceLocation("a.yaml", 2), "Acme", **fields)
        return plan_digest(Plan(base, [record], [], 0))

    same = hash_of()
    assert same.startswith("sha256:") and len(same) == len("sha256:") + 64
    assert hash_of() == same
    different = [
        hash_of(base="https://api.other.example"),
        hash_of(patch={"email": "other@x"}),
        hash_of(before={"email": "older@x"}),
        hash_of(resend=True),
        hash_of(patch={"email": "n@x", "groups": ["emea"]}, before={"email": "o@x", "groups": []}),
    ]
    assert len({same, *different}) == 1 + len(different)


def test_the_plan_hash_does_not_depend_on_the_order_fields_were_read_in():
    source = SourceLocation("a.yaml", 2)
    one = InviteChange(
        "inv_a", source, "A", {"email": "o", "name": "p"}, {"email": "n", "name": "q"}, False
    )
    other = InviteChange(
        "inv_a", source, "A", {"name": "p", "email": "o"}, {"name": "q", "email": "n"}, False
    )
    assert plan_digest(Plan(BASE, [one], [], 0)) == plan_digest(Plan(BASE, [other], [], 0))


SPLIT = "Split the change or raise the limit."
NEW_PLAN = "This plan was made with --max-changes 2; make a new plan with a higher limit."
MORE = "the plan updates {} more than max_changes ({}). {}"


def plan_of(count: int, max_changes: int | None, *, saved: bool = False) -> Plan:
    source = SourceLocation("invites/a.yaml", 2)
    changes = [
        InviteChange(f"inv_{n}", source, None, {"name": "A"}, {"name": "B"}, False)
        for n in range(count)
    ]
    return Plan(base_url=BASE, changes=changes, max_changes=max_changes, saved=saved)


# A saved plan carries the limit it was reviewed under; telling its user to "raise the
# limit" on apply would be advice that cannot work.
LIMITS = {  # invites, the plan's max_changes, saved, the run's limit, the refusal
    "exactly-the-limit": (3, 3, False, None, None),
    "no-limit": (5, None, False, None, None),
    "one-more-than-the-plans-limit": (4, 3, False, None, MORE.format("4 invites,", 3, SPLIT)),
    "the-runs-limit-alone": (3, None, False, 1, MORE.format("3 invites,", 1, SPLIT)),
    "one-invite-in-english": (1, None, False, 0, MORE.format("1 invite,", 0, SPLIT)),
    "a-stricter-run-limit-applies": (2, 5, False, 1, MORE.format("2 invites,", 1, SPLIT)),
    "a-looser-run-limit": (2, 5, False, 10, None),
    "saved-within-its-limits": (2, 2, True, 2, None),
    "saved-over-its-own-limit": (3, 2, True, None, MORE.format("3 invites,", 2, NEW_PLAN)),
    "saved-with-an-equal-run-limit": (3, 2, True, 2, MORE.format("3 invites,", 2, NEW_PLAN)),
    "saved-with-a-looser-run-limit": (3, 2, True, 5, MORE.format("3 invites,", 2, NEW_PLAN)),
    "saved-with-a-stricter-run-limit": (3, 5, True, 2, MORE.format("3 invites,", 2, SPLIT)),
}


@pytest.mark.parametrize(
    ("count", "max_changes", "saved", "limit", "reason"), LIMITS.values(), ids=LIMITS
)
def test_max_changes_refuses_past_the_strictest_limit_with_advice_that_works(
    count, max_changes, saved, limit, reason
):
    plan = plan_of(count, max_changes, saved=saved)
    if reason is None:
        plan.raise_if_unsafe(limit)
        return
    with pytest.raises(TooMuchChange) as raised:
        plan.raise_if_unsafe(limit)
    assert raised.value.reason == reason
    assert str(raised.value) == f"refusing to apply, nothing was changed: {reason}"
    assert isinstance(raised.value, ReconcilerError)  # the CLI's exit 1, no traceback
    assert plan.max_changes == max_changes  # not rewritten by the check


def test_a_plan_keeps_its_max_changes_and_reads_back_as_saved():
    assert _plan_with(1).too_much_change(None) is None
    refusal = _plan_with(1, max_changes=0).too_much_change()
    assert refusal is not None and "1 invite," in refusal.reason
    assert str(TooMuchChange(3, 2)).endswith(SPLIT)
    saved = plan_from_document(saved_document(_plan_with(4, max_changes=3)), "plan.json")
    assert saved.format_version == 2
    with pytest.raises(TooMuchChange, match=r"This plan was made with --max-changes 3; make"):
        saved.raise_if_unsafe()


# From test_untrusted_inputs.py: What an attacker found after the rebuild: each stays fixed.
def test_a_plan_never_holds_a_secret_the_server_put_in_an_invite(registered_secret: str) -> None:
    change = InviteChange(
        "inv_1",
        SourceLocation("invites/a.yaml", 3),
        "Acme",
        {"name": registered_secret},
        {"name": "Acme"},
        False,
    )
    plan = Plan(base_url="https://api.example", changes=[change])
    saved = json.dumps(saved_document(plan))
    assert registered_secret not in saved and "[redacted]" in saved


# --- plans scoped to a change (--changed-since REF) ------------------------------------------


def test_a_scoped_plan_document_says_its_scope_and_reads_back():
    wanted = desired(1, email="new@x.example")
    entries = {"inv_0001": changed({"email"}, {"email": "old@x.example"})}
    plan = of_change((wanted, current(1, email="ui@x.example")), entries=entries)
    document = saved_document(plan)
    assert document["changed_since"] == "main" and document["not_read"] == 7
    assert document["summary"]["conflict"] == 1 and document["summary"]["not_read"] == 7
    again = plan_from_document(json.loads(json.dumps(document)), "plan.json")
    assert again.changes[0].conflicts == {"email": "old@x.example"}
    assert (again.changed_since, again.not_read) == ("main", 7)


def test_a_plan_not_scoped_keeps_its_document_as_it_was():
    document = saved_document(make_plan(BASE, [(desired(1), Done(current(1)))]))
    assert "changed_since" not in document and "conflicts" not in document["changes"][0]
    assert set(document["summary"]) == {"update", "unchanged", "error", "resend", "conflict"}


def _resending(
    count: int, max_resends: int | None = None, rule: bool | tuple[str, ...] = True
) -> Plan:
    readings = [(desired(i), Done(current(i))) for i in range(count)]
    readings = [(DesiredInvite(d.id, d.fields, d.source, rule), outcome) for d, outcome in readings]
    return make_plan(BASE, readings, None, max_resends)


def test_max_resends_advises_the_list_form_only_where_an_entry_has_true() -> None:
    # `resendOnChange: [email]` already is the list form: advising it cannot help.
    with pytest.raises(TooManyResends) as raised:
        _resending(3, max_resends=2, rule=("email",)).raise_if_unsafe()
    assert str(raised.value).endswith(
        "more than max_resends (2). Split the change or raise the limit."
    )


def test_max_resends_allows_exactly_the_limit_and_refuses_one_more():
    _resending(2, max_resends=2).raise_if_unsafe()
    with pytest.raises(TooManyResends) as raised:
        _resending(3, max_resends=2).raise_if_unsafe()
    assert str(raised.value) == (
        "refusing to apply, nothing was changed: the plan e-mails 3 invitations again, more "
        "than max_resends (2). Split the change, use resendOnChange's list form, or raise "
        "the limit."
    )
    # Field changes that send no e-mail do not count against it.
    _plan_with(5).raise_if_unsafe(None, 0)
    with pytest.raises(TooManyResends, match=r"max_resends \(0\)"):
        _resending(1).raise_if_unsafe(None, 0)


def test_a_saved_plan_keeps_its_max_resends_and_a_run_may_only_tighten_it():
    saved = plan_from_document(saved_document(_resending(2, max_resends=2)), "plan.json")
    assert saved.max_resends == 2
    saved.raise_if_unsafe(None, 5)
    with pytest.raises(TooManyResends, match=r"max_resends \(1\)\. Split"):
        saved.raise_if_unsafe(None, 1)
    older = saved_document(_resending(2, max_resends=1))
    with pytest.raises(TooManyResends, match="made with --max-resends 1"):
        plan_from_document(older, "plan.json").raise_if_unsafe()
    # A plan saved before max_resends existed reads as having none.
    del older["max_resends"]
    assert plan_from_document(older, "plan.json").max_resends is None


def test_a_change_saved_before_plans_named_the_recipient_reads_back_with_the_new_address():
    document = saved_document(_resending(1))
    (record,) = document["changes"]
    del record["recipient"]
    (change,) = plan_from_document(document, "plan.json").changes
    assert change.recipient == record["patch"]["email"]
    record["patch"] = record["after"] = {"name": "B"}
    record["before"] = {"name": "A"}
    (change,) = plan_from_document(document, "plan.json").changes
    assert change.recipient is None


# -- from test_changes.py -----------------------------------------------------------------
# The records a plan is made of: what an output shows of a change's kept sub-fields, and
# what every output shows of a change redacted.


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
