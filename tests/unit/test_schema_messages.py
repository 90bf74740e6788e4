"""Schema messages name a field by its path in the entry (the full wording of every
kind of problem is in test_schema_message_wording.py)."""

from __future__ import annotations

from pathlib import Path


def test_a_field_inside_an_object_is_named_by_its_path_in_the_entry(tmp_path: Path) -> None:
    from reconciler.desired.state import load_text

    text = (
        "invites:\n"
        "  - id: inv_1\n"
        "    phone: 5\n"
        "    primaryContact: {name: Jane, email: jane@example.com, phone: 12345}\n"
    )
    messages = [p.message for p in load_text(text, "t.yaml")[1]]
    assert any(m.startswith("`primaryContact.phone` must be text") for m in messages), messages
    assert any(m.startswith("`phone` must be text") for m in messages), messages
