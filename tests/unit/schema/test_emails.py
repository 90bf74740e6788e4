"""One meaning of an e-mail address (email-validator's, for ASCII addresses), and the
same verdicts from the editors' engine (ajv 8 with ajv-formats, `format: email`) on the
address corpus in tests/data, except where the corpus says why they differ."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from support.ajv import require_ajv

from reconciler.schema.check import invite_schema
from reconciler.schema.emails import email_problem, is_email

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
