"""How each outcome of a write reads: conflict, diverged, re-send owed, already applied,
and apply's summary counting each apart (a conflict is never an update)."""

from __future__ import annotations

from support.values import held, typed

from reconciler.api.exceptions import NotSent
from reconciler.apply.applier import ApplyReport, ChangeResult, ResendOutcome, WriteOutcome
from reconciler.model.invite import SourceLocation
from reconciler.output.text import TextRenderer
from reconciler.plan.changes import InviteChange
from reconciler.plan.write_check import MovedField, StoredOtherwise

CHANGE = InviteChange(
    "inv_1",
    SourceLocation("invites/a.yaml", 3),
    "Acme",
    held({"email": "old@acme.example"}),
    typed({"email": "Compliance@Acme.example"}),
    True,
)


def test_a_conflict_lists_the_three_values_and_writes_nothing() -> None:
    moved = MovedField("email", "old@acme.example", "support@acme.example", "new@acme.example")
    line = TextRenderer().apply_result(ChangeResult(CHANGE, WriteOutcome.CONFLICT, moved=(moved,)))
    assert line.startswith("conflict     inv_1  (invites/a.yaml:3): changed on the platform")
    assert "nothing written" in line
    assert (
        'email: planned from "old@acme.example", now "support@acme.example", '
        'wanted "new@acme.example"' in line
    )


def test_diverged_says_what_was_stored_where_to_fix_it_and_that_no_e_mail_went() -> None:
    part = StoredOtherwise("email", "Compliance@Acme.example", "compliance@acme.example")
    result = ChangeResult(
        CHANGE, WriteOutcome.DIVERGED, resend=ResendOutcome.WITHHELD, diverged=(part,)
    )
    line = TextRenderer().apply_result(result)
    assert line.splitlines()[0] == "diverged     inv_1  (invites/a.yaml:3): email"
    assert (
        'the platform stored "compliance@acme.example" for `email`, not '
        '"Compliance@Acme.example" as written; write the platform\'s form in '
        "invites/a.yaml:3 (or `reconcile adopt --target inv_1`)" in line
    )
    assert "re-sent " not in line.replace("not re-sent", "")


def test_a_re_send_owed_says_how_to_make_it() -> None:
    result = ChangeResult(
        CHANGE,
        WriteOutcome.UPDATED,
        resend=ResendOutcome.OWED,
        resend_error=NotSent("not sent: the run is stopping"),
    )
    line = TextRenderer().apply_result(result)
    assert "re-send owed  inv_1: due after the update and never attempted" in line
    assert line.endswith("send it with: reconcile resend inv_1")


def test_the_summary_counts_conflicts_diverged_and_owed_re_sends_apart() -> None:
    report = ApplyReport(
        results=[
            ChangeResult(CHANGE, WriteOutcome.UPDATED, resend=ResendOutcome.RESENT),
            ChangeResult(CHANGE, WriteOutcome.CONFLICT),
            ChangeResult(CHANGE, WriteOutcome.DIVERGED, resend=ResendOutcome.WITHHELD),
            ChangeResult(
                CHANGE, WriteOutcome.UPDATED, resend=ResendOutcome.OWED, resend_error=NotSent("x")
            ),
            ChangeResult(CHANGE, WriteOutcome.ALREADY_APPLIED),
        ],
        left_in_conflict=1,
    )
    summary = TextRenderer().apply_summary(report)
    assert summary.splitlines()[0] == (
        "Apply: 2 updated, 1 diverged, 2 conflicts (not written), 0 failed, 1 already applied, "
        "1 re-send owed."
    )
    assert "reconcile resend inv_1" in summary
    assert not report.ok
