"""Invite ids typed on the command line, checked before anything is read; and an
invite entry's fields as the file wrote them."""

from __future__ import annotations

import json
import time
import unicodedata

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reconciler.desired.entries import _strings, _text_of, refuse_bad_ids
from reconciler.desired.rules import Rules
from reconciler.desired.state import load_text, load_texts
from reconciler.errors import InputError, ReconcilerError
from reconciler.model.values import MAX_MARKS_IN_A_ROW, marks_in_a_row
from reconciler.safetext import NOT_IN_TEXT

RULE = "1 to 128 letters, digits, `_`, `-`, `.`, and not dots alone"


def test_good_ids_pass() -> None:
    refuse_bad_ids(["inv_1", "INV-2.a", "x" * 128], "--target")


def test_bad_ids_are_named_once_each_in_the_order_given() -> None:
    with pytest.raises(ReconcilerError) as refused:
        refuse_bad_ids(["inv_1", "inv 2", "..", "inv 2", "a/b"], "--target")
    assert str(refused.value) == (
        f"--target 'inv 2', '..', 'a/b': not a valid invite id ({RULE}); nothing was read"
    )


@pytest.mark.parametrize(("count", "tail"), [(10, ""), (11, " and 1 more"), (25, " and 15 more")])
def test_ten_bad_ids_are_shown_and_the_rest_counted(count: int, tail: str) -> None:
    bad = [f"bad id {n}" for n in range(count)]
    with pytest.raises(ReconcilerError) as refused:
        refuse_bad_ids(bad, "--target")
    shown = ", ".join(repr(b) for b in bad[:10])
    assert str(refused.value) == (
        f"--target {shown}{tail}: not a valid invite id ({RULE}); nothing was read"
    )


def test_an_entry_keeps_its_fields_in_the_order_written_and_drops_the_reconciler_keys() -> None:
    text = (
        "invites:\n"
        "  - id: inv_1\n    attachments: [deed]\n    resendOnChange: true\n"
        "    phone: '+442079460000'\n"
        "  - phone: '+442079460001'\n    id: inv_2\n    attachments: [deed]\n"
    )
    invites, problems = load_text(text, "t.yaml")
    assert problems == []
    assert [(i.id, list(i.fields.items()), i.resend_on_change) for i in invites] == [
        ("inv_1", [("attachments", ["deed"]), ("phone", "+442079460000")], True),
        ("inv_2", [("phone", "+442079460001"), ("attachments", ["deed"])], False),
    ]


# One normal form, nothing invisible.
def test_text_from_the_files_is_taken_in_nfc() -> None:
    text = (
        "invites:\n  - id: inv_1\n    name: Cafe\u0301 Ltd\n"
        "    primaryContact: {name: Zoe\u0308, email: z@x.example}\n    groups: [e\u0301]\n"
    )
    (invite,), problems = load_text(text, "a.yaml")
    assert problems == []
    assert invite.fields == {
        "name": "Caf\u00e9 Ltd",
        "primaryContact": {"name": "Zo\u00eb", "email": "z@x.example"},
        "groups": ["\u00e9"],
    }


@pytest.mark.parametrize(
    ("char", "said"),
    [
        ("\\u200B", "holds U+200B ZERO WIDTH SPACE, which does not show on screen"),
        ("\\u00A0", "holds U+00A0 NO-BREAK SPACE, which looks like a space but is not one"),
        ("\\u2029", "holds U+2029 PARAGRAPH SEPARATOR, a line break; write the value on one line"),
        ("\\u034F", "holds U+034F COMBINING GRAPHEME JOINER, which does not show"),
        ("\\U000E0041", "holds U+E0041 TAG LATIN CAPITAL LETTER A, which does not show"),
    ],
)
def test_an_invisible_character_is_refused_at_its_place_with_the_fix(char: str, said: str) -> None:
    text = f'invites:\n  - id: inv_1\n    groups: [emea, "a{char}b"]\n'
    _, problems = load_text(text, "a.yaml")
    (problem,) = problems
    assert (problem.line, problem.column) == (3, 20)
    assert problem.message.startswith("`groups`: 'a\\") and said in problem.message


def test_every_kind_of_invisible_character_in_a_value_is_said_at_once() -> None:
    text = 'invites:\n  - id: inv_1\n    name: "Acme\u00a0Holdings\u200b Ltd\u00a0plc"\n'
    _, problems = load_text(text, "a.yaml")
    assert [(p.line, p.message.partition("' holds ")[2][:27]) for p in problems] == [
        (3, "U+00A0 NO-BREAK SPACE, whic"),
        (3, "U+200B ZERO WIDTH SPACE, wh"),
    ]


def test_joiners_may_be_written_and_a_control_character_is_reported_once() -> None:
    text = (
        'invites:\n  - id: inv_1\n    name: "علی\\u200cرضا"\n    email: "a\\u200b\\x07@b.example"\n'
    )
    _, problems = load_text(text, "a.yaml")
    (problem,) = problems  # the schema's refusal of the email; not a second one for U+200B
    assert problem.line == 4 and "email" in problem.message


def test_the_schema_judges_the_nfc_form_that_is_sent() -> None:
    # Two spellings of one group are one group; U+0958 is two characters in NFC.
    devanagari_qa = "\\u0958" * 150
    text = (
        'invites:\n  - id: inv_1\n    groups: ["\\u00e9", "e\\u0301"]\n'
        f'  - id: inv_2\n    name: "{devanagari_qa}"\n'
    )
    _, problems = load_text(text, "a.yaml")
    assert [(p.line, p.message) for p in problems] == [
        (3, "`groups` lists the same item twice; it is a set"),
        (5, "`name` must be at most 200 characters"),
    ]


def test_a_long_run_of_combining_marks_is_refused_without_normalising_it() -> None:
    # NFC reorders a run of combining marks in quadratic time: 100,000 of them, alternating
    # two classes, took seconds for one value, minutes for a file of such names.
    many = "\\u0301\\u0316" * 50_000
    few = "\\u0316\\u0301" * 16
    sorted_run = "\\u0316" * 31
    text = (
        f'invites:\n  - id: inv_1\n    name: "a{many}"\n'
        f'  - id: inv_2\n    groups: ["a{many}"]\n'
        '  - id: inv_3\n    name: "Zalgo\\u0301\\u0316\\u0301\\u0316"\n'
        f'  - id: inv_4\n    name: "Z{few}"\n'
        f'  - id: inv_5\n    name: "Z{sorted_run}"\n'  # in NFC already: refused alike
    )
    started = time.perf_counter()
    _, problems = load_text(text, "a.yaml")
    assert time.perf_counter() - started < 2
    assert [(p.line, p.column) for p in problems] == [(3, 11), (5, 14), (9, 11), (11, 11)]
    assert problems[0].message == "`name` must be at most 200 characters"
    assert problems[1].message.startswith("`groups`: 'a\u0301")
    assert problems[1].message.endswith(
        " holds 100,000 combining marks in a row (at most 30); no text needs so many"
    )
    assert problems[2].message.startswith("`name`: 'Z\u0316\u0301")
    assert problems[2].message.endswith(
        " holds 32 combining marks in a row (at most 30); no text needs so many"
    )
    assert " holds 31 combining marks in a row" in problems[3].message


def test_a_refused_value_shared_through_an_alias_is_reported_once() -> None:
    text = 'invites:\n  - id: inv_1\n    groups: &g ["a\\u202eb"]\n  - id: inv_2\n    groups: *g\n'
    _, problems = load_text(text, "a.yaml")
    assert len(problems) == 1 and "U+202E" in problems[0].message


# Sixteen marks: two in a row are more than MAX_MARKS_IN_A_ROW, one alone is not.
_TEXT = st.lists(
    st.sampled_from([" ", "a", "\u00e9", "e\u0301", "\u200b", "\u00a0", "\u0301" * 16]),
    min_size=1,
    max_size=6,
).map("".join)


@given(
    name=_TEXT,
    groups=st.lists(_TEXT, max_size=3, unique_by=lambda t: unicodedata.normalize("NFC", t)),
    contact=_TEXT,
)
def test_an_entry_looked_at_whole_is_judged_as_each_value_alone(
    name: str, groups: list[str], contact: str
) -> None:
    # The reader joins an entry's text to look at it once: what it finds must be what a
    # look at each value finds (a space at an end, NFC, an invisible character, too many
    # marks in a row).
    entry: dict[str, object] = {"id": "inv_1", "name": name, "groups": groups}
    entry["primaryContact"] = {"name": contact, "email": "z@x.example"}
    text = "invites:\n  - " + json.dumps(entry) + "\n"
    values = [name, *groups, contact]
    try:
        state = load_texts([("a.yaml", text)], Rules())
    except InputError as error:
        invisible = [v for v in values if NOT_IN_TEXT.search(v)]
        marked = [v for v in values if marks_in_a_row(v) > MAX_MARKS_IN_A_ROW]
        assert invisible or marked, str(error)
        said = str(error)
        assert ("does not show on screen" in said or "looks like a space" in said) == bool(
            invisible
        )
        assert ("combining marks in a row" in said) == bool(marked)
        return
    assert not any(NOT_IN_TEXT.search(v) for v in values)
    assert not any(marks_in_a_row(v) > MAX_MARKS_IN_A_ROW for v in values)
    spaced = {w for w in map(str, state.warnings) if "surrounding-space" in w}
    assert len(spaced) == sum(v[:1] == " " or v[-1:] == " " for v in values)
    (invite,) = state.invites
    assert invite.fields["name"] == unicodedata.normalize("NFC", name)
    assert list(invite.fields["groups"]) == [unicodedata.normalize("NFC", g) for g in groups]


_JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers() | st.sampled_from(["", " a", "é", "b ", "ж"]),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.sampled_from(["name", "groups", "x"]), inner, max_size=3)
    ),
    max_leaves=8,
)


@given(_JSONISH)
def test_an_entry_s_text_is_every_string_in_it_whatever_its_shape(value: object) -> None:
    # Lists and mappings of text are joined without a walk; any other shape is walked.
    strings: list[str] = []
    _strings(value, strings)
    joined, texts = _text_of(value)
    assert [t for t in joined.split("\0") if t] == [t for t in strings if t]
    assert texts == [t for t in strings if not t.isascii()]
    assert joined.isascii() == all(t.isascii() for t in strings)
