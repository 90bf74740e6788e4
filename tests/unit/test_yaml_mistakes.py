"""Mistakes people make writing YAML by hand, each shown where it is, with what to fix."""

from __future__ import annotations

import pytest

from reconciler.desired.state import load_text

ENTRY = "invites:\n  - id: inv_1\n"


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        pytest.param(
            ENTRY + "    name:Acme\n    email: a@b.example\n",
            "3:5: while scanning a simple key could not find expected ':' "
            "(a key needs a `:` after it)",
            id="no-space-after-colon: at the key, not the line after",
        ),
        pytest.param(
            ENTRY + "    name Acme\n  - id: inv_2\n",
            "3:5: while scanning a simple key could not find expected ':' "
            "(a key needs a `:` after it)",
            id="key-without-colon",
        ),
        pytest.param(
            ENTRY + "    name: Acme: Holdings\n",
            "3:15: mapping values are not allowed in this context "
            "(often a missing space after `:`, or a line indented wrongly)",
            id="colon-in-a-plain-value",
        ),
        pytest.param(
            ENTRY + "\tname: Acme\n",
            "3:1: a tab character here; YAML must be indented with spaces",
            id="tab",
        ),
        pytest.param(
            ENTRY + '    name: "Acme\n    email: a@b.example\n',
            "3:11: while scanning a quoted scalar found unexpected end of stream "
            "(a quote or bracket is not closed)",
            id="unclosed-quote: where it opens",
        ),
        pytest.param(
            ENTRY + "    groups: [emea, apac\n    email: a@b.example\n",
            "3:13: while parsing a flow sequence did not find expected ',' or ']' "
            "(a bracket is not closed, or two items lack a `,` between them)",
            id="unclosed-bracket: where it opens",
        ),
        pytest.param(
            ENTRY + "  name: Acme\n",
            "3:3: while parsing a block collection did not find expected '-' indicator "
            "(check the indentation: an entry's keys line up, and each entry starts with `- `)",
            id="key-out-of-its-entry",
        ),
    ],
)
def test_a_hand_writing_mistake_is_shown_where_it_is(text: str, shown: str) -> None:
    invites, problems = load_text(text, "team.yaml")
    assert invites == []
    assert [str(p) for p in problems] == [f"team.yaml:{shown}"]
