"""Policies' patterns on RE2: the yes-or-no of ``re2_finds`` is what google-re2's search
says, for anchored, grouped, Unicode and empty patterns alike."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reconciler.schema.re2pattern import re2_compiled, re2_finds

PATTERNS = [
    "",
    "^inv_",
    "_$",
    "@(gmail|yahoo|outlook|hotmail)\\.",
    "^[a-z]+$",
    "(?i)ACME",
    "é+",
    "\\bab\\b",
    "^$",
    "a|^b",
    "(a)(b)?c",
]
_TEXT = st.lists(st.sampled_from(["a", "b", "c", "A", "_", "é", "@", ".", " ", "\n", "inv"]))


@pytest.mark.parametrize("pattern", PATTERNS)
@given(text=_TEXT.map("".join))
def test_finds_says_what_search_says(pattern: str, text: str) -> None:
    assert re2_finds(pattern)(text) is (re2_compiled(pattern).search(text) is not None)


@pytest.mark.parametrize(
    ("pattern", "text", "found"),
    [("^inv_", "inv_1", True), ("^inv_", "xinv_1", False), ("a$", "ba\n", False), ("", "", True)],
)
def test_finds_at_the_edges(pattern: str, text: str, found: bool) -> None:
    assert re2_finds(pattern)(text) is found
