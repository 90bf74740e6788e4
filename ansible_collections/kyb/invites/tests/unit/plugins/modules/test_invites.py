"""The module's own parts: where a problem in the task's entries is, what a diff shows."""

from __future__ import annotations

import pytest

pytest.importorskip("reconciler")

from ansible_collections.kyb.invites.plugins.modules import invites
from reconciler.desired.rules import NO_RULES, Rules
from reconciler.errors import ReconcilerError


def test_a_problem_in_the_task_entries_names_the_entry_it_is_in():
    entries = [
        {"id": "inv_1", "name": "Acme"},
        {"id": "inv_2", "phone": 442079460000, "groups": ["emea"]},
        {"id": "inv_3", "emial": "x@example.com"},
    ]
    with pytest.raises(ReconcilerError) as error:
        invites._inline_state(entries, NO_RULES)
    lines = str(error.value).splitlines()
    assert lines[0].startswith("invites[1]: `phone` must be text")
    assert lines[1] == "invites[2]: unknown field `emial`; did you mean `email`?"


def test_entries_written_in_the_task_load_as_a_file_holding_them_would():
    state = invites._inline_state([{"id": "inv_1", "name": "NO", "groups": ["b", "a"]}], NO_RULES)
    (invite,) = state.invites
    assert invite.id == "inv_1"  # "NO" stayed text: the dump quotes what YAML would turn


def test_a_diff_line_per_field_and_per_contact_sub_field_headed_with_the_resend():
    from reconciler.model.invite import Contact, SourceLocation
    from reconciler.plan.model import InviteChange

    change = InviteChange(
        id="inv_1",
        source=SourceLocation("invites/emea.yaml", 4),
        name="Acme",
        before={"email": "old@acme.example", "primaryContact": Contact({"name": "Jane"})},
        patch={"email": "new@acme.example", "primaryContact": Contact({"name": "Jane\x1b[2J"})},
        resend=True,
        recipient="new@acme.example",
    )
    diff = invites._diff(change)
    assert diff["before_header"] == "inv_1 (invites/emea.yaml:4)"
    assert diff["after_header"].endswith(": e-mails the invitation again to new@acme.example")
    assert diff["before"] == 'email: "old@acme.example"\nprimaryContact:\n  name: "Jane"\n'
    assert diff["after"] == (
        'email: "new@acme.example"\nprimaryContact:\n  name: "Jane\\u001b[2J"\n'
    )


def test_entries_in_the_task_get_the_built_in_checks_as_a_file_would():
    entries = [
        {"id": "inv_1", "name": "Acme Ltd", "email": "ops@acme.example"},
        {"id": "inv_2", "name": "ACME  ltd", "email": "ops@acme.example"},
    ]
    state = invites._inline_state(entries, Rules())
    assert len(state.warnings) == 2, state.warnings  # the same business, the same e-mail
