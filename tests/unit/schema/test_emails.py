"""One meaning of an e-mail address (email-validator's, for ASCII addresses), and the
same verdicts from the editors' engine (ajv 8 with ajv-formats, `format: email`) on the
address corpus in tests/data, except where the corpus says why they differ."""

from __future__ import annotations

import json
import re
import string
from pathlib import Path
from typing import Any

import pytest
from email_validator import EmailNotValidError, validate_email
from hypothesis import given
from hypothesis import strategies as st
from support.ajv import require_ajv

from reconciler.schema import emails
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


_LOCAL = st.text(string.ascii_letters + string.digits + ".+-_'!#", min_size=0, max_size=70)
_LABEL = st.text(string.ascii_lowercase + string.digits + "-", min_size=0, max_size=66)
_DOMAIN = st.lists(_LABEL, min_size=1, max_size=4).map(".".join)
_TLD = st.sampled_from(["example", "com", "test", "local", "co", "x", "123", "onion", "de"])


@given(local=_LOCAL, domain=_DOMAIN, tld=_TLD)
def test_the_quick_yes_is_never_more_lenient_than_email_validator(
    local: str, domain: str, tld: str
) -> None:
    address = f"{local}@{domain}.{tld}"
    if emails._quick_yes(address):
        try:
            validate_email(address, check_deliverability=False, allow_smtputf8=False, strict=True)
        except EmailNotValidError as error:
            pytest.fail(f"quick yes for {address!r}, which email-validator refuses: {error}")


# The quick yes as one pattern, as it was written before the domain was matched apart.
_ONE_PATTERN = re.compile(
    r"(?=[^@]{1,64}@)(?=.{3,254}\Z)"
    r"[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+(?:\.[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+)*"
    r"@(?=[^@]{1,253}\Z)(?!.*--)"
    r"(?:(?!-)[A-Za-z0-9-]{1,63}(?<!-)\.)+"
    r"(?!(?i:arpa|invalid|local|localhost|onion|test|home|corp)\Z)[A-Za-z]{2,63}",
    re.DOTALL,
)
_ANY = st.text(string.ascii_letters + string.digits + ".@-+\n é", max_size=80)


@given(local=_LOCAL, domain=_DOMAIN, tld=_TLD, other=_ANY)
def test_the_quick_yes_says_what_its_one_pattern_said(
    local: str, domain: str, tld: str, other: str
) -> None:
    for address in (f"{local}@{domain}.{tld}", other, f"{local}@{other}", f"{other}@{domain}.x"):
        # Twice: the second answer comes from what was remembered of the domain.
        expected = _ONE_PATTERN.fullmatch(address) is not None
        assert emails._quick_yes(address) is expected
        assert emails._quick_yes(address) is expected


@pytest.mark.parametrize(
    "address",
    ["a@" + "b" * 63 + ".com", "a" * 64 + "@b.com", "a" * 65 + "@b.com", "a@b--c.com", "a@b.c"],
)
def test_the_quick_yes_at_its_bounds(address: str) -> None:
    assert emails._quick_yes(address) is (_ONE_PATTERN.fullmatch(address) is not None)
    long = "a@" + ".".join(["b" * 60] * 4) + ".com"  # 250 characters of domain
    assert emails._quick_yes(long) is (_ONE_PATTERN.fullmatch(long) is not None)
