"""Schema messages for reconciler.yaml, worded from jsonschema's error attributes."""

from __future__ import annotations

from pathlib import Path

import pytest

from reconciler.config import load_settings
from reconciler.errors import InputError


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("parallelism: 1000", "1:14: `parallelism` must be at most 256"),
        ("timeout: 0", "1:10: `timeout` must be more than 0"),
        ('paths: [invites, ""]', "1:18: an item of `paths` must be at least 1 character"),
        ("paths: 5", "1:8: `paths` must be text or a list, not a number"),
        ("paths: []", "1:8: `paths` must be a list of at least 1 item"),
        ("max_changes: yes", "1:14: `max_changes` must be a whole number, not a boolean"),
        ("base_url: ftp://kyb.example", "1:11: `base_url`: 'ftp://kyb.example' does not match"),
        ("scope: 2024-01-02", "1:8: `scope` must be text, but YAML reads 2024-01-02 as a date"),
    ],
)
def test_each_kind_of_config_error_names_the_setting_and_its_position(
    tmp_path: Path, line: str, expected: str
) -> None:
    config = tmp_path / "reconciler.yaml"
    config.write_text(f"{line}\n", encoding="utf-8")

    with pytest.raises(InputError) as caught:
        load_settings(str(config), env={})

    assert str(caught.value).startswith(f"{config}:{expected}")
    assert "Traceback" not in str(caught.value) and "\n" not in str(caught.value)


def test_a_field_inside_an_object_is_named_by_its_path_in_the_entry(tmp_path: Path) -> None:
    from reconciler.desired import load_text

    text = (
        "invites:\n"
        "  - id: inv_1\n"
        "    phone: 5\n"
        "    primaryContact: {name: Jane, email: jane@example.com, phone: 12345}\n"
    )
    messages = [p.message for p in load_text(text, "t.yaml")[1]]
    assert any(m.startswith("`primaryContact.phone` must be text") for m in messages), messages
    assert any(m.startswith("`phone` must be text") for m in messages), messages
