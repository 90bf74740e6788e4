"""How a plan is shown: text for CI logs, Markdown for PR comments, JSON for machines."""

from __future__ import annotations

import json
import re

import pytest
from support.values import held, typed

from reconciler.api.exceptions import PreconditionFailed
from reconciler.apply.applier import ApplyReport, ChangeResult, ResendOutcome, WriteOutcome
from reconciler.model.invite import SourceLocation
from reconciler.output import JsonRenderer, summary_line
from reconciler.output.markdown import MarkdownRenderer
from reconciler.output.text import TextRenderer
from reconciler.plan.model import FailedInvite, InviteChange, NotUpdatable, Plan
from reconciler.plan.write_check import MovedField, StoredOtherwise
from reconciler.safetext import register_secret
from reconciler.settings.contract import Contract


def change(index: int, **patch: object) -> InviteChange:
    before = {"email": f"old{index}@x.example", "groups": ["emea"], "primaryContact": None}
    patch = patch or {"email": f"new{index}@x.example"}
    held_before = {k: before.get(k) for k in patch}
    return invite(f"inv_{index:04d}", index * 10 + 2, held_before, patch, f"Firma Nº{index}")


def invite(
    invite_id: str, line: int, before: dict, patch: dict, name: str | None = None, **extra: object
) -> InviteChange:
    """A change read from invites/a.yaml at ``line``, not re-sent unless ``resend=True``."""
    fields = {"resend": False, **extra}
    source = SourceLocation("invites/a.yaml", line)
    return InviteChange(invite_id, source, name, held(before), typed(patch), **fields)  # type: ignore[arg-type]


def plan_of(**records: object) -> Plan:
    return Plan(base_url="https://x.test", **records)  # type: ignore[arg-type]


def problem(index: int) -> FailedInvite:
    return FailedInvite(
        f"inv_gone{index}",
        SourceLocation("invites/z.yaml", index),
        "invite not found",
        404,
        f"{index}",
    )


def test_text_shows_each_field_the_way_it_changes():
    plan = plan_of(
        changes=[
            change(1),
            change(2, groups=["emea", "vip"]),
            invite(
                "inv_c",
                40,
                {"primaryContact": {"name": "Jane", "email": "j@x.example", "phone": "+1"}},
                {"primaryContact": {"name": "Janet", "email": "j@x.example", "phone": "+1"}},
                resend=True,
            ),
        ],
        failed=[problem(1)],
        unchanged=5,
    )
    text = TextRenderer(color=False).render(plan)
    assert (
        "~ inv_0001  Firma Nº1  (invites/a.yaml:12)\n"
        '    email: "old1@x.example" -> "new1@x.example"' in text
    )
    assert 'groups: + "vip"' in text and "- " not in text.split("groups:")[1].split("\n")[0]
    assert 'primaryContact.name: "Jane" -> "Janet"' in text
    assert "primaryContact.phone" not in text  # unchanged sub-fields are not listed
    # No address known (the server holds none): the label still says an e-mail goes out.
    assert "e-mails the invitation again (resendOnChange)" in text
    assert "! inv_gone1  (invites/z.yaml:1)\n    invite not found" in text
    assert text.rstrip().endswith(
        "Plan: 3 to update (1 invitation e-mailed again), 5 unchanged, 1 error."
    )
    assert "\x1b[" not in text


def test_text_says_no_changes_and_warns_about_max_changes():
    empty = plan_of(unchanged=4)
    assert TextRenderer().render(empty).splitlines()[-2:] == [
        "No changes.",
        "Plan: 0 to update, 4 unchanged, 0 errors.",
    ]
    big = plan_of(changes=[change(1), change(2)], max_changes=1)
    assert "apply will refuse this plan" in TextRenderer().render(big)


def test_markdown_puts_errors_first_and_says_what_it_left_out_never_what_it_shows():
    source = SourceLocation("f.yaml", 1)
    stale = [NotUpdatable("inv_n", source, None, {"name": "a"}, {"name": "b"}, "accepted")]
    plan = plan_of(
        changes=[change(i) for i in range(300)],
        failed=[problem(i) for i in range(3)],
        not_updatable=stale,  # shown, and so not counted as left out
    )
    comment = MarkdownRenderer(limit=8_000).render(plan)
    assert len(comment) <= 8_000
    assert comment.index("#### Errors") < comment.index("#### `inv_0000`")
    assert all(f"`inv_gone{i}`" in comment for i in range(3))
    shown = comment.count("| field | before | after |")
    assert 0 < shown < 300
    assert (
        "Not shown, to keep this comment under 8,000 characters: "
        f"{300 - shown} changes and 0 errors." in comment
    )
    assert "<details><summary>300 invites to update</summary>" in comment


def test_markdown_counts_what_it_left_out_by_kind():
    stale = [
        NotUpdatable(
            f"inv_n{i}",
            SourceLocation("f.yaml", 1),
            None,
            {"name": "a" * 3000},
            {"name": "b"},
            f"status{i}",
        )
        for i in range(40)
    ]
    plan = plan_of(
        changes=[change(i) for i in range(5)],
        failed=[problem(i) for i in range(3)],
        not_updatable=stale,
    )
    comment = MarkdownRenderer(limit=40_000).render(plan)
    shown_stale = comment.count("##### `inv_n")
    assert 0 < shown_stale < 40
    # A status heading never stands without its invite.
    assert comment.count("#### No longer updatable:") == shown_stale
    shown_errors = comment.count("`inv_gone")
    shown_changes = comment.count("#### `inv_0")
    assert (
        "Not shown, to keep this comment under 40,000 characters: "
        f"{5 - shown_changes} changes, {3 - shown_errors} errors "
        f"and {40 - shown_stale} invites no longer updatable." in comment
    )


def test_markdown_escapes_what_would_break_a_table():
    plan = plan_of(changes=[change(1, name="A | B <script>")])
    comment = MarkdownRenderer().render(plan)
    assert "A &#124; B &lt;script&gt;" in comment
    assert "<script>" not in comment


def test_markdown_shows_a_servers_kept_sub_field_names_literally_in_the_warning():
    # A server names its contact's unmanaged sub-fields: in the warning's sentence they
    # stood as Markdown (a link, a mention), and a backtick in one ended the code span.
    link = "[click](https://evil.example) @octocat"
    tick = "x` [link](https://evil2.example) `y"
    before = {"name": "Old", "email": "old@x.example", link: "v", tick: "w"}
    after = {"name": "New", "email": "new@x.example", link: "v", tick: "w"}
    kept = {"primaryContact": (link, tick)}
    plan = plan_of(
        changes=[
            invite("inv_k", 2, {"primaryContact": before}, {"primaryContact": after}, kept=kept)
        ],
    )
    comment = MarkdownRenderer().render(plan)
    (warning,) = [line for line in comment.splitlines() if "keeps the previous" in line]
    assert "[click]" not in warning and "[link]" not in warning
    assert "&#91;click&#93;(https://evil.example) @octocat" in warning
    assert "x&#96; &#91;link&#93;(https://evil2.example) &#96;y" in warning
    outside_code = re.sub(r"<code>.*?</code>", "", warning)
    assert "https://" not in outside_code and "@" not in outside_code


def test_text_and_markdown_name_where_requests_go_when_reconciler_yaml_sets_the_paths():
    base = "https://api.example.test"
    contract = Contract(resend_invite_path="/public-api/v1/kyb/invites/inv_2/resend/{inviteId}")
    plan = Plan(base_url=base, changes=[change(1)], invite_urls=contract.invite_urls(base))
    said = (
        f"Paths from reconciler.yaml: invites read at GET {base}/public-api/v1/kyb/invites/"
        f"{{inviteId}}, updated at PATCH {base}/public-api/v1/kyb/invites/{{inviteId}}, "
        f"re-sent at POST {base}/public-api/v1/kyb/invites/inv_2/resend/{{inviteId}}."
    )
    assert TextRenderer().render(plan).splitlines()[-2:] == [said, summary_line(plan)]
    markdown = MarkdownRenderer().render(plan)
    assert (
        "> [!NOTE]\n> Paths from reconciler.yaml: invites read at GET "
        f"<code>{base}/public-api/v1/kyb/invites/{{inviteId}}</code>, " in markdown
    )
    assert f"POST <code>{base}/public-api/v1/kyb/invites/inv&#95;2/resend/" in markdown
    # At the contract's own paths, nothing is said.
    plain = Plan(base_url=base, changes=[change(1)], invite_urls=Contract().invite_urls(base))
    assert plain.invite_urls is None
    assert "Paths from" not in TextRenderer().render(plain) + MarkdownRenderer().render(plain)


def test_invite_urls_from_a_plan_file_reach_the_terminal_escaped():
    urls = {
        kind: "https://x.test/\x1b]0;owned\x07{inviteId}" for kind in ("read", "update", "resend")
    }
    text = TextRenderer().render(plan_of(invite_urls=urls))
    assert "Paths from reconciler.yaml" in text and "\x1b" not in text and "\x07" not in text


def _stale() -> NotUpdatable:
    return NotUpdatable(
        "inv_done",
        SourceLocation("invites/d.yaml", 4),
        "Done Ltd",
        held({"email": "old@x.example", "primaryContact": {"name": "Jane"}}),
        typed({"email": "new@x.example", "primaryContact": {"name": "Janet"}}),
        "accepted",
    )


def test_text_lists_invites_no_longer_updatable_under_their_own_heading_with_the_fix():
    plan = plan_of(changes=[change(1)], not_updatable=[_stale()])
    text = TextRenderer().render(plan)
    block = text.split("No longer updatable: accepted\n\n")[1]
    assert block.startswith(
        "! inv_done  Done Ltd  (invites/d.yaml:4)\n"
        "    accepted, not pending: it can no longer be updated and apply leaves it alone; "
        "these fields differ from the files:\n"
        '      email: "old@x.example" -> "new@x.example"\n'
        '      primaryContact.name: "Jane" -> "Janet"\n'
        "    fix: remove it from invites/d.yaml:4, or bring the file in line with "
        "`reconcile export inv_done`\n"
    )
    assert text.rstrip().endswith(
        "Plan: 1 to update, 0 unchanged, 0 errors, 1 no longer updatable."
    )


def test_text_groups_invites_no_longer_updatable_by_status_in_first_seen_order():
    def stale(n: int, status: str) -> NotUpdatable:
        source = SourceLocation("invites/d.yaml", n)
        return NotUpdatable(f"inv_s{n}", source, None, {"name": "a"}, {"name": "b"}, status)

    statuses = ["accepted", "revoked", "accepted", "expired", "revoked", "accepted"]
    plan = plan_of(not_updatable=[stale(n, s) for n, s in enumerate(statuses)])
    lines = TextRenderer().render(plan).splitlines()
    shown = [line.split()[1] if line.startswith("! ") else line for line in lines]
    wanted = [line for line in shown if line.startswith(("No longer", "inv_"))]
    assert wanted == [
        "No longer updatable: accepted",
        "inv_s0",
        "inv_s2",
        "inv_s5",
        "No longer updatable: revoked",
        "inv_s1",
        "inv_s4",
        "No longer updatable: expired",
        "inv_s3",
    ]


def test_markdown_shows_invites_no_longer_updatable_first():
    plan = plan_of(
        changes=[change(1)],
        failed=[problem(1)],
        not_updatable=[_stale()],
    )
    comment = MarkdownRenderer().render(plan)
    first = comment.index("#### No longer updatable: <code>accepted</code>")
    assert first < comment.index("#### Errors") < comment.index("#### `inv_0001`")
    assert "| field | on the platform | in the files |" in comment
    assert "Fix: remove it from <code>invites/d.yaml:4</code>" in comment
    assert "No changes" not in MarkdownRenderer().render(plan_of(not_updatable=[_stale()]))


def test_control_characters_from_files_and_servers_never_reach_a_terminal_raw():
    hostile = "evil\x1b]0;PWNED\x07\u202e\x9b2J\nnext"
    plan = plan_of(
        changes=[
            InviteChange(
                "inv_a",
                SourceLocation(f"invites/{hostile}.yaml", 2),
                hostile,
                {"name": hostile},
                {"name": "B"},
                False,
            )
        ],
        failed=[
            FailedInvite("inv_b", SourceLocation("b.yaml", 1), f"HTTP 500: {hostile}", 500, None)
        ],
    )
    text = TextRenderer().render(plan)
    assert "~ inv_a  evil\\x1b]0;PWNED\\x07\\u202e\\x9b2J\\nnext  (invites/evil" in text
    for rendered in (text, MarkdownRenderer().render(plan)):
        assert not any(c in rendered for c in "\x1b\x07\u202e\x9b")
        assert "0;PWNED" in rendered.replace("&#93;", "]")  # shown, as escapes
    document = JsonRenderer().render(plan)
    assert not any(c in document for c in "\x07\u202e\x9b")
    assert json.loads(document)["changes"][0]["name"] == hostile  # same value, escaped form


def test_what_the_server_said_is_redacted_and_the_files_values_shown_as_sent():
    register_secret("eyJ.issued-token.sig")
    secret = "text-echoed-secret-77"
    register_secret(secret)
    before = {
        "name": "Flag Bearer Ltd.",
        "primaryContact": {"name": "A", "email": "a@x.example", "title": f"echo {secret}"},
    }
    patch = {
        "name": "Flag Bearer Holdings 2 Ltd.",
        "primaryContact": {
            "name": "Torch Bearer 2 Team",
            "email": "a@x.example",
            "title": f"echo {secret}",
        },
    }
    echoed = "HTTP 401: bad Bearer eyJ.issued-token.sig"  # a server echoing a token
    plan = plan_of(
        changes=[invite("inv_1", 1, before, patch, "Flag Bearer Holdings 2 Ltd.")],
        failed=[FailedInvite("inv_b", SourceLocation("b.yaml", 1), echoed, 401)],
    )
    text = TextRenderer().render(plan)
    assert 'name: "Flag Bearer Ltd." -> "Flag Bearer Holdings 2 Ltd."' in text
    assert 'primaryContact.name: "A" -> "Torch Bearer 2 Team"' in text
    for renderer in (TextRenderer(), MarkdownRenderer(), JsonRenderer()):
        shown = renderer.render(plan)
        assert secret not in shown and "issued-token" not in shown and "redacted" in shown
    (record,) = json.loads(JsonRenderer().render(plan))["changes"]
    assert record["after"]["primaryContact"]["title"] == "echo [redacted]"
    assert record["patch"]["primaryContact"]["name"] == "Torch Bearer 2 Team"
    assert record["patch"]["name"] == "Flag Bearer Holdings 2 Ltd."


# -- apply's results: conflict, diverged, re-send owed, and the summary ------------------

APPLIED = invite(
    "inv_1",
    3,
    {"email": "old@acme.example"},
    {"email": "Compliance@Acme.example"},
    "Acme",
    resend=True,
)


MOVED = MovedField("email", "old@acme.example", "support@acme.example", "new@acme.example")
REFUSED = PreconditionFailed("precondition failed", status=412, request_id="req-9")


@pytest.mark.parametrize(
    ("result", "said", "not_said"),
    [
        # A conflict lists the three values.
        (
            ChangeResult(APPLIED, WriteOutcome.CONFLICT, moved=(MOVED,)),
            'email: planned from "old@acme.example", now "support@acme.example", '
            'wanted "new@acme.example"',
            "ETag",
        ),
        # A 412 says when the invite reads as before, so the ETag moved alone.
        (
            ChangeResult(APPLIED, WriteOutcome.CONFLICT, REFUSED, etag_moved_alone=True),
            "(HTTP 412: precondition failed (requestId req-9)); yet read again, it holds what "
            "it held before: the server's ETag may change at every read",
            "planned from",
        ),
        (
            ChangeResult(APPLIED, WriteOutcome.CONFLICT, REFUSED),
            "nothing written to it (HTTP 412: precondition failed (requestId req-9))",
            "ETag",
        ),
    ],
)
def test_a_conflict_writes_nothing_and_says_why(
    result: ChangeResult, said: str, not_said: str
) -> None:
    line = TextRenderer().apply_result(result)
    assert line.startswith(
        "conflict     inv_1  (invites/a.yaml:3): changed on the platform since the plan was "
        "shown; nothing written to it"
    )
    assert said in line and not_said not in line


def test_diverged_says_what_was_stored_where_to_fix_it_and_that_no_e_mail_went() -> None:
    part = StoredOtherwise("email", "Compliance@Acme.example", "compliance@acme.example")
    owed = "withheld: the platform stored `email` otherwise than sent"
    result = ChangeResult(
        APPLIED, WriteOutcome.DIVERGED, resend=ResendOutcome.OWED, diverged=(part,), owed=owed
    )
    line = TextRenderer().apply_result(result)
    assert line.splitlines()[0] == "diverged     inv_1  (invites/a.yaml:3): email"
    assert (
        'the platform stored "compliance@acme.example" for `email`, not '
        '"Compliance@Acme.example" as written; write the platform\'s form in '
        "invites/a.yaml:3 (or `reconcile adopt --target inv_1`)" in line
    )
    assert "re-sent " not in line.replace("not re-sent", "")
    assert line.splitlines()[-1] == (
        "re-send owed  inv_1: withheld: the platform stored `email` otherwise than sent; "
        "send it with: reconcile resend inv_1"
    )


def test_a_re_send_owed_says_how_to_make_it() -> None:
    result = ChangeResult(
        APPLIED,
        WriteOutcome.UPDATED,
        resend=ResendOutcome.OWED,
        owed="due after the update and never attempted (not sent: the run is stopping)",
    )
    line = TextRenderer().apply_result(result)
    assert "re-send owed  inv_1: due after the update and never attempted" in line
    assert line.endswith("send it with: reconcile resend inv_1")


def test_the_summary_counts_conflicts_diverged_and_owed_re_sends_apart() -> None:
    report = ApplyReport(
        results=[
            ChangeResult(APPLIED, WriteOutcome.UPDATED, resend=ResendOutcome.RESENT),
            ChangeResult(APPLIED, WriteOutcome.CONFLICT),
            ChangeResult(APPLIED, WriteOutcome.DIVERGED),
            ChangeResult(APPLIED, WriteOutcome.UPDATED, resend=ResendOutcome.OWED, owed="x"),
            ChangeResult(APPLIED, WriteOutcome.ALREADY_APPLIED),
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


def test_a_value_the_platform_does_not_hold_is_not_set_in_text_and_markdown_null_in_json():
    # Issue 39, row 7: `null -> ["emea"]` read as a value the platform holds.
    patch = {
        "phone": "+442079460000",
        "groups": ["emea"],
        "primaryContact": {"name": "Jo", "email": "jo@x.example"},
    }
    unset = {"phone": None, "groups": None, "primaryContact": None}
    plan = plan_of(changes=[invite("inv_n", 2, unset, patch)])
    text = TextRenderer(color=False).render(plan)
    assert '    phone: (not set) -> "+442079460000"' in text
    assert '    groups: (not set) -> ["emea"]' in text
    assert '    primaryContact: (not set) -> {"name": "Jo", "email": "jo@x.example"}' in text
    assert "null" not in text
    comment = MarkdownRenderer().render(plan)
    assert '| phone | _(not set)_ | <code>"+442079460000"</code> |' in comment
    assert "| groups | _(not set)_ |" in comment and "null" not in comment
    (change_record,) = json.loads(JsonRenderer().render(plan))["changes"]
    assert change_record["before"] == {"phone": None, "groups": None, "primaryContact": None}


def test_an_address_changed_without_a_re_send_says_no_e_mail_goes() -> None:
    # Without resendOnChange the business is never e-mailed at its new address: a reviewer
    # should see that, not find it out from the business.
    plan = plan_of(
        changes=[change(1), change(2, groups=["emea", "vip"])],
        failed=[],
        unchanged=0,
    )
    note = "no e-mail: the invitation is not sent again to the new address"
    text = TextRenderer(color=False).render(plan)
    assert (
        '    email: "old1@x.example" -> "new1@x.example"\n'
        f"    {note} (resendOnChange does not ask for it)\n" in text
    )
    assert text.count(note) == 1  # not for a change of groups alone
    markdown = MarkdownRenderer().render(plan)
    assert markdown.count(note) == 1
