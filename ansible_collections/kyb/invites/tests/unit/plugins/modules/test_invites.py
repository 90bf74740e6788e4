"""The module's own parts: where a problem in the task's entries is, what a diff shows."""

from __future__ import annotations

import re

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


def test_entries_in_the_task_are_named_by_their_place_in_the_list_everywhere():
    entries = [
        {"id": "inv_1", "name": "Acme Ltd", "email": "ops@acme.example"},
        {"id": "inv_2", "name": "ACME  ltd", "email": "ops@acme.example"},
        {"id": "inv_3", "groups": ["emea"]},
    ]
    state = invites._inline_state(entries, Rules())
    assert [str(invite.source) for invite in state.invites] == [
        "invites[0]",
        "invites[1]",
        "invites[2]",
    ]
    shown = [str(warning) for warning in state.warnings]
    places = ("invites[0]: warning: ", "invites[1]: warning: ")
    assert all(line.startswith(places) for line in shown), shown
    assert not any(re.search(r"invites:\d", line) for line in shown), shown


def test_a_duplicate_id_names_both_entries_by_their_place():
    with pytest.raises(ReconcilerError) as error:
        invites._inline_state([{"id": "inv_1"}, {"id": "inv_2"}, {"id": "inv_1"}], NO_RULES)
    message = str(error.value)
    assert message.startswith("invites[2]: "), message
    assert "invites[0]" in message and not re.search(r"invites:\d", message)


def test_the_echo_of_the_arguments_holds_ids_and_field_names_never_a_value():
    module = invites._Module.__new__(invites._Module)
    module.params = {
        "invites": [{"id": "inv_1", "email": "jane@acme.example", "name": "Jane Doe"}],
        "src": [{"path": "invites/emea.yaml", "text": "invites:\n  - id: inv_2\n"}],
        "max_resends": 1,
    }
    assert module._echoed() == {
        "invites": [{"id": "inv_1", "email": "[not logged]", "name": "[not logged]"}],
        "src": ["invites/emea.yaml"],
        "max_resends": 1,
    }
    assert module.params["invites"][0]["email"] == "jane@acme.example"  # the run's own


def _documented_options():
    import yaml

    from ansible_collections.kyb.invites.plugins.doc_fragments.connection import (
        ModuleDocFragment,
    )

    options = yaml.safe_load(invites.DOCUMENTATION)["options"]
    options.update(yaml.safe_load(ModuleDocFragment.DOCUMENTATION)["options"])
    return options


def test_every_setting_read_from_a_variable_is_documented_with_the_variables_name():
    from ansible_collections.kyb.invites.plugins.module_utils import invite_reconciler as lib

    options = _documented_options()
    spec = lib.connection_spec()
    fallbacks = {
        name: option["fallback"][1][0] for name, option in spec.items() if "fallback" in option
    }
    assert set(fallbacks) >= {"base_url", "client_id", "client_secret", "token_auth_method"}
    for name, variable in {**lib.SETTING_VARIABLES, **fallbacks}.items():
        text = " ".join(options[name]["description"])
        assert f"E({variable})" in text, (name, variable)
    assert "E(REQUESTS_CA_BUNDLE)" in " ".join(options["ca_path"]["description"])


def test_state_is_present_only_and_the_docs_say_so():
    options = _documented_options()
    assert options["state"]["default"] == "present"
    assert "V(present) is the only state" in " ".join(options["state"]["description"])


def test_the_hosts_syslog_gets_the_same_echo_never_a_value():
    module = invites._Module.__new__(invites._Module)
    module.params = {
        "invites": [{"id": "inv_1", "email": "jane@acme.example"}],
        "client_secret": "a-long-secret",
    }
    module.argument_spec = {"invites": {}, "client_secret": {"no_log": True}}
    module.aliases = {}
    module.no_log_values = {"a-long-secret"}
    logged = []
    module.log = lambda msg, log_args=None: logged.append(msg)
    module._log_invocation()
    (line,) = logged
    assert "inv_1" in line and "[not logged]" in line
    assert "jane@acme.example" not in line and "a-long-secret" not in line
    assert module.params["invites"][0]["email"] == "jane@acme.example"


def test_a_resend_this_run_did_not_make_says_why_and_never_that_it_updated():
    # Another run's write already held the values (two plays at once): whether its e-mail
    # went is unknown, so the message must say that, not "updated" and "send it".
    from types import SimpleNamespace

    from reconciler.apply.applier import (
        ApplyReport,
        ChangeResult,
        ResendOutcome,
        WriteOutcome,
        _held_already,
    )

    held = ChangeResult(
        change=SimpleNamespace(id="inv_acme", resend=True),
        outcome=WriteOutcome.ALREADY_APPLIED,
        resend=ResendOutcome.OWED,
        owed=_held_already(),
    )
    run = invites.Run(module=None)
    (problem,) = run.resend_problems(ApplyReport(results=[held]), lambda outcome: [])
    assert problem.startswith("the invitation was not e-mailed again by this run: inv_acme")
    assert "whether an invitation went with them is unknown" in problem
    assert "once checked, send it with `reconcile resend ID`" in problem
    assert "updated" not in problem
    assert run.result["resend_not_made"] == ["inv_acme"]
