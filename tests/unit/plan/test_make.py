"""Making a plan from what a run read: changes, errors, invites set apart, re-sends' recipients,
plans scoped to a change.
"""

from __future__ import annotations

import gc
import json
import subprocess
import sys
import weakref
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.helpers import EXAMPLES, clean_env
from support.plans import BASE, changed, current, desired, of_change
from support.values import typed

from reconciler.api.exceptions import (
    ApiError,
    AuthenticationFailed,
    Conflict,
    InvalidRequest,
    NotFound,
    PermissionDenied,
    RateLimited,
    ServerError,
    TransportError,
)
from reconciler.errors import ReconcilerError
from reconciler.model.invite import (
    Contact,
    CurrentInvite,
    DesiredInvite,
    Done,
    Failed,
    IdentifierSet,
    NotRun,
    Outcome,
    SourceLocation,
    kind_of,
)
from reconciler.output import NOT_UPDATABLE_FIX, resend_note
from reconciler.plan.make import Reading, compare_invite, make_plan
from reconciler.plan.saved import plan_chunks
from reconciler.safetext import register_secret


def saved_document(plan: Any) -> dict[str, Any]:
    """The plan as `plan --out` writes it, parsed."""
    return json.loads("".join(plan_chunks(plan)))


def test_changes_unchanged_and_per_invite_errors_are_all_kept():
    readings: list[Reading] = [
        (desired(1), Done(current(1))),
        (desired(2, email="same@x.example"), Done(current(2, email="same@x.example"))),
        (desired(3), Failed(NotFound("invite inv_0003 not found", status=404))),
        (desired(4), Failed(Conflict("invite is not pending", status=409))),
        (desired(5), Failed(InvalidRequest("bad id", status=400, request_id="r5"))),
    ]
    plan = make_plan(BASE, readings)
    assert [(c.id, c.before, c.patch) for c in plan.changes] == [
        ("inv_0001", {"email": "old1@x.example"}, {"email": "new1@x.example"})
    ]
    assert plan.unchanged == 1
    assert [(e.id, e.status, str(e.source)) for e in plan.failed] == [
        ("inv_0003", 404, "invites/a.yaml:32"),
        ("inv_0004", 409, "invites/a.yaml:42"),
        ("inv_0005", 400, "invites/a.yaml:52"),
    ]
    assert plan.failed[2].request_id == "r5"


@pytest.mark.parametrize(
    "error",
    [
        AuthenticationFailed("token expired", status=401),
        PermissionDenied("missing scope kyb:invites:read", status=403),
        ServerError("bad gateway", status=502),
        RateLimited("slow down", status=429),
        TransportError("connection refused", maybe_sent=False),
    ],
    ids=["401", "403", "5xx", "429", "transport"],
)
def test_an_error_that_would_repeat_for_every_invite_stops_the_run_at_once(error: ApiError):
    consumed = []

    def readings() -> Iterator[tuple[DesiredInvite, Outcome[CurrentInvite, ApiError]]]:
        for index in range(500):
            consumed.append(index)
            yield desired(index), Failed(error)

    with pytest.raises(ReconcilerError) as raised:
        make_plan(BASE, readings())
    assert str(raised.value).startswith("stopped reading invites:")
    assert str(error) in str(raised.value)
    assert consumed == [0]  # one error, not 500


def test_a_secret_a_server_echoes_never_reaches_the_plan():
    register_secret("plan-model-secret-7f3a")
    register_secret("eyJ.abc.def")  # a token issued in this run
    error = InvalidRequest("client plan-model-secret-7f3a sent Bearer eyJ.abc.def", status=400)
    (problem,) = make_plan(BASE, [(desired(1), Failed(error))]).failed
    assert "plan-model-secret-7f3a" not in problem.message and "eyJ.abc" not in problem.message
    assert problem.message == "HTTP 400: client [redacted] sent Bearer [redacted]"


def test_an_interrupted_read_stops_the_plan():
    with pytest.raises(ReconcilerError) as stopped:
        make_plan(BASE, [(desired(1), NotRun())])
    assert str(stopped.value) == "interrupted while reading invites; nothing was changed"


def test_an_accepted_invite_that_differs_is_set_apart_never_changed():
    contact = {"name": "Jane", "email": "j@x.example", "phone": "+1"}
    readings = [
        (
            desired(1, email="new@x.example", primaryContact={"name": "Janet"}),
            Done(current(1, "accepted", email="old@x.example", primaryContact=contact, name="Z")),
        ),
        (desired(2, email="same@x.example"), Done(current(2, "accepted", email="same@x.example"))),
        (desired(3), Done(current(3, None))),
    ]
    plan = make_plan(BASE, readings)
    assert plan.failed == [] and plan.unchanged == 1
    # No status at all: planned as pending (issue 37), never set apart as not updatable.
    assert [change.id for change in plan.changes] == ["inv_0003"]
    (first,) = plan.not_updatable
    assert (first.id, first.status, str(first.source)) == (
        "inv_0001",
        "accepted",
        "invites/a.yaml:12",
    )
    # Only what differs, and only the managed part of the contact.
    assert first.before == {"email": "old@x.example", "primaryContact": {"name": "Jane"}}
    assert first.after == {"email": "new@x.example", "primaryContact": {"name": "Janet"}}
    assert NOT_UPDATABLE_FIX.format(source=first.source, invite_id=first.id) == (
        "remove it from invites/a.yaml:12, or bring the file in line with "
        "`reconcile export inv_0001`"
    )


def test_the_plan_keeps_no_server_copy_once_compared():
    copies: list[weakref.ref[CurrentInvite]] = []

    def readings() -> Iterator[tuple[DesiredInvite, Outcome[CurrentInvite, ApiError]]]:
        for index in range(200):
            invite = current(index, email=f"{'new' if index % 10 else 'old'}{index}@x.example")
            copies.append(weakref.ref(invite))
            yield desired(index), Done(invite)

    plan = make_plan(BASE, readings())
    gc.collect()
    assert len(plan.changes) == 20 and plan.unchanged == 180
    assert [ref for ref in copies if ref() is not None] == []


def _with_rule(rule: Any, **wanted: Any) -> DesiredInvite:
    return DesiredInvite("inv_0000", typed(wanted), SourceLocation("invites/a.yaml", 2), rule)


def test_a_list_rule_re_sends_only_for_a_listed_field_and_names_the_recipient():
    server = current(0, email="old@x.example", groups=["a"])
    groups_only = make_plan(BASE, [(_with_rule(("email",), groups=["b"]), Done(server))])
    assert [c.resend for c in groups_only.changes] == [False]
    assert groups_only.summary.resend == 0
    email = make_plan(BASE, [(_with_rule(("email",), email="new@x.example"), Done(server))])
    (change,) = email.changes
    assert change.resend and change.recipient == "new@x.example"
    # The list goes with the change: apply re-sends only if the e-mail is stored as sent.
    assert change.resend_on == ("email",)
    assert not change.triggers_resend(["groups"]) and change.triggers_resend(["email"])
    assert resend_note(change, str) == "e-mails the invitation again to new@x.example"
    # Without the address changing, the invitation goes to the one the server holds.
    anything = make_plan(BASE, [(_with_rule(True, groups=["b"]), Done(server))])
    assert anything.changes[0].recipient == "old@x.example"
    assert saved_document(anything)["summary"]["resend"] == 1


# --- plans scoped to a change (--changed-since REF) ------------------------------------------


def test_a_scoped_plan_tells_a_change_from_a_conflict_from_drift_outside_it():
    wanted = desired(1, email="new@x.example", name="Files Ltd")
    at_ref = {"email": "old@x.example", "name": "Files Ltd"}
    entries = {"inv_0001": changed({"email"}, at_ref)}
    # The platform holds REF's e-mail: a change; its name differs: drift outside the change.
    plan = of_change((wanted, current(1, email="old@x.example", name="UI Ltd")), entries=entries)
    (change,) = plan.changes
    assert (change.patch, change.conflicts) == ({"email": "new@x.example"}, {})
    (outside,) = plan.outside_change
    assert (outside.before, outside.after) == ({"name": "UI Ltd"}, {"name": "Files Ltd"})
    # The platform holds a third e-mail: a conflict, with REF's value kept for the plan.
    plan = of_change((wanted, current(1, email="ui@x.example", name="Files Ltd")), entries=entries)
    (change,) = plan.changes
    assert change.conflicts == {"email": "old@x.example"}
    assert plan.conflicts == [change] and plan.without_conflicts().changes == []
    # The platform holds the new value: nothing to do.
    plan = of_change((wanted, current(1, email="new@x.example", name="Files Ltd")), entries=entries)
    assert plan.changes == [] and plan.unchanged == 1 and plan.outside_change == []


def test_a_scoped_plan_compares_a_contact_only_in_the_sub_fields_the_files_manage():
    contact = {"name": "Ann", "email": "ann@x.example"}
    server = {**contact, "phone": "+15550000000"}  # a sub-field no file manages
    wanted = desired(1, primaryContact={**contact, "name": "Ann Q."}, name="Files Ltd")
    entries = {"inv_0001": changed({"primaryContact"}, {"primaryContact": contact})}
    # The platform holds REF's contact (and a phone): a change, not a conflict.
    plan = of_change((wanted, current(1, primaryContact=server, name="UI Ltd")), entries=entries)
    (change,) = plan.changes
    assert change.conflicts == {}
    assert change.patch == typed({"primaryContact": {**server, "name": "Ann Q."}})
    assert change.kept == {"primaryContact": ("phone",)}  # carried from the platform
    # The name outside the change is listed as the entry's, with the server's value.
    (outside,) = plan.outside_change
    assert (outside.id, str(outside.source), outside.name) == (
        "inv_0001",
        "invites/a.yaml:12",
        "Files Ltd",
    )
    assert (outside.before, outside.after) == ({"name": "UI Ltd"}, {"name": "Files Ltd"})


def test_a_contact_outside_the_change_is_shown_in_the_sub_fields_the_files_manage():
    contact = {"name": "Ann", "email": "ann@x.example"}
    server = {**contact, "phone": "+15550000000"}
    wanted = desired(1, primaryContact={**contact, "name": "Ann Q."}, name="Files Ltd")
    entries = {"inv_0001": changed({"name"}, {"name": "UI Ltd"})}
    plan = of_change((wanted, current(1, primaryContact=server, name="UI Ltd")), entries=entries)
    (outside,) = plan.outside_change
    assert outside.before == typed({"primaryContact": contact})
    assert outside.after == typed({"primaryContact": {**contact, "name": "Ann Q."}})


def test_an_invite_in_no_known_state_is_set_apart_under_its_name():
    wanted = desired(1, email="new@x.example", name="Files Ltd")
    plan = make_plan(BASE, [(wanted, Done(current(1, "", email="old@x.example")))])
    (invite,) = plan.not_updatable
    assert (invite.status, invite.name) == ("in an unknown state", "Files Ltd")


# -- from test_compare.py -----------------------------------------------------------------
# What counts as a change: one definition of equal, whatever else the invite holds.
#
# Values that are not text, lists of text or objects of text never reach a compare: the
# files' are refused by the schema, the server's on reading (tests/unit/model/test_invite.py).


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


JANE = {"name": "Jane Doe", "email": "jane@acme.example"}
GROUPS = {"groups": ["emea", "enterprise"]}
OLD = {**GROUPS, "email": "old@acme.example"}
REPEATED = {"groups": ["enterprise", "emea", "emea"]}
PATCHES = {  # the files', the server's, the patch
    "a-set-ignores-order-and-repeats": (REPEATED, OLD, {}),
    "a-set-not-sent-along-another-change": ({**REPEATED, "email": "n@x"}, OLD, {"email": "n@x"}),
    "the-server-repeats-in-a-set": (GROUPS, {"groups": ["emea", "emea", "enterprise"]}, {}),
    "a-set-sends-the-whole-list": (
        {"groups": ["vip", "emea"]},
        GROUPS,
        {"groups": ["vip", "emea"]},
    ),
    "a-partial-contact-matching": ({"primaryContact": JANE}, {"primaryContact": CONTACT}, {}),
    # The contact's sub-fields the files leave out are sent as the server holds them.
    "a-partial-contact-changed": (
        {"primaryContact": {"email": "janet@acme.example"}},
        {"primaryContact": CONTACT, "name": "Acme"},
        {"primaryContact": {**CONTACT, "email": "janet@acme.example"}},
    ),
    "a-contacts-email-alone-changed": (
        {"primaryContact": {**JANE, "email": "janet@acme.example"}},
        {"primaryContact": CONTACT},
        {"primaryContact": {**CONTACT, "email": "janet@acme.example"}},
    ),
    "a-contacts-name-alone-changed": (
        {"primaryContact": {**JANE, "name": "Janet Doe"}},
        {"primaryContact": CONTACT},
        {"primaryContact": {**CONTACT, "name": "Janet Doe"}},
    ),
    "a-contact-the-server-lacks": ({"primaryContact": JANE}, {}, {"primaryContact": JANE}),
    "fields-not-managed": ({"email": "a@x.example"}, {"email": "a@x.example", "name": "Z"}, {}),
}


@pytest.mark.parametrize(("wanted", "server", "patch"), PATCHES.values(), ids=PATCHES)
def test_a_patch_holds_what_differs_in_what_the_files_manage(wanted, server, patch):
    assert compare_invite(typed(wanted), typed(server)) == typed(patch)


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


# -- DeepDiff, imported by the commands that diff alone ------------------------------------

_LOADED = """
import sys
from reconciler.cli import main
main(sys.argv[1:])
print("deepdiff" in sys.modules)
"""


@pytest.mark.parametrize("args", [["--help"], ["plan", "--help"], ["validate", str(EXAMPLES)]])
def test_deepdiff_is_not_imported_by_help_or_validate(args: list[str]) -> None:
    done = subprocess.run(
        [sys.executable, "-c", _LOADED, *args],
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.stdout.strip().splitlines()[-1] == "False", done.stderr


def test_deepdiff_computes_what_a_plan_of_a_differing_invite_patches() -> None:
    code = (
        "import sys\n"
        "from support.plans import BASE, current, desired\n"
        "from reconciler.model.invite import Done\n"
        "from reconciler.plan.make import make_plan\n"
        "plan = make_plan(BASE, [(desired(1), Done(current(1)))])\n"
        "print(len(plan.changes), 'deepdiff' in sys.modules)\n"
    )
    tests = str(Path(__file__).resolve().parents[2])
    done = subprocess.run(
        [sys.executable, "-c", code],
        env=clean_env(PYTHONPATH=tests),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert done.stdout.split() == ["1", "True"]
