"""Where values begin and end, and which are shared, for editing a file in place."""

from __future__ import annotations

from reconciler.yamlload.spans import cut_lines, entry_lines, entry_span, invite_spans

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


def test_each_value_spans_exactly_its_text_and_a_block_list_ends_at_its_last_item() -> None:
    spans = invite_spans(TEXT)
    first, second = spans.entries
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
    first, second = invite_spans(TEXT).entries
    assert first.keys["addOns"].shared and first.keys["addOns"].items[0].shared
    assert not first.keys["groups"].shared
    assert second.keys["addOns"].kind == "alias" and second.merged
    assert not first.merged  # only a mapping with a `<<` key takes values from elsewhere
    assert "email" not in second.keys  # it comes through the merge


def test_a_file_without_an_invites_list_has_no_entries() -> None:
    assert invite_spans("other: 1\n").entries == []
    assert invite_spans("invites: {a: 1}\n").entries == []
    assert invite_spans("- 1\n").entries == []


def test_a_file_without_an_invites_list_has_no_entries_whatever_is_wanted() -> None:
    assert invite_spans("- - {a: 1}\n", wanted=[0]).entries == []  # a list of lists
    assert invite_spans("# nothing but a comment\n", wanted=[]).entries == []  # no document
    assert invite_spans("other:\n  - {a: 1}\n", wanted=[]).entries == []


def test_an_entry_not_wanted_spans_exactly_its_text_and_its_values_are_not_read() -> None:
    # A 20,000-invite file is read for one edit: the others get their own span only.
    text = "invites:\n  - id: inv_a\n    addOns: [edd, {x: 1}]\n  - id: inv_b\n    name: B\n"
    first, second = invite_spans(text, wanted=[text.index("id: inv_b")]).entries
    assert text[first.start : first.end] == "id: inv_a\n    addOns: [edd, {x: 1}]"
    assert first.keys == {}
    assert sorted(second.keys) == ["id", "name"]
    first, second = invite_spans(text, wanted=[]).entries
    assert text[second.start : second.end] == "id: inv_b\n    name: B"
    assert first.keys == second.keys == {}


def test_an_entry_is_read_from_its_own_lines_only_when_they_hold_it_alone() -> None:
    text = "invites:\n  - id: a\n    name: A\n  - id: b\n  - plain\n"
    start, end = text.index("id: a"), text.index("  - id: b")
    entry = entry_span(text, start, end)
    assert entry is not None
    assert (entry.kind, entry.start, sorted(entry.keys)) == ("mapping", start, ["id", "name"])
    assert text[entry.start : entry.end] == "id: a\n    name: A"
    second = entry_span(text, text.index("id: b"), text.index("  - plain"))  # not the first
    assert second is not None and text[second.start : second.end] == "id: b"
    # Two entries in the lines, an entry that is not a mapping, one not on a `- ` line.
    assert entry_span(text, start, text.index("  - plain")) is None
    assert entry_span(text, text.index("plain"), len(text)) is None
    flow = "invites: [{id: a}]\n"
    assert entry_span(flow, flow.index("{"), len(flow)) is None


def test_an_entry_below_its_dash_is_read_from_its_lines_as_from_the_file() -> None:
    text = "invites:\n  -\n    id: a\n    name: A\n  - id: b\n"
    start = text.index("id: a")
    alone = entry_span(text, start, text.index("  - id: b"))
    whole = invite_spans(text).entries[0]
    assert alone is not None and alone.start == whole.start == start
    assert (
        (alone.end, sorted(alone.keys))
        == (whole.end, sorted(whole.keys))
        == (
            text.index("\n  - id: b"),
            ["id", "name"],
        )
    )


def lines_of(text: str, number: int) -> str:
    """The lines removing entry ``number`` cuts from ``text``."""
    found = entry_lines(text, invite_spans(text).entries[number])
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
    found = entry_lines(text, invite_spans(text).entries[1])
    assert found is not None
    assert text[found[0] : found[1]] == "  # About b.\n  - id: b\n    name: B\n"
    assert lines_of(text, 1) == "  # About b.\n  - id: b\n    name: B\n\n"


def test_a_removed_last_entry_on_the_files_last_line_without_a_line_break_goes_whole() -> None:
    # An editor that writes no line break at the end of the file: the last entry's
    # lines run to the text's end, and removing it cuts them all.
    text = "invites:\n  - id: inv_a\n    name: Acme\n  - id: inv_b\n    name: Müller & Söhne GmbH"
    found = entry_lines(text, invite_spans(text).entries[1])
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
    first, second = invite_spans(text).entries
    assert entry_lines(text, second) is None
    assert entry_lines(text, first) is None


def test_an_entry_whose_line_begins_with_a_lone_carriage_return_has_no_lines_of_its_own() -> None:
    # YAML reads a lone CR as a line break, these lines are split at LF: an entry
    # whose line (as split here) starts with one is left for the author to remove,
    # not cut by lines counted two ways. A CR before LF (CRLF) is only a line's end.
    text = "invites:\n  - id: inv_a\n\r  - id: inv_b\n    name: Ørsted A/S\n"
    assert entry_lines(text, invite_spans(text).entries[1]) is None
    crlf = "invites:\r\n  - id: inv_a\r\n\r\n  - id: inv_b\r\n    name: Ørsted A/S\r\n"
    found = entry_lines(crlf, invite_spans(crlf).entries[1])
    assert (
        found is not None
        and crlf[found[0] : found[1]] == "  - id: inv_b\r\n    name: Ørsted A/S\r\n"
    )
