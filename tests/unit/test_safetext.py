"""Strings from outside are escaped and redacted before anyone sees them."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.cli import run_cli
from support.helpers import clean_env

from reconciler.safetext import Redactor, clean, escape, redact_strings


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ("plain ünïcödé name", "plain ünïcödé name"),
        ("title\x1b]0;PWNED\x07", "title\\x1b]0;PWNED\\x07"),
        ("two\nlines\r", "two\\nlines\\r"),
        ("c1\x9bcsi", "c1\\x9bcsi"),
        ("bidi\u202eevil", "bidi\\u202eevil"),
    ],
)
def test_escape_shows_control_characters_as_escapes(raw: str, shown: str) -> None:
    assert escape(raw) == shown


_HIDING = [
    "\U000e0049\U000e0047",  # tag characters: "IG" invisible on a terminal
    "\u2061",
    "\u2064",
    "\u180e",
    "\ufff9",
    "\ufffb",
    "\u115f",
    "\u3164",
    "\uffa0",
]


@pytest.mark.parametrize("hidden", _HIDING)
def test_escape_shows_characters_that_hide_text(hidden: str) -> None:
    shown = escape(f"Acme{hidden} Ltd")
    assert shown.isascii()
    assert shown.startswith("Acme\\") and shown.endswith(" Ltd")


def test_escape_keeps_joiners_scripts_and_emoji_need() -> None:
    family = "\U0001f468\u200d\U0001f469\u200c"
    assert escape(family) == family


def test_redactor_removes_secrets_longest_first_and_bearer_tokens() -> None:
    redactor = Redactor()
    redactor.register("abcdef")
    redactor.register("abcdef-longer")
    text = redactor.redact("form client_secret=abcdef-longer; Authorization: Bearer eyJ.x.y")
    assert "abcdef" not in text
    assert "eyJ" not in text
    assert text == "form client_secret=[redacted]; Authorization: Bearer [redacted]"


def test_redactor_ignores_empty_and_tiny_secrets() -> None:
    redactor = Redactor()
    redactor.register("")
    redactor.register("a")
    assert redactor.redact("a cat sat") == "a cat sat"


def test_clean_redacts_before_escaping() -> None:
    from reconciler.safetext import register_secret

    register_secret("sec\nret-value")
    assert clean("echo: sec\nret-value") == "echo: [redacted]"


# From test_untrusted_inputs.py: What an attacker found after the rebuild: each stays fixed.
def test_a_secret_echoed_in_any_case_or_html_escaped_is_redacted() -> None:
    redactor = Redactor()
    redactor.register("a&b<secret>")
    shown = redactor.redact("A&B<SECRET> and a&amp;b&lt;secret&gt;")
    assert shown == "[redacted] and [redacted]"


def test_every_string_of_a_document_is_redacted_keys_included(registered_secret: str) -> None:
    document = {"k": [registered_secret.upper(), {registered_secret: 1}], "n": 2}
    assert redact_strings(document) == {"k": ["[redacted]", {"[redacted]": 1}], "n": 2}


def test_control_characters_in_a_quoted_path_reach_no_terminal(tmp_path: Path) -> None:
    name = str(tmp_path / "a\x1b]0;PWNED\x07.yaml")
    result = run_cli("validate", "--config", name, cwd=tmp_path, env=clean_env())
    assert result.returncode == 1
    assert "\x1b" not in result.stderr and "\x07" not in result.stderr
    assert "a\\x1b]0;PWNED\\x07.yaml" in result.stderr


# From test_output_attacks.py: Attack findings on output: each stays fixed.
@pytest.mark.parametrize(
    ("char", "shown"),
    [
        ("\ud800", "\\ud800"),
        ("\udfff", "\\udfff"),
        ("\u200b", "\\u200b"),
        ("\u2060", "\\u2060"),
        ("\ufeff", "\\ufeff"),
        ("\xad", "\\xad"),
        ("\u061c", "\\u061c"),
    ],
)
def test_invisible_and_unencodable_characters_are_escaped(char: str, shown: str) -> None:
    assert escape(f"a{char}b") == f"a{shown}b"


def test_joiners_that_scripts_and_emoji_need_are_kept() -> None:
    for text in ("می\u200cخواهم", "👩\u200d💻"):
        assert escape(text) == text
