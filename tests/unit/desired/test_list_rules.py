"""A rule on the `invites` list itself, edited into the invite schema, is judged on the
list as written: a streamed list (empty in the document, its entries handed over one at
a time) and one that came whole through a merge or an alias give the same verdict."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from reconciler.desired.state import load_text
from reconciler.errors import ReconcilerError
from reconciler.yamlload.builder import Lines
from reconciler.yamlload.source import stream

EditSchema = Callable[..., None]
ON_THE_LIST = ("properties", "invites")


def _entries(count: int, indent: str) -> str:
    if not count:
        return " []\n"
    return "".join(f"\n{indent}- {{id: inv_{n}, name: Acme {n}}}" for n in range(count)) + "\n"


# Each layout of a file holding `count` invites, and whether its list is streamed.
LAYOUTS: dict[str, tuple[Callable[[int], str], bool]] = {
    "streamed": (lambda count: "invites:" + _entries(count, "  "), True),
    "merged": (lambda count: "<<:\n  invites:" + _entries(count, "    "), False),
    # The key written after the merge wins, and its value is an alias: never a list opening.
    "aliased": (
        lambda count: "<<:\n  invites: &all" + _entries(count, "    ") + "invites: *all\n",
        False,
    ),
}


def _verdict(text: str) -> tuple[int, list[str]]:
    """The invites read, and the problems without their place (which differs by layout)."""
    invites, problems = load_text(text, "t.yaml")
    return len(invites), [p.message for p in problems]


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("count", [0, 1, 3])
def test_each_layout_is_read_as_it_claims(layout: str, count: int) -> None:
    # The point of the layouts: the same invites, streamed or not.
    write, streamed = LAYOUTS[layout]
    text = write(count)
    seen: list[int] = []
    document, problems = stream(
        text, "t.yaml", Lines(text), "invites", lambda index, *_: seen.append(index)
    )
    assert problems == [] and document is not None and seen == list(range(count))
    kept = document.value["invites"]
    assert kept == [None] * count if streamed else len(kept) == count and None not in kept
    assert _verdict(text) == (count, [])  # the shipped schema sets no rule on the list


RULES = {
    # the rule edited in; invites in a file it accepts, in one it refuses; what is said
    "minItems 1": ({"minItems": 1}, 1, 0, "`invites` must be a list of at least 1 item"),
    "maxItems 1": ({"maxItems": 1}, 1, 3, "`invites` must be a list of at most 1 item"),
    "minItems 2": ({"minItems": 2}, 3, 1, "`invites` must be a list of at least 2 items"),
}


@pytest.mark.parametrize(("rule", "accepted", "refused", "said"), RULES.values(), ids=RULES)
def test_a_list_rule_edited_into_the_schema_is_judged_alike_streamed_or_not(
    edit_invite_schema: EditSchema, rule: dict[str, int], accepted: int, refused: int, said: str
) -> None:
    edit_invite_schema(lambda invites: invites.update(rule), at=ON_THE_LIST)
    for layout, (write, _) in LAYOUTS.items():
        assert _verdict(write(accepted)) == (accepted, []), layout
        assert _verdict(write(refused)) == (refused, [said]), layout


def test_a_refused_list_is_placed_at_the_list_as_written(edit_invite_schema: EditSchema) -> None:
    edit_invite_schema(lambda invites: invites.update(maxItems=1), at=ON_THE_LIST)
    streamed = LAYOUTS["streamed"][0](3)
    problems = load_text(streamed, "t.yaml")[1]
    assert [str(p) for p in problems] == ["t.yaml:2:3: `invites` must be a list of at most 1 item"]


@pytest.mark.parametrize(
    ("change", "named"),
    [
        (lambda invites: invites.update(uniqueItems=True), "the rule `uniqueItems`"),
        (
            lambda invites: invites.update(allOf=[{"contains": {"type": "object"}}]),
            "the rule `contains`",
        ),
        (
            lambda invites: invites.update(minContains=1, prefixItems=[{"type": "object"}]),
            "the rules `minContains`, `prefixItems`",
        ),
    ],
)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_a_list_rule_that_needs_the_entries_together_is_refused_with_the_schema(
    edit_invite_schema: EditSchema,
    change: Callable[[dict[str, Any]], None],
    named: str,
    layout: str,
) -> None:
    # Entries are dropped once checked, so such a rule could only be judged on a
    # list built whole: refused, rather than passed for one layout and not another.
    edit_invite_schema(change, at=ON_THE_LIST)
    with pytest.raises(ReconcilerError) as refused:
        load_text(LAYOUTS[layout][0](1), "t.yaml")
    message = str(refused.value)
    assert message.endswith(
        f"invites.schema.json: the `invites` list has {named}, which would need a file's "
        "entries all at once, but entries are checked one at a time as they are read; "
        "on the list itself only `minItems` and `maxItems` can be used"
    )
