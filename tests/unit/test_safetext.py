"""Strings from outside are escaped and redacted before anyone sees them."""

from __future__ import annotations

import pytest

from reconciler.safetext import Redactor, clean, escape


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
