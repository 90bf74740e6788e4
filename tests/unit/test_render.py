"""How a plan is shown: text for CI logs, Markdown for PR comments, JSON for machines."""

from __future__ import annotations

import json

from reconciler.plan import InviteChange, InviteProblem, Plan
from reconciler.render import JsonRenderer, MarkdownRenderer, TextRenderer


def change(index: int, **patch: object) -> InviteChange:
    before = {"email": f"old{index}@x.example", "groups": ["emea"], "primaryContact": None}
    patch = patch or {"email": f"new{index}@x.example"}
    return InviteChange(
        id=f"inv_{index:04d}",
        source=f"invites/a.yaml:{index * 10 + 2}",
        name=f"Firma Nº{index}",
        before={k: before.get(k) for k in patch},
        patch=dict(patch),
        resend=False,
    )


def problem(index: int) -> InviteProblem:
    return InviteProblem(
        f"inv_gone{index}", f"invites/z.yaml:{index}", "invite not found", 404, f"{index}"
    )


def test_text_shows_each_field_the_way_it_changes():
    plan = Plan(
        base_url="https://api.example.test",
        changes=[
            change(1),
            change(2, groups=["emea", "vip"]),
            InviteChange(
                id="inv_c",
                source="invites/a.yaml:40",
                name=None,
                before={"primaryContact": {"name": "Jane", "email": "j@x.example", "phone": "+1"}},
                patch={"primaryContact": {"name": "Janet", "email": "j@x.example", "phone": "+1"}},
                resend=True,
            ),
        ],
        errors=[problem(1)],
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
    assert "will re-send the invitation (resendOnChange)" in text
    assert "! inv_gone1  (invites/z.yaml:1)\n    invite not found" in text
    assert text.rstrip().endswith("Plan: 3 to update, 5 unchanged, 1 error.")
    assert "\x1b[" not in text


def test_text_says_no_changes_and_warns_about_max_changes():
    empty = Plan(base_url="https://api.example.test", unchanged=4)
    assert TextRenderer().render(empty).splitlines()[-2:] == [
        "No changes.",
        "Plan: 0 to update, 4 unchanged, 0 errors.",
    ]
    big = Plan(base_url="https://api.example.test", changes=[change(1), change(2)], max_changes=1)
    assert "apply will refuse this plan" in TextRenderer().render(big)


def test_markdown_puts_errors_first_and_says_what_it_left_out():
    plan = Plan(
        base_url="https://api.example.test",
        changes=[change(i) for i in range(300)],
        errors=[problem(i) for i in range(3)],
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


def test_markdown_escapes_what_would_break_a_table():
    plan = Plan(base_url="https://x.test", changes=[change(1, name="A | B <script>")])
    comment = MarkdownRenderer().render(plan)
    assert "A &#124; B &lt;script&gt;" in comment
    assert "<script>" not in comment


def test_json_is_the_saved_plan_document_and_reads_back():
    plan = Plan(
        base_url="https://api.example.test", changes=[change(1)], errors=[problem(1)], unchanged=2
    )
    document = json.loads(JsonRenderer().render(plan))
    assert document["summary"] == {"update": 1, "unchanged": 2, "error": 1}
    assert document["changes"][0]["after"] == document["changes"][0]["patch"]
    again = Plan.from_document(document)
    assert again.changes == plan.changes and again.errors == plan.errors
    assert again.digest() == plan.digest()
