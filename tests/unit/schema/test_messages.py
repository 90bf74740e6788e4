"""Every kind of schema problem, worded in full: what a user reads for a hand-written
invite file or reconciler.yaml, at the line and column to fix."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from support.ajv import require_ajv

from reconciler.desired.state import load_text
from reconciler.errors import InputError
from reconciler.model.invite import RECONCILER_KEYS, updatable_fields
from reconciler.schema.check import invite_schema
from reconciler.schema.messages import email_problem, is_email
from reconciler.settings.config import load_settings

ENTRY = "invites:\n  - id: inv_1\n"
# "addOns, attachments, email, groups, id, name, phone, primaryContact, resendOnChange"
FIELDS = ", ".join(sorted([*RECONCILER_KEYS, *updatable_fields()]))

INVITE_FILES = {
    "unknown field, a near name": (
        ENTRY + "    nmae: Acme\n",
        ["3:5: unknown field `nmae`; did you mean `name`?"],
    ),
    "a field written with a capital": (
        "invites:\n  - Id: inv_1\n    name: Acme\n",
        [
            "2:5: invite is missing required field `id`",
            "2:5: unknown field `Id`; did you mean `id`?",
        ],
    ),
    "unknown field, nothing near": (
        ENTRY + "    zzz: 1\n",
        [f"3:5: unknown field `zzz`; allowed: {FIELDS}"],
    ),
    "an unknown field in the contact": (
        ENTRY + "    primaryContact: {name: Jane, mail: j@x.example}\n",
        [
            "3:5: `primaryContact` is missing required field `email`",
            "3:34: unknown field `mail`; did you mean `email`?",
        ],
    ),
    "an entry without an id": (
        "invites:\n  - name: Acme\n",
        ["2:5: invite is missing required field `id`"],
    ),
    "a file without invites": (
        "other: 1\n",
        [
            "1:1: file is missing required field `invites`",
            "1:1: unknown field `other`; allowed: invites, or a template under a key "
            "starting with `x-`",
        ],
    ),
    "a template under a key not starting with x-": (
        "_defaults: &d {groups: [emea]}\ninvites:\n  - id: inv_1\n    <<: *d\n",
        [
            "1:1: unknown field `_defaults`; allowed: invites, or a template under a key "
            "starting with `x-`"
        ],
    ),
    "invites left empty": (
        "invites:\n",
        ["1:9: `invites` is empty; list invites under it, or write `invites: []`"],
    ),
    "a field left empty": (
        ENTRY + "    name:\n",
        ["3:10: `name` is empty; give it a value or remove it"],
    ),
    "an entry that is not a mapping": (
        "invites:\n  - inv_1\n",
        ["2:5: each invite entry must be a mapping, not text (start each entry with `- id: ...`)"],
    ),
    "groups not a list": (  # the list meant, as issue 39 row 6 asks
        ENTRY + "    groups: emea\n",
        ["3:13: `groups` must be a list, not text; did you mean `[emea]`?"],
    ),
    "a list written as text with commas": (
        ENTRY + "    addOns: edd, sanctions-plus\n",
        ["3:13: `addOns` must be a list, not text; did you mean `[edd, sanctions-plus]`?"],
    ),
    "a list written as text that is no plain word": (
        ENTRY + '    attachments: "a: b"\n',
        [
            "3:18: `attachments` must be a list, not text; "
            "write a list as `[a, b]` or as lines starting with `- `"
        ],
    ),
    "a group YAML reads as a number": (
        ENTRY + "    groups: [emea, 5]\n",
        [
            "3:20: an item of `groups` must be text, but YAML reads 5 as a number; "
            'put it in quotes: "5"'
        ],
    ),
    "resendOnChange not a boolean": (
        ENTRY + "    resendOnChange: often\n",
        ["3:21: `resendOnChange` must be true or false or a list, not text"],
    ),
    "resendOnChange naming a field that does not exist": (
        ENTRY + "    resendOnChange: [emial, groups]\n",
        [
            "3:22: an item of `resendOnChange`: 'emial' is not a field of an invite; "
            "did you mean `email`?"
        ],
    ),
    "resendOnChange naming a reconciler key": (
        ENTRY + "    resendOnChange: [id]\n",
        [
            "3:22: an item of `resendOnChange`: 'id' is not a field of an invite; "
            f"allowed: {', '.join(updatable_fields())}"
        ],
    ),
    "resendOnChange as an empty list": (
        ENTRY + "    resendOnChange: []\n",
        ["3:21: `resendOnChange` must be a list of at least 1 item"],
    ),
    "a contact name that is a list": (
        ENTRY + "    primaryContact: {name: [Jane], email: j@x.example}\n",
        ["3:28: `primaryContact.name` must be text, not a list"],
    ),
    "an email that is not one": (
        ENTRY + "    email: not-an-email\n",
        ["3:12: `email`: 'not-an-email' is not a valid email address: it has no @-sign"],
    ),
    "a phone not in E.164": (
        ENTRY + '    phone: "020 7946 0000"\n',
        ["3:12: `phone`: '020 7946 0000' is not E.164 text such as \"+442079460000\""],
    ),
    "a name on two lines": (
        ENTRY + "    name: |\n      Acme\n      Ltd\n",
        [
            "3:11: `name`: 'Acme\\nLtd\\n' holds a line break; "
            "write the value on one line, plain or quoted"
        ],
    ),
    "a name with a tab": (
        ENTRY + '    name: "Acme\\tLtd"\n',
        ["3:11: `name`: 'Acme\\tLtd' holds a tab; use spaces"],
    ),
    "a name with a control character": (
        ENTRY + '    name: "Acme\\x07Ltd"\n',
        ["3:11: `name`: 'Acme\\x07Ltd' holds control character U+0007; remove it"],
    ),
    "an empty name": (ENTRY + '    name: ""\n', ["3:11: `name` must be at least 1 character"]),
    "a name too long": (
        ENTRY + "    name: " + "a" * 201 + "\n",
        ["3:11: `name` must be at most 200 characters"],
    ),
    "a group twice": (
        ENTRY + "    groups: [emea, emea]\n",
        ["3:13: `groups` lists the same item twice; it is a set"],
    ),
    "a value of exactly 120 characters is quoted whole": (
        ENTRY + "    email: " + "x" * 120 + "\n",
        ["3:12: `email`: '" + "x" * 120 + "' is not a valid email address: it has no @-sign"],
    ),
    "a value of 121 characters is quoted cut": (
        ENTRY + "    email: " + "x" * 121 + "\n",
        ["3:12: `email`: '" + "x" * 120 + "…' is not a valid email address: it has no @-sign"],
    ),
}


@pytest.mark.parametrize(("text", "shown"), INVITE_FILES.values(), ids=INVITE_FILES.keys())
def test_each_problem_in_an_invite_file_is_worded_in_full(text: str, shown: list[str]) -> None:
    assert [str(p) for p in load_text(text, "t.yaml")[1]] == [f"t.yaml:{s}" for s in shown]


CONFIG = {
    "scope: kyb:invites:read\nbase_ulr: https://x.example": (
        "2:1: unknown field `base_ulr`; did you mean `base_url`?"
    ),
    "field_names:\n  phon: phoneNumber": "2:3: unknown field `phon`; did you mean `phone`?",
    "base_url: https://x.example\nparallelism: many": (
        "2:14: `parallelism` must be a whole number, not text"
    ),
    "parallelism: 1000": "1:14: `parallelism` must be at most 256",
    "parallelism: 0": "1:14: `parallelism` must be at least 1",
    "timeout: 0": "1:10: `timeout` must be more than 0",
    "max_rate: 0": "1:11: `max_rate` must be more than 0",
    "retry_max_seconds: 1e10": "1:20: `retry_max_seconds` must be a number, not text",
    "token_auth_method: basic": (
        "1:20: `token_auth_method`: 'basic' is not allowed; allowed: client_secret_post, "
        "client_secret_basic"
    ),
    'paths: [invites, ""]': "1:18: an item of `paths` must be at least 1 character",
    "paths: 5": "1:8: `paths` must be text or a list, not a number",
    "paths: []": "1:8: `paths` must be a list of at least 1 item",
    "paths: [5]": (
        '1:9: an item of `paths` must be text, but YAML reads 5 as a number; put it in quotes: "5"'
    ),
    "max_changes: yes": "1:14: `max_changes` must be a whole number, not a boolean",
    "timeout: yes": "1:10: `timeout` must be a number, not a boolean",
    "field_names: 5": "1:14: `field_names` must be a mapping, not a number",
    "scope: 2024-01-02": (
        "1:8: `scope` must be text, but YAML reads 2024-01-02 as a date; "
        'put it in quotes: "2024-01-02"'
    ),
    'paths: [5, ""]': (  # two problems in the list: the first is told
        '1:9: an item of `paths` must be text, but YAML reads 5 as a number; put it in quotes: "5"'
    ),
    "max_attempts: 1.5": "1:15: `max_attempts` must be a whole number, not 1.5",
    "max_changes: 100000.5": "1:14: `max_changes` must be a whole number, not 100000.5",
    "retry_max_seconds: -1": "1:20: `retry_max_seconds` must be at least 0",
    "base_url: ftp://kyb.example": (
        "1:11: `base_url`: 'ftp://kyb.example' does not match `^https?://\\S+$(?!\\n)`"
    ),
    "field_names: {name: 5}": (
        '1:21: `field_names.name` must be text, but YAML reads 5 as a number; put it in quotes: "5"'
    ),
}


@pytest.mark.parametrize(("line", "shown"), CONFIG.items(), ids=CONFIG.keys())
def test_each_problem_in_the_config_file_is_worded_in_full(
    tmp_path: Path, line: str, shown: str
) -> None:
    config = tmp_path / "reconciler.yaml"
    config.write_text(f"{line}\n", encoding="utf-8")
    with pytest.raises(InputError) as caught:
        load_settings(str(config), env={})
    assert str(caught.value) == f"{config}:{shown}"


def enum_groups(invite: dict[str, Any]) -> None:
    invite["properties"]["groups"] = {"type": "array", "items": {"enum": ["emea", "apac"]}}


def name_or_nothing(invite: dict[str, Any]) -> None:
    invite["properties"]["name"] = {"type": ["string", "null"]}


def name_a_date(invite: dict[str, Any]) -> None:
    invite["properties"]["name"] = {"type": "string", "format": "date"}


EDITS = {
    # A team's edits to the invite schema: the message still names the rule.
    "groups from a fixed list": (
        enum_groups,
        "    groups: [emea, latam]\n",
        "3:20: an item of `groups`: 'latam' is not allowed; allowed: emea, apac",
    ),
    "a name that may be left empty": (
        name_or_nothing,
        "    name: 5\n",
        "3:11: `name` must be text or empty, not a number",
    ),
    "a name that must be a date": (
        name_a_date,
        "    name: Acme\n",
        "3:11: `name`: 'Acme' is not a valid date",
    ),
}


@pytest.mark.parametrize(("edit", "entry", "shown"), EDITS.values(), ids=EDITS.keys())
def test_a_rule_edited_into_the_schema_is_worded_too(
    edit_invite_schema: Callable[[Callable[[dict[str, Any]], None]], None],
    edit: Callable[[dict[str, Any]], None],
    entry: str,
    shown: str,
) -> None:
    edit_invite_schema(edit)
    problems = load_text(ENTRY + entry, "t.yaml")[1]
    assert [str(p) for p in problems] == [f"t.yaml:{shown}"]


def test_a_rule_edited_into_the_files_top_level_names_the_document(
    edit_invite_schema: Callable[..., None],
) -> None:
    edit_invite_schema(lambda whole: whole.update(maxProperties=1), at=())
    problems = load_text("x-defaults: {}\n" + ENTRY, "t.yaml")[1]
    assert [str(p) for p in problems] == [
        "t.yaml:1:1: `document` does not meet the schema rule `maxProperties: 1`"
    ]


# From test_schema_messages.py:
# Schema messages name a field by its path in the entry (the full wording of every
# kind of problem is in test_schema_message_wording.py).
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


# One meaning of an e-mail address (email-validator's, for ASCII addresses), and the same verdicts
# from the editors' engine (ajv 8 with ajv-formats, `format: email`) on the address corpus in
# tests/data, except where the corpus says why they differ.

CORPUS: list[dict[str, Any]] = json.loads(
    (Path(__file__).parents[2] / "data" / "email_addresses.json").read_text(encoding="utf-8")
)["addresses"]


@pytest.mark.parametrize("case", CORPUS, ids=lambda c: repr(c["address"])[:50])
def test_the_tool_gives_the_corpus_verdict(case: dict[str, Any]) -> None:
    assert (email_problem(case["address"]) is None) is case["valid"]


def test_the_editors_engine_gives_the_same_verdicts_but_where_the_corpus_says_why() -> None:
    ajv = require_ajv()
    schema = invite_schema()["$defs"]["email"]
    verdicts = ajv.verdicts(schema, [case["address"] for case in CORPUS])
    expected = [case.get("ajv", case["valid"]) for case in CORPUS]
    assert verdicts == expected
    assert all("why" in case for case in CORPUS if "ajv" in case)


def test_the_schema_says_format_email_and_the_corpus_covers_both_sides() -> None:
    assert invite_schema()["$defs"]["email"]["format"] == "email"
    assert {case["valid"] for case in CORPUS} == {True, False}


def test_a_refusal_says_why_in_email_validators_words() -> None:
    assert "two periods" in (email_problem("jane@example..com") or "")
    assert "international" in (email_problem("jane@münchen.example") or "")
    assert "xn--" in (email_problem("jane@münchen.example") or "")
    assert not is_email("jane@acme.example\n")
    assert is_email(None)  # not text: the schema's `type` says so, not the format
