"""The invite as the files want it and as the server holds it (reconciler.model.invite):
the id rule, resendOnChange, a DesiredInvite's compact record, where an entry was written."""

from __future__ import annotations

import subprocess
import sys

import pytest
from support.values import typed

from reconciler.desired.state import load_text, refuse_bad_ids
from reconciler.errors import ReconcilerError
from reconciler.model import invite
from reconciler.model.fields import ID_KEY, RECONCILER_KEYS, RESEND_KEY
from reconciler.model.invite import CurrentInvite, DesiredInvite, SourceLocation


def test_the_reconcilers_keys_are_never_fields_of_an_invite() -> None:
    assert RECONCILER_KEYS == (ID_KEY, RESEND_KEY)
    text = "invites:\n  - id: inv_1\n    name: Acme\n    resendOnChange: true\n"
    (desired,), problems = load_text(text, "a.yaml")
    assert problems == []
    assert desired.fields == {"name": "Acme"} and desired.resend_on_change


@pytest.mark.parametrize("ident", ["inv_1", "a.b-c", "x" * 128, ".a", "a."])
def test_ids_the_rule_accepts(ident: str) -> None:
    assert invite.INVITE_ID.fullmatch(ident)


@pytest.mark.parametrize("ident", ["", ".", "..", "x" * 129, "a b", "a/b", "inv_1\n"])
def test_ids_the_rule_refuses_with_one_wording_everywhere(ident: str) -> None:
    assert not invite.INVITE_ID.fullmatch(ident)
    with pytest.raises(ReconcilerError, match=f"\\({invite.ID_RULE}\\)"):
        refuse_bad_ids([ident], "--id")


def test_a_file_entry_with_a_bad_id_is_refused_in_the_same_words() -> None:
    _, problems = load_text("invites:\n  - id: ..\n    name: Acme\n", "a.yaml")
    assert any(invite.ID_RULE in str(problem) for problem in problems)


def test_the_model_imports_nothing_heavy() -> None:
    # Imported on the loader's path, whose start-up is benchmarked.
    code = (
        "import sys, reconciler.model.invite, reconciler.model.fields, reconciler.model.kinds, "
        "reconciler.model.outcome; reconciler.model.fields.field_kinds(); "
        "print(sorted(m for m in ('deepdiff', 'jsonschema', 'yaml', 'requests', 'click') "
        "if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


# resendOnChange: true after any update, a list only after an update carrying a listed field.
@pytest.mark.parametrize(
    ("written", "rule"),
    [
        ("true", True),
        ("false", False),
        ("[email, primaryContact]", ("email", "primaryContact")),
        ("[groups]", ("groups",)),
    ],
)
def test_resend_on_change_reads_true_false_or_a_list_of_fields(written: str, rule: object) -> None:
    text = f"invites:\n  - id: inv_1\n    name: Acme\n    resendOnChange: {written}\n"
    (desired,), problems = load_text(text, "a.yaml")
    assert problems == []
    assert desired.resend_on_change == rule
    assert desired.fields == {"name": "Acme"}  # never a field sent to the platform


@pytest.mark.parametrize(
    ("rule", "patched", "due"),
    [
        (True, ["groups"], True),
        (False, ["email"], False),
        (("email", "primaryContact"), ["groups"], False),
        (("email", "primaryContact"), ["groups", "email"], True),
        (("email", "primaryContact"), ["primaryContact"], True),
        (("email",), [], False),
    ],
)
def test_a_list_re_sends_only_when_the_update_carried_a_listed_field(
    rule: invite.ResendRule, patched: list[str], due: bool
) -> None:
    assert invite.resend_due(rule, patched) is due


def test_a_desired_invite_keeps_its_fields_in_order_and_shares_their_names() -> None:
    where = SourceLocation("invites/a.yaml", 3, 5)
    fields = typed({"name": "Acme", "groups": ["b", "a"], "primaryContact": {"name": "J"}})
    one = DesiredInvite("inv_1", fields, where)
    other = DesiredInvite("inv_2", typed({"name": "B", "groups": [], "primaryContact": {}}), where)
    assert list(one.fields) == ["name", "groups", "primaryContact"]
    assert one.get("groups") == ["b", "a"] and one.get("email") is None
    assert (one.name, one.source) == ("Acme", where)
    assert one._names is other._names  # one tuple for every invite naming the same fields
    assert one == DesiredInvite("inv_1", dict(fields), where)
    assert one != DesiredInvite("inv_1", fields, where, resend_on_change=True)


def test_a_source_location_is_named_as_every_message_names_it() -> None:
    assert str(SourceLocation("invites/a.yaml", 12)) == "invites/a.yaml:12"
    assert str(SourceLocation("in\x1bvites.yaml", 2)) == "in\\x1bvites.yaml:2"
    assert str(SourceLocation("a saved plan's own text", 0)) == "a saved plan's own text"


def test_a_current_invite_is_pending_unless_the_server_says_another_status() -> None:
    """Compared without case; no status is taken as pending (never pruned, issue 37 row 2)."""
    for pending in ("pending", "PENDING", "Pending", None):
        assert CurrentInvite("inv_1", pending, {}).is_pending
    for other in ("accepted", "expired", "", "pending "):
        assert not CurrentInvite("inv_1", other, {}).is_pending
