"""Values of an invite file replaced in place: the style kept, nothing else touched."""

from __future__ import annotations

import json
import unicodedata
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.values import held

from reconciler.desired.rewrite import (
    NO_VALUE,
    SHARED,
    Span,
    Wanted,
    cut_lines,
    entry_lines,
    invite_spans,
    rewrite,
)
from reconciler.desired.state import CANNOT_HOLD, load_text
from reconciler.model.invite import Contact, FieldValue


def wanted(text: str, invite_id: str, remove: str | None = None, **fields: Any) -> Wanted:
    """What the entry ``invite_id`` of ``text`` should say: ``fields`` from the platform."""
    (invite,) = [i for i in load_text(text, "f.yaml")[0] if i.id == invite_id]
    source = invite.source
    written = {name: invite.fields[name] for name in fields if name in invite.fields}
    return Wanted(invite_id, source.line, source.column, held(fields), written, remove)


ODD_LAYOUT = "it is written in a layout adopt does not edit"


def read(text: str) -> dict[str, dict[str, Any]]:
    invites, problems = load_text(text, "f.yaml")
    assert problems == []
    return {i.id: i.fields for i in invites}


COMMENTED = """\
# yaml-language-server: $schema=../schemas/invites.schema.json
# Our invites.
invites:
  # The big one.
  - id: inv_a
    name: Acme Holdings Ltd   # legal name
    email: 'old@acme.example'
    phone: "+442079460000"
    primaryContact: {name: Jane Doe, email: jane@acme.example}
    groups: [emea,  enterprise]   # spacing as typed

  - id: inv_b
    name: "Beta"
    attachments:
      - proof-of-address   # the scan
      - certificate-of-incorporation
"""


def test_a_scalar_is_replaced_in_its_quoting_and_nothing_else_moves() -> None:
    done = rewrite(COMMENTED, [wanted(COMMENTED, "inv_a", email="new@acme.example")])
    assert done.text == COMMENTED.replace("'old@acme.example'", "'new@acme.example'")
    assert [(e.line, e.id, e.field, e.old, e.new) for e in done.edits] == [
        (7, "inv_a", "email", "old@acme.example", "new@acme.example")
    ]


def test_a_sub_field_of_a_flow_mapping_is_edited_alone() -> None:
    contact = {"name": "Jane Roe", "email": "jane@acme.example", "phone": "+1"}
    done = rewrite(COMMENTED, [wanted(COMMENTED, "inv_a", primaryContact=contact)])
    assert "    primaryContact: {name: Jane Roe, email: jane@acme.example}\n" in done.text
    assert [(e.line, e.id, e.field, e.old, e.new) for e in done.edits] == [
        (9, "inv_a", "primaryContact.name", "Jane Doe", "Jane Roe")
    ]


def test_a_sub_field_the_platform_holds_no_value_for_or_of_another_layout_is_refused() -> None:
    text = (
        "invites:\n"
        "  - id: inv_a\n"
        "    primaryContact:\n"
        "      name: Jane Doe\n"
        "      email: [jane@acme.example]\n"
        "      phone: '+1'\n"
    )
    entry = Wanted(
        "inv_a",
        2,
        5,
        held({"primaryContact": {"name": "Jane Roe", "email": "j@acme.example"}}),
        {"primaryContact": Contact({"name": "Jane Doe", "email": "e", "phone": "+1"})},
    )
    done = rewrite(text, [entry])
    assert [(r.line, r.id, r.field, r.new, r.reason) for r in done.refused] == [
        (5, "inv_a", "primaryContact.email", "j@acme.example", ODD_LAYOUT),
        (6, "inv_a", "primaryContact.phone", None, NO_VALUE),
    ]
    assert [(e.line, e.id, e.field, e.new) for e in done.edits] == [
        (4, "inv_a", "primaryContact.name", "Jane Roe")
    ]
    assert done.text == text.replace("Jane Doe", "Jane Roe")


def test_a_flow_set_keeps_its_items_in_order_and_adds_the_new_ones_sorted() -> None:
    done = rewrite(COMMENTED, [wanted(COMMENTED, "inv_a", groups=["zeta", "emea", "alpha"])])
    assert "    groups: [emea, alpha, zeta]   # spacing as typed\n" in done.text


def test_a_block_set_loses_the_lines_of_removed_items_and_gains_lines_for_new_ones() -> None:
    new = ["certificate-of-incorporation", "ubo-declaration"]
    done = rewrite(COMMENTED, [wanted(COMMENTED, "inv_b", attachments=new)])
    # The removed item's comment stays, on a line of its own (issue 37 row 4).
    assert done.text.endswith(
        "    attachments:\n      # the scan\n      - certificate-of-incorporation\n"
        "      - ubo-declaration\n"
    )
    assert read(done.text)["inv_b"]["attachments"] == new


def test_a_block_set_emptied_becomes_an_empty_flow_list() -> None:
    done = rewrite(COMMENTED, [wanted(COMMENTED, "inv_b", attachments=[])])
    assert done.text.endswith('    name: "Beta"\n    attachments: []\n      # the scan\n')
    assert read(done.text)["inv_b"]["attachments"] == []


ALIASED = """\
invites:
  - id: inv_a
    name: Alpha
    groups: &shared [emea]
    primaryContact: &contact
      name: Jane Doe
  - id: inv_b
    <<: {email: b@example.com}
    groups: *shared
    primaryContact: *contact
"""


@pytest.mark.parametrize(
    ("invite_id", "fields", "label", "line", "new"),
    [
        ("inv_a", {"groups": ["apac"]}, "groups", 4, ["apac"]),  # the anchor's own place
        ("inv_b", {"groups": ["apac"]}, "groups", 9, ["apac"]),  # the alias
        ("inv_b", {"email": "c@example.com"}, "email", 7, "c@example.com"),  # a merge: the entry
        # Inside an anchor, and through its alias: the sub-field's own line.
        ("inv_a", {"primaryContact": {"name": "Jo"}}, "primaryContact.name", 6, "Jo"),
        ("inv_b", {"primaryContact": {"name": "Jo"}}, "primaryContact.name", 10, "Jo"),
    ],
)
def test_a_shared_value_is_refused_and_left_as_written(
    invite_id: str, fields: dict[str, Any], label: str, line: int, new: Any
) -> None:
    done = rewrite(ALIASED, [wanted(ALIASED, invite_id, **fields)])
    assert done.text == ALIASED
    assert [(r.line, r.id, r.field, r.new, r.reason) for r in done.refused] == [
        (line, invite_id, label, new, SHARED)
    ]
    assert done.edits == []


def _line_breaks(make: Any) -> list[Any]:
    """``make(newline, brk, layout)`` for each file line end, line break of YAML's own
    besides it (a lone CR, NEL, LS), and layout."""
    return [
        pytest.param(*make(nl, brk, layout), id=f"{layout}-{brk_id}-{nl_id}")
        for nl, nl_id in (("\n", "lf"), ("\r\n", "crlf"))
        for brk, brk_id in (("\r", "cr"), ("\x85", "nel"), ("\u2028", "ls"))
        for layout in ("own-line", "after-the-one-above")
    ]


CONTACT = "invites:\n  - id: inv_a\n    primaryContact:\n      name: Zoë Ådahl\n"
DASH_COMMENT = (
    "invites:\n  - id: inv_a\n    attachments:\n      - # the scan, see ticket 12\n"
    "        proof-of-address\n      - certificate-of-incorporation\n"
)
PAPERS_LEFT = ["certificate-of-incorporation", "ubo-declaration"]
OPS = (
    "invites:\n  - id: inv_a\n    primaryContact:\n      name: Jane Doe\n"
    "      email: &ops ops@acme.example\n  - id: inv_b\n    email: *ops\n"
)
REGION = (
    "invites:\n  - id: inv_a\n    groups: [&region dach, emea]\n"
    "  - id: inv_b\n    groups: [*region]\n"
)
# YAML ends the item's line at the lone CR (NEL, LS): the comment after it is a line of its own,
# which removing the item up to the line feed would take with it.
BREAK_BEFORE_COMMENT = _line_breaks(
    lambda nl, brk, _: (
        f"invites:{nl}  - id: inv_a{nl}    groups:{nl}      - emea   {brk}  # Zürich office{nl}"
        f"      - dach{nl}",
        "inv_a",
        None,
        {"groups": ["dach"]},
        [(4, "inv_a", "groups", ["dach"], ODD_LAYOUT)],
    )
)
# adopt --prune-not-pending: YAML begins inv_b's line at the lone CR (NEL, LS), an entry's lines
# are found by LF: inv_b is left for the author, not cut by lines counted two ways (after inv_a's
# name, its line by LF is inv_a's too, and would go with it).
ENTRY_AFTER_BREAK = _line_breaks(
    lambda nl, brk, layout: (
        f"invites:{nl}  - id: inv_a{nl}    name: Zoë Ltd{nl + brk if layout == 'own-line' else brk}"
        f"  - id: inv_b{nl}    name: B{nl}",
        "inv_b",
        "accepted",
        {},
        [(5 if layout == "own-line" else 4, "inv_b", None, "accepted", ODD_LAYOUT)],
    )
)
# YAML begins dach's line at the lone CR (NEL, LS), the list's lines are found by LF: the list is
# not edited (here, an item added after dach's line) but left as written.
ITEM_AFTER_BREAK = _line_breaks(
    lambda nl, brk, layout: (
        "invites:\n  - id: inv_a\n    groups:\n      - emea"
        f"{nl + brk if layout == 'own-line' else brk}      - dach\n",
        "inv_a",
        None,
        {"groups": ["emea", "dach", "apac"]},
        [(4, "inv_a", "groups", ["emea", "dach", "apac"], ODD_LAYOUT)],
    )
)

# (the file, the entry, its removal's status or None, the platform's fields, what is refused):
# the file is left as it was, nothing edited or removed.
REFUSED = [
    pytest.param(
        COMMENTED, "inv_a", None, {"phone": None}, [(8, "inv_a", "phone", None, NO_VALUE)],
        id="a-field-the-platform-holds-no-value-for",
    ),
    pytest.param(
        "invites: [{id: inv_a}, {id: inv_b}]\n", "inv_a", "accepted", {},
        [(1, "inv_a", None, "accepted", ODD_LAYOUT)],
        id="an-entry-of-a-flow-list-is-not-removed",
    ),
    pytest.param(
        "invites:\n  - &e\n    id: inv_a\n    name: A\n", "inv_a", None, {"name": "B"},
        [(2, "inv_a", "name", "B", SHARED)],
        id="an-entry-under-an-anchor-whole",
    ),
    pytest.param(
        "invites:\n  - &e\n    id: inv_a\n    primaryContact: {name: A, email: a@x.example}\n",
        "inv_a", None, {"primaryContact": {"name": "B", "email": "a@x.example"}},
        [(2, "inv_a", "primaryContact.name", "B", SHARED)],
        id="a-contact-of-an-entry-under-an-anchor-sub-field-by-sub-field",
    ),
    pytest.param(  # the comment is never lost: the author edits the list
        DASH_COMMENT, "inv_a", None, {"attachments": PAPERS_LEFT},
        [(4, "inv_a", "attachments", PAPERS_LEFT, ODD_LAYOUT)],
        id="a-comment-between-an-items-dash-and-the-item",
    ),
    pytest.param(
        CONTACT + "      email: zoe@adahl.example\n", "inv_a", None, {"primaryContact": None},
        [
            (4, "inv_a", "primaryContact.name", None, NO_VALUE),
            (5, "inv_a", "primaryContact.email", None, NO_VALUE),
        ],
        id="a-contact-the-platform-no-longer-holds-sub-field-by-sub-field",
    ),
    pytest.param(  # the team's address, written once and read by another entry's alias
        OPS, "inv_a", None, {"primaryContact": {"name": "Jane Doe", "email": "jane@acme.example"}},
        [(5, "inv_a", "primaryContact.email", "jane@acme.example", SHARED)],
        id="a-sub-field-under-an-anchor-of-its-own",
    ),
    pytest.param(  # the anchor kept: inv_b still reads dach
        REGION, "inv_a", None, {"groups": ["dach", "emea", "apac"]},
        [(3, "inv_a", "groups", ["dach", "emea", "apac"], ODD_LAYOUT)],
        id="a-list-with-an-item-under-an-anchor",
    ),
    *BREAK_BEFORE_COMMENT[::2],  # the item's layout is one
    *ENTRY_AFTER_BREAK,
    *(p for p in ITEM_AFTER_BREAK if "crlf" not in p.id),  # the list's lines are LF's
]  # fmt: skip


@pytest.mark.parametrize(("text", "invite_id", "remove", "fields", "refused"), REFUSED)
def test_what_adopt_refuses_is_left_as_written(
    text: str, invite_id: str, remove: str | None, fields: dict[str, Any], refused: list[Any]
) -> None:
    assert invite_id in read(text)  # the loader takes the file: adopt gets there
    done = rewrite(text, [wanted(text, invite_id, remove, **fields)])
    assert done.text == text
    assert done.edits == [] and done.removed == []
    assert [(r.line, r.id, r.field, r.new, r.reason) for r in done.refused] == refused


def test_a_value_written_in_a_layout_adopt_does_not_edit_is_refused() -> None:
    text = "invites:\n  - id: inv_a\n    name: [x]\n"
    done = rewrite(text, [Wanted("inv_a", 2, 5, held({"name": "B"}), {"name": "x"})])
    assert done.text == text
    assert [(r.line, r.id, r.field, r.new, r.reason) for r in done.refused] == [
        (3, "inv_a", "name", "B", ODD_LAYOUT)
    ]


SPACED = """\
# Our invites.
invites:
  - id: inv_x
    name: X

  # About a.
  - id: inv_a
    name: A

  - id: inv_b
    name: B


  # About c.
  - id: inv_c
    name: C
"""
HEAD = "# Our invites.\ninvites:\n"
X, B = "  - id: inv_x\n    name: X\n", "  - id: inv_b\n    name: B\n"
A, C = "  # About a.\n  - id: inv_a\n    name: A\n", "  # About c.\n  - id: inv_c\n    name: C\n"
# No blank line between a and b, blank lines around them.
CLOSE = "invites:\n  - id: inv_x\n\n  - id: inv_a\n  - id: inv_b\n\n  - id: inv_c\n"
XA, AB = "  - id: inv_x\n\n  - id: inv_a\n", "  - id: inv_a\n  - id: inv_b\n\n"
BC = "  - id: inv_b\n\n  - id: inv_c\n"


@pytest.mark.parametrize("ending", ["\n", "\r\n"])
@pytest.mark.parametrize(
    ("text", "ids", "expected"),
    [
        # The last two, blank lines between them (issue 40): both go, and the blank line
        # before them, as when the last entry alone goes; asked for in any order.
        pytest.param(SPACED, ["inv_b", "inv_c"], HEAD + X + "\n" + A, id="last-two"),
        pytest.param(SPACED, ["inv_c", "inv_b"], HEAD + X + "\n" + A, id="last-two-reversed"),
        pytest.param(SPACED, ["inv_a", "inv_b", "inv_c"], HEAD + X, id="all-but-the-first"),
        # Two next to each other in the middle: the blank lines after them go.
        pytest.param(SPACED, ["inv_a", "inv_b"], HEAD + X + "\n" + C, id="two-in-the-middle"),
        pytest.param(SPACED, ["inv_x", "inv_a"], HEAD + B + "\n\n" + C, id="the-first-two"),
        # Apart: each goes as it would alone.
        pytest.param(SPACED, ["inv_a", "inv_c"], HEAD + X + "\n" + B, id="apart"),
        pytest.param(SPACED, ["inv_x", "inv_c"], HEAD + A + "\n" + B, id="first-and-last"),
        pytest.param(SPACED, ["inv_c", "inv_a", "inv_x", "inv_b"], HEAD[:-1] + " []\n", id="all"),
        # No blank line between the two: the blank lines around them stay one.
        pytest.param(CLOSE, ["inv_a", "inv_b"], CLOSE.replace(AB, ""), id="close-in-the-middle"),
        pytest.param(CLOSE, ["inv_b", "inv_c"], CLOSE.replace(BC, ""), id="close-last-two"),
        pytest.param(CLOSE, ["inv_x", "inv_a"], CLOSE.replace(XA, ""), id="close-first-two"),
    ],
)
def test_entries_removed_next_to_each_other_go_as_one_leaving_the_blank_lines_as_written(
    text: str, ids: list[str], expected: str, ending: str
) -> None:
    text, expected = text.replace("\n", ending), expected.replace("\n", ending)
    done = rewrite(text, [wanted(text, i, remove="accepted") for i in ids])
    assert done.text == expected
    assert sorted(e.id for e in done.removed) == sorted(ids)
    assert done.refused == []
    assert read(done.text).keys() == read(text).keys() - set(ids)


def test_every_entry_removed_keeps_the_comments_that_are_no_entrys_and_the_key_found() -> None:
    text = (
        "invites:   # ours: reviewed weekly\n"
        "  # Wave 1: the first to go.\n"  # inv_a's own comment, with a colon
        "  - id: inv_a\n"
        "\n"
        "  # Wave 2.\n"  # the comment of no entry (a blank line below it)
        "\n"
        "  - id: inv_b\n"
    )
    done = rewrite(text, [wanted(text, i, remove="accepted") for i in ("inv_a", "inv_b")])
    assert done.text == "invites: []   # ours: reviewed weekly\n  # Wave 2.\n"
    assert read(done.text) == {}


@settings(max_examples=100, deadline=None)
@given(st.text(min_size=1, max_size=30).filter(lambda s: "\x00" not in s))
def test_any_text_written_reads_back_as_itself_or_is_refused(new: str) -> None:
    done = rewrite(COMMENTED, [wanted(COMMENTED, "inv_a", name=new)])
    invites, problems = load_text(done.text, "f.yaml")
    assert problems == []  # never a value the files may not hold (a line break, a tab)
    name = {i.id: i.fields.get("name") for i in invites}["inv_a"]
    if done.refused:
        assert done.refused[0].reason.startswith(CANNOT_HOLD) and done.text == COMMENTED
        return
    # The loader reads text in NFC (one normal form): "\U0002f800" reads as "\u4e3d".
    assert name == unicodedata.normalize("NFC", new)
    assert done.text.splitlines()[6:] == COMMENTED.splitlines()[6:]


def test_a_file_with_windows_line_breaks_keeps_them() -> None:
    text = COMMENTED.replace("\n", "\r\n")
    new = ["proof-of-address", "certificate-of-incorporation", "ubo-declaration"]
    done = rewrite(text, [wanted(text, "inv_b", attachments=new, name="Beta AG")])
    assert done.text == text.replace('"Beta"', '"Beta AG"') + "      - ubo-declaration\r\n"


# -- issue 37 row 4: comments, line ends and plain scalars kept ------------------------------------

LISTS = """\
invites:
  - id: inv_a
    attachments:   # the list
      - a   # first

      # between
      - b   # bee
    # after the list
    groups: [x,   # one
      y]  # flow's end
    name: Old
  - id: inv_b
    name: Beta
"""


@pytest.mark.parametrize("attachments", [[], ["a"], ["b"], ["a", "b", "c"], ["c"]])
def test_comments_in_and_after_a_block_list_survive_any_edit_of_it(
    attachments: list[str],
) -> None:
    done = rewrite(LISTS, [wanted(LISTS, "inv_a", attachments=attachments)])
    assert done.refused == []
    for comment in ("# the list", "# first", "# between", "# bee", "# after the list", "# one"):
        assert done.text.count(comment) == 1, comment
    assert read(done.text)["inv_a"]["attachments"] == attachments
    # Everything from the comment after the list on: byte for byte.
    assert done.text.endswith(LISTS[LISTS.index("    # after the list") :])


def test_a_flow_list_with_comments_gains_items_in_place_and_a_removal_is_left_to_the_author() -> (
    None
):
    added = rewrite(LISTS, [wanted(LISTS, "inv_a", groups=["x", "y", "z"])])
    assert added.text == LISTS.replace("      y]  # flow's end", "      y, z]  # flow's end")
    removed = rewrite(LISTS, [wanted(LISTS, "inv_a", groups=["x"])])
    assert removed.text == LISTS  # never a comment lost: refused, for the author to edit
    assert [(r.line, r.field) for r in removed.refused] == [(9, "groups")]


def block_list(*items: str) -> str:
    return "".join(f"      - {item}\n" for item in items)


NAMED = "invites:\n  - id: inv_a\n    name: Old   # legal name\n"
BLOCK = "invites:\n  - id: inv_a\n    name: |-\n      Old\n    email: a@b.example\n"
FOLDED = (
    "invites:\n  - id: inv_a\n    name: >\n      Müller Bau\n      GmbH\n"
    "    email: einkauf@mueller-bau.example\n"
)
FLOW = 'invites:\n  - id: inv_a\n    groups: ["Zürich, Süd", \'emea\', apac, "amer"]\n'
ATTACHED = "invites:\n  - id: inv_a\n    attachments:\n{}    name: Müller GmbH\n"
PAPERS = ["proof-of-address", "certificate-of-incorporation", "ubo-declaration", "bank"]


BLANK_AFTER = (
    "invites:\n  - id: inv_a\n    name: {}\n      Acme Holdings Ltd\n\n"
    "  - id: inv_b\n    name: Beta Ltd\n"
)
GROUPS = "invites:\n  - id: inv_a\n    groups:\n{}"
HEADERS = (
    "invites:\n  - id: inv_a\n    name: Müller | Söhne > Co  # a | b\n    groups:\n      - emea\n"
    "{}      - amer\n  - id: inv_b\n    name: Ärzte | Zahnärzte > Praxis  # c | d\n"
)


PLAIN = ["Acme Group plc", "Acme, Inc.", "Acme [UK] Ltd", "Braces {and} all", "a#b", "a:b",
         "O'Brien & Co"]  # fmt: skip
# Quoted only where plain would read otherwise: NO reads as false, 12:30 as a number, a `#`
# after a space starts a comment.
QUOTED = ["a: b", "a #b", "yes", "12", "-x", " padded", "[x]", "NO", "12:30", "#1 Ltd", "-dash",
          "trailing "]  # fmt: skip
# (the file, the fields the platform holds, the file after): only the value changes, in
# the style it was written in where YAML reads it back as the same value.
EDITS = [
    *(
        pytest.param(NAMED, {"name": v}, NAMED.replace("Old", v), id=f"stays-plain-{v}")
        for v in PLAIN
    ),
    *(
        pytest.param(NAMED, {"name": v}, NAMED.replace("Old", json.dumps(v)), id=f"quoted-{v}")
        for v in QUOTED
    ),
    pytest.param(BLOCK, {"name": "New"}, BLOCK.replace("|-\n      Old\n", '"New"\n'), id="block"),
    pytest.param(
        BLOCK.replace("\n", "\r\n"),
        {"name": "New"},
        BLOCK.replace("|-\n      Old\n", '"New"\n').replace("\n", "\r\n"),
        id="block-in-a-crlf-file",
    ),
    pytest.param(  # the line break before the next field kept
        FOLDED,
        {"name": "Müller Bau SE"},
        FOLDED.replace(">\n      Müller Bau\n      GmbH\n", '"Müller Bau SE"\n'),
        id="folded-block",
    ),
    pytest.param(  # after the last, quoted as flow needs
        "invites:\n  - id: inv_a\n    groups: [emea,  # main\n      apac, amer]\n",
        {"groups": ["emea", "apac", "amer", "x,y", "z"]},
        'invites:\n  - id: inv_a\n    groups: [emea,  # main\n      apac, amer, "x,y", z]\n',
        id="commented-flow-list-gains-several",
    ),
    pytest.param(  # kept items keep the quotes they were written in
        FLOW,
        {"groups": ["Zürich, Süd", "emea", "apac", "ch"]},
        FLOW.replace(', "amer"]', ", ch]"),
        id="flow-set-keeps-quotes",
    ),
    pytest.param(
        "invites:\n  - id: inv_a\n    groups: [emea, dach]\n",
        {"groups": ["emea", "dach", "Zürich, Süd"]},
        'invites:\n  - id: inv_a\n    groups: [emea, dach, "Zürich, Süd"]\n',
        id="flow-list-gains-an-item-with-a-comma-quoted",
    ),
    *(
        pytest.param(
            ATTACHED.format(block_list(*PAPERS[:count])),
            {"attachments": [*PAPERS[:count], "vat-registration"]},
            ATTACHED.format(block_list(*PAPERS[:count], "vat-registration")),
            id=f"block-list-of-{count}-gains-one-after-its-last",
        )
        for count in (1, 3, 4)
    ),
    pytest.param(  # each on its line, plain as block YAML allows
        ATTACHED.format(block_list("proof-of-address")),
        {"attachments": ["proof-of-address", "letter, signed", "ubo-declaration"]},
        ATTACHED.format(block_list("proof-of-address", "letter, signed", "ubo-declaration")),
        id="block-list-gains-several",
    ),
    pytest.param(
        "invites:\n  - id: inv_a\n    attachments:\n      - proof-of-address",
        {"attachments": ["proof-of-address", "ubo-declaration", "vat-registration"]},
        "invites:\n  - id: inv_a\n    attachments:\n      - proof-of-address\n"
        "      - ubo-declaration\n      - vat-registration",
        id="block-list-ending-the-file-without-a-line-break",
    ),
    *(  # libyaml's end mark takes the blank lines after a block scalar; they are layout, not
        # its value (but with `+`), and stay where they were; the value is quoted, as any edit is.
        pytest.param(
            BLANK_AFTER.format(header),
            {"name": "Acme Group plc"},
            BLANK_AFTER.format(header).replace(
                f"{header}\n      Acme Holdings Ltd\n", '"Acme Group plc"\n'
            ),
            id=f"block-scalar-{header}-keeps-the-blank-line-after-it",
        )
        for header in ["|-", "|", ">-", "|2-"]
    ),
    pytest.param(  # libyaml ends a block scalar past its own line break: the next item stays
        GROUPS.format("      - |-\n        emea\n      - dach\n      - apac\n"),
        {"groups": ["dach", "apac"]},
        GROUPS.format("      - dach\n      - apac\n"),
        id="block-scalar-item-removed-takes-its-own-lines-alone",
    ),
    pytest.param(
        GROUPS.format("      - emea\n      - |-\n        dach\n") + "  - id: inv_b\n",
        {"groups": ["emea", "dach", "apac"]},
        GROUPS.format("      - emea\n      - |-\n        dach\n      - apac\n") + "  - id: inv_b\n",
        id="block-list-ending-in-a-block-scalar-gains-items-after-it",
    ),
    *(
        pytest.param(
            GROUPS.format(
                f"      - emea\n      - {tag}|-  # why apac\n        apac\n      - amer\n"
            ),
            {"groups": ["emea", "amer"]},
            GROUPS.format("      - emea\n      # why apac\n      - amer\n"),
            id=f"dropped-tagged-block-scalar-item-{tag!r}-keeps-its-comment-on-a-line",
        )
        for tag in ["!!str ", "!!str\t"]
    ),
    pytest.param(  # `|` and `>` in text above and below the item are not its header
        HEADERS.format("      - |-  # why apac\n        apac\n"),
        {"groups": ["emea", "amer"]},
        HEADERS.format("      # why apac\n"),
        id="dropped-block-scalar-items-comment-found-on-its-own-header-line",
    ),
]


@pytest.mark.parametrize(("text", "fields", "after"), EDITS)
def test_a_value_is_replaced_in_its_own_style_and_reads_back_as_itself(
    text: str, fields: dict[str, Any], after: str
) -> None:
    done = rewrite(text, [wanted(text, "inv_a", **fields)])
    assert done.text == after
    assert done.refused == []
    read_back = read(done.text)["inv_a"]
    assert {name: read_back[name] for name in fields} == fields


@pytest.mark.parametrize("dash", ["  - ", "- "], ids=["indented", "list-at-column-0"])
def test_editing_one_entry_of_a_large_file_edits_it_alone(dash: str) -> None:
    # adopt on a 2,000-invite file: the first entry and one in the middle alike.
    indent = " " * len(dash)
    text = "invites:\n" + "".join(
        f"{dash}id: inv_{n:04}\n{indent}name: Société {n} SàRL\n{indent}groups: [emea, dach]\n"
        for n in range(2000)
    )
    for n in (0, 1000):
        old = f"Société {n} SàRL"
        want = Wanted(
            f"inv_{n:04}",
            2 + 3 * n,
            len(dash) + 1,
            held({"name": "Société Générale"}),
            {"name": old},
        )
        done = rewrite(text, [want])
        assert done.text == text.replace(f"name: {old}\n", "name: Société Générale\n", 1)
        assert [(e.line, e.id, e.old) for e in done.edits] == [(3 + 3 * n, f"inv_{n:04}", old)]


def test_an_entry_removed_and_another_edited_in_one_run() -> None:
    text = "invites:\n  - id: inv_a\n    name: A\n  - id: inv_b\n    name: B\n"
    done = rewrite(
        text, [wanted(text, "inv_a", remove="accepted"), wanted(text, "inv_b", name="C")]
    )
    assert done.text == "invites:\n  - id: inv_b\n    name: C\n"
    assert [(e.line, e.id, e.field, e.old, e.new) for e in done.edits] == [
        (5, "inv_b", "name", "B", "C")
    ]
    assert [(e.line, e.id, e.old) for e in done.removed] == [(2, "inv_a", "accepted")]


def test_a_contact_and_the_fields_after_it_are_all_edited() -> None:
    contact = {"name": "Jane Roe, PhD", "email": "jane@acme.example", "phone": "+1"}
    done = rewrite(COMMENTED, [wanted(COMMENTED, "inv_a", primaryContact=contact, name="Acme Ltd")])
    assert [(e.field, e.new) for e in done.edits] == [
        ("name", "Acme Ltd"),
        ("primaryContact.name", "Jane Roe, PhD"),
    ]
    # In a flow mapping, a value with a comma is quoted.
    assert '    primaryContact: {name: "Jane Roe, PhD", email: jane@acme.example}\n' in done.text
    assert read(done.text)["inv_a"]["name"] == "Acme Ltd"


# -- issue 40: one entry of a large file read alone; quotes, comments and entries kept -----------


def test_an_entry_under_an_anchor_is_kept_as_shared_and_the_others_are_still_removed() -> None:
    text = (
        "invites:\n"
        "  - &base\n"
        "    id: inv_a\n"
        "    name: Ørsted A/S\n"
        "  - id: inv_b\n"
        "    name: Beta\n"
        "  - id: inv_c\n"
        "    name: Gamma\n"
    )
    done = rewrite(
        text, [wanted(text, "inv_a", remove="accepted"), wanted(text, "inv_b", remove="expired")]
    )
    assert done.text == text.replace("  - id: inv_b\n    name: Beta\n", "")
    assert [(r.line, r.id, r.field, r.new, r.reason) for r in done.refused] == [
        (2, "inv_a", None, "accepted", SHARED)
    ]
    assert [(e.line, e.id, e.old) for e in done.removed] == [(5, "inv_b", "expired")]


# -- issue 40: what each refusal leaves alone, sub-fields, list items added -----------------------


def test_a_field_edited_before_a_contact_is_written_with_the_contacts_edit() -> None:
    text = (
        "invites:\n"
        "  - id: inv_a\n"
        "    name: Müller Bau GmbH\n"
        "    primaryContact:\n"
        "      name: Jürgen Müller\n"
        "      email: j.mueller@mueller-bau.example\n"
    )
    contact = {"name": "Jürgen Müller", "email": "einkauf@mueller-bau.example"}
    done = rewrite(
        text, [wanted(text, "inv_a", name="Müller Bau GmbH & Co. KG", primaryContact=contact)]
    )
    assert done.text == text.replace("Bau GmbH\n", "Bau GmbH & Co. KG\n").replace(
        "j.mueller@", "einkauf@"
    )
    assert [(e.line, e.field) for e in done.edits] == [(3, "name"), (6, "primaryContact.email")]


REFUSED_FIRST = [
    # The platform holds no phone.
    ("    phone: '+49 30 1234567'\n", "phone", None, NO_VALUE),
    # The name is an anchor another entry's alias reads.
    ("    name: &legal Müller Bau GmbH\n", "name", "Müller Bau SE", SHARED),
    # A set written as one value.
    ("    groups: dach\n", "groups", ["dach", "emea"], ODD_LAYOUT),
]


@pytest.mark.parametrize(("line", "name", "new", "reason"), REFUSED_FIRST)
def test_a_field_refused_keeps_no_field_after_it_from_being_edited(
    line: str, name: str, new: Any, reason: str
) -> None:
    text = (
        "invites:\n"
        "  - id: inv_a\n" + line + "    email: einkauf@mueller-bau.example\n"
        "  - id: inv_b\n"
        "    name: Beta\n"
    )
    if reason == SHARED:
        text = text.replace("name: Beta", "name: *legal")
    written: dict[str, FieldValue] = {"email": "einkauf@mueller-bau.example"}
    platform = held({name: new, "email": "zentrale@mueller-bau.example"})
    done = rewrite(text, [Wanted("inv_a", 2, 5, platform, written)])
    assert done.text == text.replace("einkauf@", "zentrale@")
    assert [(r.line, r.field, r.reason) for r in done.refused] == [(3, name, reason)]
    assert [(e.line, e.field, e.new) for e in done.edits] == [
        (4, "email", "zentrale@mueller-bau.example")
    ]


def test_a_contacts_sub_fields_after_one_unchanged_are_still_edited() -> None:
    text = (
        "invites:\n"
        "  - id: inv_a\n"
        "    primaryContact:\n"
        "      name: Zoë Ådahl\n"
        "      email: zoe@old.example\n"
        "      phone: '+468123456'\n"
    )
    contact = {"name": "Zoë Ådahl", "email": "zoe@new.example", "phone": "+468654321"}
    done = rewrite(text, [wanted(text, "inv_a", primaryContact=contact)])
    assert done.text == text.replace("old.example", "new.example").replace("123456", "654321")
    assert [(e.line, e.field) for e in done.edits] == [
        (5, "primaryContact.email"),
        (6, "primaryContact.phone"),
    ]


@pytest.mark.parametrize("between", ["", "\n"])
def test_items_added_at_an_entrys_end_and_the_next_entry_removed_are_both_done(
    between: str,
) -> None:
    # adopt --prune-not-pending: inv_a gains an attachment, inv_b, accepted, goes; the new
    # item's line goes where inv_b's lines began.
    text = (
        "invites:\n"
        "  - id: inv_a\n"
        "    name: Müller GmbH\n"
        "    attachments:\n"
        "      - proof-of-address\n" + between + "  - id: inv_b\n"
        "    name: Beta\n"
    )
    new = ["proof-of-address", "ubo-declaration"]
    done = rewrite(
        text,
        [wanted(text, "inv_a", attachments=new), wanted(text, "inv_b", remove="accepted")],
    )
    assert done.text == text.split("  - id: inv_b")[0].removesuffix(between) + (
        "      - ubo-declaration\n"
    )
    assert read(done.text) == {"inv_a": {"name": "Müller GmbH", "attachments": new}}
    assert [(e.line, e.id) for e in done.removed] == [(6 + len(between), "inv_b")]


@pytest.mark.parametrize(
    ("ids", "expected"),
    [
        (["inv_a"], "\ninvites:\n  - id: inv_b\n    name: Beta\n"),
        (["inv_a", "inv_b"], "\ninvites: []\n"),
    ],
    ids=["the-first", "all"],
)
def test_entries_removed_from_a_file_beginning_with_a_blank_line_leave_the_key_and_that_line(
    ids: list[str], expected: str
) -> None:
    # The line above the first entry is `invites:`, the file's second line: the cut of
    # the first entry (which takes the blank lines above it when none follow) stops there.
    text = "\ninvites:\n  - id: inv_a\n    name: Ærø Turistbureau\n  - id: inv_b\n    name: Beta\n"
    done = rewrite(text, [wanted(text, i, remove="accepted") for i in ids])
    assert done.text == expected
    assert [e.id for e in done.removed] == ids
    assert read(done.text).keys() == read(text).keys() - set(ids)


@pytest.mark.parametrize("brk", ["\r", "\x85", "\u2028"], ids=["cr", "nel", "ls"])
def test_a_block_item_is_removed_though_a_later_line_of_the_file_breaks_where_yaml_reads_one(
    brk: str,
) -> None:
    # Only a line break of YAML's own on the removed item's line leaves the list to the
    # author; one further down the file (in a comment pasted from elsewhere) does not.
    text = (
        "invites:\n"
        "  - id: inv_a\n"
        "    groups:\n"
        "      - emea\n"
        "      - dach\n"
        f"  # Zürich office{brk}  # from the CRM export\n"
        "  - id: inv_b\n"
        "    groups: [apac]\n"
    )
    done = rewrite(text, [wanted(text, "inv_a", groups=["dach"])])
    assert done.text == text.replace("      - emea\n", "")
    assert done.refused == []
    assert [(e.line, e.id, e.field) for e in done.edits] == [(4, "inv_a", "groups")]
    assert read(done.text)["inv_a"]["groups"] == ["dach"]


@pytest.mark.parametrize("newline", ["\n", "\r\n"], ids=["lf", "crlf"])
def test_an_entry_ending_in_a_block_scalar_removed_leaves_the_next_entry_whole(
    newline: str,
) -> None:
    text = (
        "invites:\n"
        "  - id: inv_a\n"
        "    name: |-\n"
        "      Acme Holdings Ltd\n"
        "  - id: inv_b\n"
        "    name: Zoë Ångström GmbH\n"
    ).replace("\n", newline)
    done = rewrite(text, [wanted(text, "inv_a", remove="pending")])
    assert [e.id for e in done.removed] == ["inv_a"]
    assert done.text == "invites:\n  - id: inv_b\n    name: Zoë Ångström GmbH\n".replace(
        "\n", newline
    )


def test_a_block_scalar_edited_and_the_entry_after_it_removed_in_one_run() -> None:
    text = (
        "invites:\n"
        "  - id: inv_a\n"
        "    name: |-\n"
        "      Acme Holdings Ltd\n"
        "\n"
        "  - id: inv_b\n"
        "    name: Beta Ltd\n"
    )
    done = rewrite(
        text,
        [wanted(text, "inv_a", name="Acme Group plc"), wanted(text, "inv_b", remove="pending")],
    )
    assert [e.id for e in done.removed] == ["inv_b"]
    assert done.text == 'invites:\n  - id: inv_a\n    name: "Acme Group plc"\n'


def test_a_kept_block_scalars_trailing_blank_lines_are_its_value_and_go_with_it() -> None:
    # `|+` keeps its blank lines: they are part of the value the platform no longer holds.
    text = "invites:\n  - id: inv_a\n    name: |+\n      Acme Holdings Ltd\n\n  - id: inv_b\n"
    done = rewrite(text, [wanted(text, "inv_a", name="Acme Group plc")])
    assert done.refused == []
    assert read(done.text)["inv_a"]["name"] == "Acme Group plc"
    assert read(done.text).keys() == {"inv_a", "inv_b"}


# -- block scalars written by hand: what adopt keeps and what it takes ------------------------


@pytest.mark.parametrize("header", [">-", "|-", "|2-"])
def test_a_dropped_block_scalar_items_comment_stays_on_a_line_of_its_own(
    header: str,
) -> None:
    # `- >-  # why` removed took its comment with it, though a plain
    # item's comment stays on a line of its own (docs/adopt.md, issue 37 row 4).
    body = "          apac\n" if header == "|2-" else "        apac\n"
    text = (
        "invites:\n  - id: inv_a\n    groups:\n      - emea\n"
        f"      - {header}  # why apac\n{body}      - amer\n"
    )
    gone = read(text)["inv_a"]["groups"][1]
    kept = [g for g in read(text)["inv_a"]["groups"] if g != gone]
    done = rewrite(text, [wanted(text, "inv_a", groups=kept)])
    assert done.refused == []
    assert read(done.text)["inv_a"]["groups"] == kept
    assert "# why apac" in done.text


@pytest.mark.parametrize("space", ["\u3000"])  # validate refuses other Unicode spaces
@pytest.mark.parametrize(
    "edit", ["name", "remove-next", "remove-it"], ids=["edited", "next-removed", "removed"]
)
def test_a_block_scalars_last_line_of_unicode_spaces_is_text(space: str, edit: str) -> None:
    # spans' `_end` takes a line of Unicode spaces (str.strip) for a
    # blank line after a block scalar; to YAML only spaces and tabs are white, the line is
    # the value's text, and adopt refused the edit as unsafe (the file left unchanged).
    text = (
        "invites:\n  - id: inv_a\n    name: >-\n      Beta\n"
        f"      {space}\n  - id: inv_b\n    name: B\n"
    )
    assert read(text)["inv_a"]["name"] == f"Beta {space}"
    if edit == "name":
        wants = [wanted(text, "inv_a", name="Beta AG")]
    elif edit == "remove-next":
        wants = [wanted(text, "inv_b", remove="accepted")]
    else:
        wants = [wanted(text, "inv_a", remove="accepted")]
    done = rewrite(text, wants)
    assert done.refused == []
    assert done.text != text
    after = read(done.text)
    if edit == "name":
        assert after["inv_a"]["name"] == "Beta AG"
    elif edit == "remove-next":
        assert after == {"inv_a": {"name": f"Beta {space}"}}
    else:
        assert after == {"inv_b": {"name": "B"}}


@pytest.mark.parametrize(
    ("char", "named"),
    [("\u00a0", "U+00A0 NO-BREAK SPACE"), ("\ufeff", "U+FEFF ZERO WIDTH NO-BREAK SPACE"),
     ("\t", "holds a tab")],
    ids=["nbsp", "bom", "tab"],
)  # fmt: skip
@pytest.mark.parametrize("field", ["name", "primaryContact.name", "groups"])
def test_a_value_no_file_can_hold_is_refused_alone_and_the_entry_s_other_edits_made(
    char: str, named: str, field: str
) -> None:
    bad = f"Acme{char}Group"
    adopted: dict[str, Any] = {
        "name": "Acme Group",
        "email": "new@acme.example",
        "primaryContact": {"name": "Jane Roe", "email": "jane@acme.example"},
        "groups": ["emea", "priority"],
    }
    platform = {**adopted, "primaryContact": dict(adopted["primaryContact"])}
    if field == "primaryContact.name":
        platform["primaryContact"]["name"] = bad
    else:
        platform[field] = bad if field == "name" else ["emea", bad]
    done = rewrite(COMMENTED, [wanted(COMMENTED, "inv_a", **platform)])
    (refused,) = done.refused
    assert (refused.id, refused.field) == ("inv_a", field)
    assert refused.reason.startswith(f"{CANNOT_HOLD}: ") and named in refused.reason
    assert {e.field for e in done.edits} == {"name", "email", "primaryContact.name", "groups"} - {
        field
    }
    # The file stays valid: every other value adopted, the refused one as it was.
    before, after = read(COMMENTED)["inv_a"], read(done.text)["inv_a"]
    expected = held(adopted)
    if field == "primaryContact.name":
        expected["primaryContact"] = Contact({"name": "Jane Doe", "email": "jane@acme.example"})
    else:
        expected[field] = before[field]
    assert {name: after[name] for name in expected} == expected


# Where values begin and end, and which are shared, for editing a file in place.

TEXT = """\
invites:
  - id: inv_a   # comment
    name: "Acme"
    groups:
      - emea

    # a comment after the list
    addOns: &shared [edd]
  - &entry
    id: inv_b
    <<: {email: b@example.com}
    addOns: *shared
"""


def entries(text: str, wanted: list[tuple[int, int]] | None = None) -> list[Span]:
    found = invite_spans(text, wanted)
    return found.items if found is not None else []


def test_each_value_spans_exactly_its_text_and_a_block_list_ends_at_its_last_item() -> None:
    first, second = entries(TEXT)
    assert [TEXT[s.start : s.end] for s in first.keys.values()] == [
        "inv_a",
        '"Acme"',
        "- emea",
        "&shared [edd]",
    ]
    assert first.keys["name"].style == '"' and first.keys["id"].style is None
    assert [TEXT[i.start : i.end] for i in first.keys["groups"].items] == ["emea"]
    assert TEXT[first.keys["groups"].key_end - len("groups") : first.keys["groups"].key_end] == (
        "groups"
    )
    assert not first.shared and second.shared  # an anchored entry shares all it holds


def test_anchors_aliases_and_merges_are_shared() -> None:
    first, second = entries(TEXT)
    assert first.keys["addOns"].shared and first.keys["addOns"].items[0].shared
    assert not first.keys["groups"].shared
    assert second.keys["addOns"].kind == "alias"
    assert "email" not in second.keys and "<<" not in second.keys  # it comes through the merge


def test_a_file_without_an_invites_list_has_no_entries() -> None:
    assert entries("other: 1\n") == []
    assert entries("invites: {a: 1}\n") == []
    assert entries("- 1\n") == []


def test_a_file_without_an_invites_list_has_no_entries_whatever_is_wanted() -> None:
    assert entries("- - {a: 1}\n", [(1, 3)]) == []  # a list of lists
    assert entries("# nothing but a comment\n", []) == []  # no document
    assert entries("other:\n  - {a: 1}\n", []) == []


def test_an_entry_not_wanted_spans_exactly_its_text_and_its_values_are_not_read() -> None:
    # A 20,000-invite file is read for one edit: the others get their own span only.
    text = "invites:\n  - id: inv_a\n    addOns: [edd, {x: 1}]\n  - id: inv_b\n    name: B\n"
    first, second = entries(text, wanted=[(4, 5)])  # inv_b
    assert text[first.start : first.end] == "id: inv_a\n    addOns: [edd, {x: 1}]"
    assert first.keys == {}
    assert sorted(second.keys) == ["id", "name"]
    first, second = entries(text, [])
    assert text[second.start : second.end] == "id: inv_b\n    name: B"
    assert first.keys == second.keys == {}


def lines_of(text: str, number: int) -> str:
    """The lines removing entry ``number`` cuts from ``text``."""
    found = entry_lines(text, entries(text)[number])
    assert found is not None
    start, end = cut_lines(text, *found)
    return text[start:end]


def test_a_removed_entry_takes_its_own_lines_and_not_the_invites_key_above_it() -> None:
    # A file that begins with a blank line: the line above the only entry is `invites:`.
    assert lines_of("\ninvites:\n  - id: a\n", 0) == "  - id: a\n"
    assert lines_of("\ninvites:\n\n  - id: a\n", 0) == "\n  - id: a\n"


def test_a_removed_last_entry_leaves_a_last_line_without_a_line_break() -> None:
    text = "invites:\n  - id: a\n  - id: b\n#"  # a one-character comment, no line break
    assert lines_of(text, 1) == "  - id: b\n"


def test_an_entrys_own_lines_are_the_comments_just_above_it_and_itself_no_blank_line() -> None:
    text = "invites:\n  - id: a\n\n  # About b.\n  - id: b\n    name: B\n\n  - id: c\n"
    found = entry_lines(text, entries(text)[1])
    assert found is not None
    assert text[found[0] : found[1]] == "  # About b.\n  - id: b\n    name: B\n"
    assert lines_of(text, 1) == "  # About b.\n  - id: b\n    name: B\n\n"


def test_a_removed_last_entry_on_the_files_last_line_without_a_line_break_goes_whole() -> None:
    # An editor that writes no line break at the end of the file: the last entry's
    # lines run to the text's end, and removing it cuts them all.
    text = "invites:\n  - id: inv_a\n    name: Acme\n  - id: inv_b\n    name: Müller & Söhne GmbH"
    found = entry_lines(text, entries(text)[1])
    assert found == (text.index("  - id: inv_b"), len(text))
    assert lines_of(text, 1) == "  - id: inv_b\n    name: Müller & Söhne GmbH"


def test_an_entry_of_a_flow_list_below_a_divider_of_dashes_has_no_lines_of_its_own() -> None:
    # adopt removes only a block list's entries by their lines; one of a flow list is
    # left for the author ("a layout adopt does not edit"), even when the last dash
    # before it, ending a comment, is followed by nothing but the line break.
    text = (
        "invites: [\n"
        "  {id: inv_a, name: Acme},\n"
        "  # --- EMEA ---\n"
        "  {id: inv_b, name: Zürich AG},\n"
        "]\n"
    )
    first, second = entries(text)
    assert entry_lines(text, second) is None
    assert entry_lines(text, first) is None


def test_an_entry_whose_line_begins_with_a_lone_carriage_return_has_no_lines_of_its_own() -> None:
    # YAML reads a lone CR as a line break, these lines are split at LF: an entry
    # whose line (as split here) starts with one is left for the author to remove,
    # not cut by lines counted two ways. A CR before LF (CRLF) is only a line's end.
    text = "invites:\n  - id: inv_a\n\r  - id: inv_b\n    name: Ørsted A/S\n"
    assert entry_lines(text, entries(text)[1]) is None
    crlf = "invites:\r\n  - id: inv_a\r\n\r\n  - id: inv_b\r\n    name: Ørsted A/S\r\n"
    found = entry_lines(crlf, entries(crlf)[1])
    assert (
        found is not None
        and crlf[found[0] : found[1]] == "  - id: inv_b\r\n    name: Ørsted A/S\r\n"
    )
