"""The invite model in one home (reconciler.invite): fields, id rule, the reconciler's keys."""

from __future__ import annotations

import subprocess
import sys

import pytest

from reconciler import invite
from reconciler.desired.entries import refuse_bad_ids
from reconciler.desired.state import load_text
from reconciler.errors import ReconcilerError


def test_set_and_object_fields_are_updatable_fields() -> None:
    assert set(invite.UPDATABLE_FIELDS) >= invite.SET_FIELDS
    assert set(invite.UPDATABLE_FIELDS) >= invite.OBJECT_FIELDS
    assert not invite.SET_FIELDS & invite.OBJECT_FIELDS


def test_the_reconcilers_keys_are_never_fields_of_an_invite() -> None:
    assert invite.RECONCILER_KEYS == (invite.ID_KEY, invite.RESEND_KEY)
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


def test_canonical_equality() -> None:
    assert invite.values_equal("groups", ["b", "a", "a"], ["a", "b"])
    assert not invite.values_equal("name", ["a", "b"], ["b", "a"])  # only sets ignore order
    assert not invite.values_equal("name", True, 1)
    assert not invite.values_equal("name", 1, 1.0)
    assert invite.values_equal("name", float("nan"), float("nan"))
    assert invite.values_equal("name", -0.0, 0.0)
    assert invite.canonical("groups", ["b", "a", "b"]) == ["a", "b"]
    assert invite.canonical_value({"b": 1, "a": "x"}) == {"a": "x", "b": (int, 1)}


def test_the_model_imports_nothing_heavy() -> None:
    # Imported on the loader's path, whose start-up is benchmarked.
    code = (
        "import sys, reconciler.invite; "
        "print(sorted(m for m in ('deepdiff', 'jsonschema', 'yaml', 'requests', 'click') "
        "if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_text_is_equal_in_nfc_and_nowhere_else() -> None:
    from reconciler.invite import values_equal

    assert values_equal("name", "Cafe\u0301", "Caf\u00e9")
    assert values_equal("groups", ["e\u0301", "a"], ["a", "\u00e9"])
    assert values_equal("primaryContact", {"name": "Zoe\u0308"}, {"name": "Zo\u00eb"})
    assert not values_equal("name", "\ufb01nance", "finance")  # NFKC is not NFC: ligatures differ
    assert not values_equal("name", "a\u200bb", "ab")


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
