"""The invite schema is a file a team may edit. Whatever its id pattern says, an id
that cannot be put in a URL path is refused where it is written: the loader's
own rule holds too. An entry and the file around the entries are first asked of
fastjsonschema, so a valid file is read without jsonschema; its formats are the tool's."""

from __future__ import annotations

import json
import subprocess
import sys
import warnings
from collections.abc import Callable
from typing import Any

import pytest

from reconciler.desired.state import load_text
from reconciler.schema.check import conforms, format_checker, invite_validators
from reconciler.schema.messages import is_email


@pytest.fixture
def loose_id_schema(edit_invite_schema: Callable[[Callable[[Any], None]], None]) -> None:
    edit_invite_schema(lambda invite: invite["properties"]["id"].pop("pattern"))


@pytest.mark.usefixtures("loose_id_schema")
@pytest.mark.parametrize("ident", ["inv 1", "..", "inv/../admin", "x" * 129])
def test_an_id_the_edited_schema_lets_through_is_still_refused_at_the_id(ident: str) -> None:
    text = f"invites:\n  - name: Acme\n    id: {json.dumps(ident)}\n"
    invites, problems = load_text(text, "t.yaml")
    shown = repr(ident) if len(ident) <= 120 else repr(ident[:120])[:-1] + "…'"  # cut at 120
    assert [str(p) for p in problems] == [
        f"t.yaml:3:9: `id`: {shown} is not a valid inviteId "
        "(1 to 128 letters, digits, `_`, `-`, `.`, and not dots alone)"
    ]
    assert [i.id for i in invites] == [ident]  # kept, so duplicates are still found


@pytest.mark.usefixtures("loose_id_schema")
def test_a_valid_id_under_the_edited_schema_is_read_as_before() -> None:
    invites, problems = load_text("invites:\n  - id: inv_1\n    name: Acme\n", "t.yaml")
    assert problems == [] and [i.id for i in invites] == ["inv_1"]


@pytest.mark.parametrize(
    ("document", "valid"),
    [
        ({"invites": [None, None]}, True),  # a streamed list: placeholders for its entries
        ({"invites": []}, True),
        ({"invites": [], "x-templates": {"a": [1]}}, True),  # `x-` keys hold templates
        ({}, False),
        ({"invites": {}}, False),
        ({"invites": [], "defaults": {}}, False),
        ({"invites": [], "ax-": 1}, False),
        ([], False),
    ],
)
def test_the_file_level_check_says_yes_only_where_jsonschema_does(
    document: Any, valid: bool
) -> None:
    schema = invite_validators()
    assert schema.file_is_valid(document) is valid
    assert schema.file.is_valid(document) is valid


@pytest.mark.parametrize(
    "entry",
    [
        {"id": "inv_1", "email": "jane@example..com"},  # fastjsonschema's own pattern takes it
        {"id": "inv_1", "primaryContact": {"name": "Jane", "email": "jane@acme.test"}},
        {"id": "inv_1", "name": "x" * 201},  # the bound beside `"$ref": "#/$defs/line"`
        {"id": "inv_1", 1: "x"},  # a key that is not text
    ],
    ids=repr,
)
def test_the_entry_check_refuses_what_jsonschema_refuses(entry: dict[Any, Any]) -> None:
    schema = invite_validators()
    assert not schema.entry_is_valid(entry)
    assert not schema.entry.is_valid(entry)


def test_the_entry_check_fills_in_no_default() -> None:
    entry = {"id": "inv_1", "email": "jane@acme.example"}
    assert invite_validators().entry_is_valid(entry)
    assert entry == {"id": "inv_1", "email": "jane@acme.example"}  # no `resendOnChange: false`


def test_a_format_is_checked_by_the_function_jsonschema_is_given() -> None:
    assert conforms("email") is is_email
    assert [conforms("date")(v) for v in ("2026-11-25", "2026-13-45")] == [True, False]
    assert format_checker().conforms("2026-13-45", "date") is False


def test_a_file_without_problems_is_read_without_jsonschema() -> None:
    # jsonschema's import is a tenth of a plan's start-up: the quick checks answer for
    # valid files, and its validators are built only to word a problem.
    code = (
        "import sys\n"
        "from reconciler.desired.state import load_text\n"
        "invites, problems = load_text('invites:\\n  - id: inv_1\\n    name: Acme\\n"
        "    email: a@b.example\\n', 't.yaml')\n"
        "assert problems == [] and len(invites) == 1, problems\n"
        "print('jsonschema' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"


def test_every_format_says_yes_or_no_of_a_hostile_value_never_raises_nor_warns() -> None:
    # jsonschema's `regex` declares only re.error, but `re.compile` raises OverflowError
    # for `a{99999999999}` and warns (FutureWarning) of `[[a]`; whichever libraries are
    # installed, each format's check answers yes or no of any value.
    checker = format_checker()
    hostile = ["a{99999999999}", "[[a]", "(" * 100, "\ud800", "\x00", "9" * 400, "::" * 50]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        verdicts = {(f, v): checker.conforms(v, f) for f in checker.checkers for v in hostile}
    assert set(verdicts.values()) <= {True, False}
    assert verdicts["regex", "a{99999999999}"] is False
    assert verdicts["regex", "[[a]"] is True


def test_a_rule_the_quick_check_cannot_compile_is_still_held(
    edit_invite_schema: Callable[[Callable[[Any], None]], None],
) -> None:
    # fastjsonschema writes a pattern's `$` as `\Z`, inside a class too (`[^\Z]`, which re
    # refuses): then jsonschema judges every entry.
    edit_invite_schema(lambda invite: invite["properties"]["name"].update(pattern="^[^$]*$"))
    text = "invites:\n  - id: inv_1\n    name: A$B\n  - id: inv_2\n    name: Acme\n"
    problems = load_text(text, "t.yaml")[1]
    assert [str(p) for p in problems] == ["t.yaml:3:11: `name`: 'A$B' does not match `^[^$]*$`"]
