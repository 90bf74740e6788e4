"""An invite value from the server of the wrong kind or size leaves that invite alone,
and the message says which field and what the server sent instead."""

from __future__ import annotations

from typing import Any

import pytest

from reconciler.api.exceptions import BadInviteValue
from reconciler.api.invite_values import (
    MAX_KEY_CHARS,
    MAX_SET_ITEMS,
    MAX_TEXT_CHARS,
    check_invite_values,
)


def problem(field: str, value: Any) -> str:
    with pytest.raises(BadInviteValue) as refused:
        check_invite_values("inv_1", {field: value}, status=200, request_id="r-9")
    assert (refused.value.status, refused.value.request_id) == (200, "r-9")
    prefix = f"invite inv_1: the server's `{field}` "
    message = refused.value.message
    assert message.startswith(prefix) and message.endswith("; this invite is left alone")
    return message[len(prefix) : -len("; this invite is left alone")]


@pytest.mark.parametrize(
    ("field", "value", "said"),
    [
        ("name", True, "is a boolean (true), not a string"),
        ("name", False, "is a boolean (false), not a string"),
        ("name", 42, "is a number (42), not a string"),
        ("email", float("inf"), "is a number (inf), not a string"),
        ("name", 10**60, "is a number (" + "1" + "0" * 39 + "), not a string"),
        ("name", {"first": "Acme"}, "is an object, not a string"),
        ("name", ["Acme"], "is a list, not a string"),
        ("groups", "emea", "is a string, not a list of strings"),
        ("groups", {"emea": True}, "is an object, not a list of strings"),
        ("groups", ["emea", 7], "item 1 is a number (7), not a string"),
        ("groups", ["emea", None], "item 1 is null, not a string"),
        ("primaryContact", "Jane", "is a string, not an object of strings"),
        ("primaryContact", {"name": ["Jane"]}, "field `name` is a list, not a string"),
        (
            "primaryContact",
            {"k" * 60: 1},
            "field `" + "k" * 60 + "` is a number (1), not a string",
        ),
        (
            "primaryContact",
            {"\x1b[2Jname": 1},
            "field `\\x1b[2Jname` is a number (1), not a string",
        ),
    ],
)
def test_a_value_of_the_wrong_kind_is_named(field: str, value: Any, said: str) -> None:
    assert problem(field, value) == said


def test_sizes_up_to_the_limits_are_accepted_and_one_more_is_not() -> None:
    check_invite_values(
        "inv_1",
        {
            "name": "n" * MAX_TEXT_CHARS,
            "groups": [f"g{i}" for i in range(MAX_SET_ITEMS)],
            "primaryContact": {f"{i:02}" + "k" * (MAX_KEY_CHARS - 2): "v" for i in range(20)},
            "phone": None,
        },
        status=200,
        request_id=None,
    )
    assert problem("name", "n" * (MAX_TEXT_CHARS + 1)) == (
        "has 1,001 characters, more than the 1,000 allowed"
    )
    assert problem("groups", ["g"] * (MAX_SET_ITEMS + 1)) == (
        "has 1,001 items, more than MAX_SET_ITEMS (1,000)"
    )
    assert problem("primaryContact", {f"k{i}": "v" for i in range(21)}) == (
        "has 21 keys, more than the 20 allowed"
    )
    assert problem("groups", ["ok", "g" * (MAX_TEXT_CHARS + 1)]) == (
        "item 1 has 1,001 characters, more than the 1,000 allowed"
    )


def test_a_contact_field_with_no_value_is_fine() -> None:
    check_invite_values("inv_1", {"primaryContact": {"name": None}}, status=200, request_id=None)


def test_a_contact_key_is_bounded_like_a_value_and_shown_cut_short() -> None:
    said = problem("primaryContact", {"name": "J", "k" * 100_000: "v"})
    assert said == (
        "has a field named `" + "k" * 40 + "…` of 100,000 characters, more than the "
        f"{MAX_KEY_CHARS} allowed"
    )
    said = problem("primaryContact", {"\u202e" * 65: "v"})
    assert "\u202e" not in said and "\\u202e" in said
