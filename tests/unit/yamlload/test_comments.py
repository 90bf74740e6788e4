"""A plain value cut short by a comment (`name: Store #12`), found as libyaml reads it."""

from __future__ import annotations

import io

import pytest

from reconciler.yamlload.comments import CutValue, cut_values, suspect
from reconciler.yamlload.source import FileSource


def test_a_plain_value_followed_by_a_comment_that_starts_before_text_is_found() -> None:
    text = "invites:\n  - id: inv_1\n    name: Café #1 SARL\n"
    assert cut_values(text) == [CutValue(3, 16, "Café", "Café #1 SARL")]


@pytest.mark.parametrize(
    "line",
    [
        "    name: Store  # the usual comment, a space after the #",
        '    name: "Store #12"',
        "    name: 'Store #12'",
        "    name: Store#12",  # no space before the #: part of the value to YAML
        "    groups: [emea, apac] #x",  # after the list, not after a value
    ],
)
def test_what_yaml_does_not_cut_or_a_comment_meant_as_one_is_left_alone(line: str) -> None:
    assert cut_values(f"invites:\n  - id: inv_1\n{line}\n") == []


def test_every_cut_value_is_found_in_a_list_and_a_contact() -> None:
    text = (
        "invites:\n  - id: inv_1\n    groups: [emea]\n    attachments:\n      - deed #2\n"
        "    primaryContact:\n      name: Jo #3\n      email: jo@x.example\n"
    )
    assert [(c.line, c.value) for c in cut_values(text)] == [(5, "deed"), (7, "Jo")]


def test_a_long_value_and_comment_are_shown_cut() -> None:
    (cut,) = cut_values("name: a #" + "b" * 200 + "\n")
    assert cut.written.endswith("…") and len(cut.written) == 81


def test_text_that_does_not_parse_gives_what_was_found_before_it() -> None:
    assert [c.line for c in cut_values("a: x #1\nb: [\n")] == [1]


@pytest.mark.parametrize(
    ("data", "said"),
    [
        (b"name: Store #12\n", True),
        (b"name: Store\t#12\n", True),
        (b"name: Store # 12\n", False),
        (b"id: x  ##\n", False),
        (b"name: Store#12 #\n", False),
        (b"name: Store\n", False),
    ],
)
def test_only_a_space_then_a_hash_then_text_makes_a_file_suspect(data: bytes, said: bool) -> None:
    assert suspect(data) is said


def test_a_file_read_in_chunks_is_suspect_across_two_of_them() -> None:
    data = b"a: b" + b" " * 65530 + b"x #12\n"
    source = FileSource(io.BytesIO(data), 10**6)
    while source.read(65536):
        pass
    assert source.suspect
    calm = FileSource(io.BytesIO(data.replace(b"#12", b"# 1")), 10**6)
    while calm.read(65536):
        pass
    assert not calm.suspect


def test_the_first_few_are_found_and_the_rest_not_looked_for() -> None:
    text = "invites:\n" + "  - x #1\n" * 1000
    assert [c.line for c in cut_values(text, most=3)] == [2, 3, 4]
    assert len(cut_values(text)) == 100
