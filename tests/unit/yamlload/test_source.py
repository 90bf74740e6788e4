"""Properties of the loader over generated input: hostile YAML, and the quick schema check.

- Whatever nesting, anchors, aliases and control characters a file holds, the
  loader returns: invites, or problems each placed at a line and column of the
  file, one line each, with no raw control character. Never an exception, a
  crash or a hang (each example is bounded by the loader's own limits).
- The check compiled from the schema never says "valid" where jsonschema finds
  an error, and says "valid" for ordinary valid invites (so it is used).
- Every item of the streamed list reaches the reader, located and placed, in order:
  as it is read, or (a list that came through an alias or a merge) after the file.
"""

from __future__ import annotations

import io
import re
from typing import Any, NamedTuple

import pytest
import yaml
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from reconciler.desired.state import load_text
from reconciler.errors import FileProblem
from reconciler.schema.check import invite_validators
from reconciler.yamlload import builder, source
from reconciler.yamlload.builder import DEPTH_LIMIT, Lines, Located, Mark
from reconciler.yamlload.source import (
    CutValue,
    FileSource,
    Parsed,
    cut_values,
    load_yaml,
    stream,
    suspect,
)

PROPERTY = settings(
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
_RAW_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")

# -- generated YAML: nesting, anchors, aliases, control characters -------------------------

anchor_names = st.sampled_from(["a", "b", "c", "emea"])
scalars = st.one_of(
    st.sampled_from(
        ["lol", "NO", "yes", "12:30", "0755", "+442079460000", "2024-01-02", "~", "''", "inv_1"]
    ),
    st.sampled_from(['"\\e]0;PWNED\\a"', '"tab\\there"', '"nul\\0"', '"line\\nbreak"']),
    anchor_names.map(lambda name: f"*{name}"),
)
keys = st.sampled_from(["id", "name", "email", "groups", "<<", "x", "? [a]", "NO", '"\\e"'])


def anchored(node: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    anchor = st.one_of(st.just(""), anchor_names.map(lambda name: f"&{name} "))
    return st.tuples(anchor, node).map("".join)


def flow_list(items: list[str]) -> str:
    return "[" + ", ".join(items) + "]"


def flow_map(pairs: list[tuple[str, str]]) -> str:
    return "{" + ", ".join(f"{key}: {value}" for key, value in pairs) + "}"


nodes = st.recursive(
    anchored(scalars),
    lambda kids: anchored(
        st.one_of(
            st.lists(kids, max_size=9).map(flow_list),
            st.lists(st.tuples(keys, kids), max_size=5).map(flow_map),
        )
    ),
    max_leaves=40,
)
deep_flow = st.integers(0, 400).map(lambda n: "[" * n + "x" + "]" * n)
deep_block = st.integers(0, 300).map(lambda n: "- " * n + "x")
bodies = st.one_of(nodes, deep_flow)
documents = st.one_of(
    bodies.map(lambda body: f"invites: [{body}]\n"),
    st.lists(bodies, max_size=6).map(
        lambda entries: "invites:\n" + "".join(f"  - {entry}\n" for entry in entries)
    ),
    st.lists(st.tuples(keys, bodies), max_size=5).map(
        lambda pairs: "".join(f"{key}: {value}\n" for key, value in pairs)
    ),
    deep_block.map(lambda body: f"invites:\n{body}\n"),
)
controls = st.text(alphabet=st.characters(codec="utf-8", categories=["Cc"]), max_size=2)


@st.composite
def hostile_texts(draw: st.DrawFn) -> str:
    text = draw(documents)
    if draw(st.booleans()):
        at = draw(st.integers(0, len(text)))
        text = text[:at] + draw(controls) + text[at:]
    return text


def assert_well_placed(problems: list[FileProblem], text: str, path: str) -> None:
    lines = len(text.splitlines()) + 1
    for problem in problems:
        assert problem.path == path
        assert 1 <= problem.line <= lines, problem
        assert problem.column >= 1, problem
        shown = str(problem)
        assert problem.message.strip() and "\n" not in shown, shown
        assert not _RAW_CONTROL.search(shown), shown


@pytest.mark.real  # a big property run: the real-parts stage
@PROPERTY
@given(text=hostile_texts())
@example(text="a: &a [*a]\n")
@example(text="invites: &x [*x]\n")
@example(text="<<: {invites: [{id: inv_1}]}\n")
@example(text="invites: " + "[" * 5000 + "\n")
@example(text="a: &a [" + ", ".join(["lol"] * 9) + "]\nb: &a [" + ", ".join(["*a"] * 9) + "]\n")
def test_any_nesting_aliases_and_control_characters_load_or_are_placed(text: str) -> None:
    invites, problems = load_text(text, "hostile.yaml")

    assert_well_placed(problems, text, "hostile.yaml")
    if not problems:
        assert all(isinstance(invite.id, str) for invite in invites)


@pytest.mark.real  # a big property run: the real-parts stage
@PROPERTY
@given(text=hostile_texts())
@example(text="\r")
@example(text="\x85")
def test_a_config_file_of_any_shape_loads_or_is_placed(text: str) -> None:
    loaded = load_yaml(text, "reconciler.yaml")

    assert_well_placed(loaded.problems, text, "reconciler.yaml")
    if loaded.document is None:
        # YAML reads "\r" and NEL ("\x85") as line breaks: text of only those is empty.
        assert loaded.problems or not text.strip(" \r\n\x85#")


# -- the quick schema check ----------------------------------------------------------------

ids = st.sampled_from(["inv_8f2k1", "inv.legacy-01", "inv_1\n", "..", "", "x" * 129, "a b"])
texts = st.one_of(
    st.sampled_from(["Acme Holdings Ltd", "株式会社サクラ商事", "", "x" * 201, "a\n"]),
    st.text(max_size=5),
)
emails = st.sampled_from(
    ["kyb@acme.example", "a@b.c", "a@b.example\n", "no-at.example", "a@b", "é@ü.example", ""]
)
phones = st.sampled_from(["+442079460000", "+442079460000\n", "442079460000", "+0123456", "+1"])
anything = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), texts)
identifier_sets = st.one_of(
    st.lists(st.sampled_from(["emea", "apac", "edd", ""]), max_size=4),
    st.lists(anything, max_size=3),
    anything,
)
contacts = st.one_of(
    st.fixed_dictionaries(
        {"name": texts, "email": emails},
        optional={"phone": phones, "fax": texts},
    ),
    anything,
)


def fields_of(value: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(value, anything)


invite_like = st.fixed_dictionaries(
    {},
    optional={
        "id": fields_of(ids),
        "name": fields_of(texts),
        "email": fields_of(emails),
        "phone": fields_of(phones),
        "primaryContact": contacts,
        "groups": identifier_sets,
        "addOns": identifier_sets,
        "attachments": identifier_sets,
        "resendOnChange": anything,
        "emial": texts,
    },
)
valid_invites = st.fixed_dictionaries(
    {"id": st.sampled_from(["inv_8f2k1", "inv.legacy-01", "A-1"])},
    optional={
        "name": st.sampled_from(["Acme Holdings Ltd", "Müller & Söhne GmbH", "株式会社サクラ商事"]),
        "email": st.just("kyb@acme.example"),
        "phone": st.just("+442079460000"),
        "primaryContact": st.just({"name": "Zoë Ångström", "email": "zoe@acme.example"}),
        "groups": st.lists(st.sampled_from(["emea", "apac", "priority"]), unique=True),
        "resendOnChange": st.booleans(),
    },
)


@PROPERTY
@given(entry=st.one_of(invite_like, anything, st.lists(anything, max_size=2)))
def test_the_quick_check_never_accepts_what_jsonschema_refuses(entry: Any) -> None:
    schema = invite_validators()

    if schema.entry_is_valid(entry):
        assert schema.entry.is_valid(entry), entry


@PROPERTY
@given(entry=valid_invites)
def test_the_quick_check_accepts_ordinary_valid_invites(entry: dict[str, Any]) -> None:
    schema = invite_validators()

    assert schema.entry.is_valid(entry)
    assert schema.entry_is_valid(entry)


# From test_loader_parser_surprises.py:
# When libyaml fails in a way the loader does not expect (another libyaml build,
# an error without a position), the user still gets the file, a line and column
# and a message: never a traceback, never an error placed nowhere.
TEXT = "invites:\n  - id: inv_1\n    name: [[[[Acme]]]]\n"


class _FailingParser:
    def __init__(self, error: Exception) -> None:
        self.error = error

    def get_event(self) -> Any:
        raise self.error

    def dispose(self) -> None:
        pass


@pytest.fixture
def libyaml_fails_on(monkeypatch: pytest.MonkeyPatch):
    """libyaml raising ``error`` on ``text``; any other text (a part of it) parses."""
    real = builder.Parser

    def fail(text: str, error: Exception) -> None:
        monkeypatch.setattr(
            source,
            "Parser",
            lambda source: _FailingParser(error) if source == text else real(source),
        )

    return fail


def _messages(text: str) -> list[str]:
    invites, problems = load_text(text, "team.yaml")
    assert invites == []
    return [str(p) for p in problems]


def _mark(line: int, column: int, index: int) -> yaml.Mark:
    return yaml.Mark("<file>", index, line, column, None, 0)  # no buffer: no snippet


def _too_deep(mark: yaml.Mark | None) -> yaml.MarkedYAMLError:
    return yaml.scanner.ScannerError(
        "while increasing flow level", None, "exceeded maximum nesting depth", mark
    )


TOO_DEEP = f"nested too deeply (limit {DEPTH_LIMIT})"


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (_too_deep(None), f"team.yaml:1:1: {TOO_DEEP}"),
        # A libyaml built with a lower limit than ours: the text up to its stop is within
        # our limit, so its own place is the best there is.
        (_too_deep(_mark(2, 14, len(TEXT) - 10)), f"team.yaml:3:15: {TOO_DEEP}"),
        (yaml.YAMLError("the stream broke"), "team.yaml:1:1: invalid YAML: the stream broke"),
        (yaml.MarkedYAMLError(), "team.yaml:1:1: invalid YAML"),
        (
            yaml.reader.ReaderError(
                "<file>", 3, 0x41, "utf-8", "special characters are not allowed"
            ),
            "team.yaml:1:1: a character YAML does not allow; save the file as text",
        ),
    ],
    ids=[
        "too-deep-without-a-place",
        "too-deep-before-our-limit-where-libyaml-stopped",
        "error-without-position",
        "marked-error-without-marks",
        "refused-character-we-allow",
    ],
)
def test_an_error_libyaml_places_oddly_or_not_at_all_is_shown_where_it_can_be(
    libyaml_fails_on, error, expected
):
    libyaml_fails_on(TEXT, error)
    assert _messages(TEXT) == [expected]


def test_the_config_loader_reports_it_the_same_way(libyaml_fails_on):
    text = "concurrency: 4\n"
    libyaml_fails_on(text, yaml.YAMLError("the stream broke"))
    loaded = load_yaml(text, "reconciler.yaml")
    assert loaded.document is None
    assert [str(p) for p in loaded.problems] == [
        "reconciler.yaml:1:1: invalid YAML: the stream broke"
    ]


def test_libyaml_stopping_deeper_than_our_limit_is_shown_where_ours_was_passed(libyaml_fails_on):
    text = "invites:\n  - id: inv_1\n    name: " + "[" * (DEPTH_LIMIT + 20) + "\n"
    libyaml_fails_on(text, _too_deep(_mark(2, len(text), len(text) - 1)))
    [message] = _messages(text)
    assert message.startswith("team.yaml:3:")
    assert f"nested too deeply (limit {DEPTH_LIMIT})" in message
    column = int(message.split(":")[2])
    assert column < len("    name: ") + DEPTH_LIMIT + 2  # at ours, not at libyaml's stop


# From test_yaml_mistakes.py: Mistakes people make writing YAML by hand, each shown where it is,
# with what to fix.
ENTRY = "invites:\n  - id: inv_1\n"


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        pytest.param(
            ENTRY + "    name:Acme\n    email: a@b.example\n",
            "3:5: while scanning a simple key could not find expected ':' "
            "(`name:` needs a space after its `:`, as in `name: value`)",
            id="no-space-after-colon: at the key, not the line after",
        ),
        pytest.param(
            "invites:\n  -id: inv_1\n    name: Acme\n",
            "3:9: mapping values are not allowed in this context "
            "(line 2: a list item needs a space after its `-`, as in `- id: ...`)",
            id="no-space-after-dash: the line named",
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
            '(a value holding `: ` needs quotes, as in `name: "Acme: Holdings"`)',
            id="colon-in-a-plain-value",
        ),
        pytest.param(
            ENTRY + "    name: Acme\n     email: a@acme.example\n",
            "4:11: mapping values are not allowed in this context "
            "(often a missing space after `:`, or a line indented wrongly)",
            id="indented-wrongly",
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
            ENTRY + "<<<<<<< HEAD\n    name: Acme\n=======\n    name: Acme Ltd\n>>>>>>> b\n",
            "3:1: while scanning a simple key could not find expected ':' (this line is a "
            "git merge-conflict marker, `<<<<<<<`: a merge left unresolved; keep the lines "
            "meant and remove the `<<<<<<<`, `=======` and `>>>>>>>` lines)",
            id="merge-conflict-markers: at the marker",
        ),
        pytest.param(
            ENTRY + "    name: Acme\n  name: B\n=======\n",
            "4:3: while parsing a block collection did not find expected '-' indicator "
            "(line 5 is a git merge-conflict marker, `=======`: a merge left unresolved; "
            "keep the lines meant and remove the `<<<<<<<`, `=======` and `>>>>>>>` lines)",
            id="merge-conflict-marker: its line named",
        ),
        pytest.param(
            (ENTRY + "    name: Acme\n  name: B\n=======\n").replace("\n", "\r\n"),
            "4:3: while parsing a block collection did not find expected '-' indicator "
            "(line 5 is a git merge-conflict marker, `=======`: a merge left unresolved; "
            "keep the lines meant and remove the `<<<<<<<`, `=======` and `>>>>>>>` lines)",
            id="merge-conflict-marker: its line named, CRLF",
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


# -- the contract with the reader of a streamed list: each item located and placed by the
# builder, every item handed over once, in order.

BLOCK = """\
invites:
  - id: inv_0
    name: Acme
  - {id: inv_1}
  -   id: inv_2
  - just text
"""


class Item(NamedTuple):
    number: int  # its index in the list
    located: Located
    mark: Mark


def _stream(text: str) -> tuple[Parsed, list[Item]]:
    taken: list[Item] = []
    return stream(text, "t.yaml", Lines(text), "invites", lambda *a: taken.append(Item(*a))), taken


def test_each_streamed_item_is_handed_over_with_its_place() -> None:
    (document, problems), taken = _stream(BLOCK)
    assert problems == [] and document is not None
    assert [(i.number, i.located.value) for i in taken] == [
        (0, {"id": "inv_0", "name": "Acme"}),
        (1, {"id": "inv_1"}),
        (2, {"id": "inv_2"}),
        (3, "just text"),
    ]
    assert [i.mark for i in taken] == [Mark(2, 5), Mark(4, 5), Mark(5, 7), Mark(6, 5)]
    assert [i.mark for i in taken] == [Lines(BLOCK).mark(i.located.position) for i in taken]
    assert taken[0].located.mark(("name",)) == Mark(3, 11)
    assert taken[3].located.spot is None  # a scalar has no parts
    assert document.value == {"invites": [None] * 4}  # streamed items are not kept


def test_streamed_items_are_placed_without_reading_the_file_again() -> None:
    # The builder knows where each entry's mapping opened: a file read in chunks is not
    # read a second time for the place of every invite.
    data = BLOCK.replace("  - just text\n", "").encode()
    reads: list[int] = []

    def read_again() -> bytes:
        reads.append(1)
        return data

    taken: list[Item] = []
    source = FileSource(io.BytesIO(data), 1 << 20)
    read = stream(source, "t.yaml", Lines(read_again), "invites", lambda *a: taken.append(Item(*a)))
    assert read.problems == [] and len(taken) == 3
    assert [i.mark for i in taken] == [Mark(2, 5), Mark(4, 5), Mark(5, 7)]
    assert reads == []


def test_a_list_that_came_through_a_merge_is_kept_and_its_items_handed_over_placed() -> None:
    text = "<<:\n  invites:\n    - id: inv_0\n    - {id: inv_1}\n"
    (document, problems), taken = _stream(text)
    assert problems == [] and document is not None
    assert [(i.number, i.located.value, i.mark) for i in taken] == [
        (0, {"id": "inv_0"}, Mark(3, 7)),
        (1, {"id": "inv_1"}, Mark(4, 7)),
    ]
    assert taken[1].located.mark(("id",)) == Mark(4, 12)
    assert document.value == {"invites": [{"id": "inv_0"}, {"id": "inv_1"}]}


def test_a_list_that_came_through_an_alias_is_kept_and_its_items_handed_over_placed() -> None:
    text = "<<: {invites: &all [{id: inv_0}, text]}\ninvites: *all\n"
    (_, problems), taken = _stream(text)
    assert problems == []
    assert [(i.number, i.located.value, i.mark) for i in taken] == [
        (0, {"id": "inv_0"}, Mark(1, 21)),
        (1, "text", Mark(1, 34)),
    ]
    assert taken[0].located.spot is not None and taken[1].located.spot is None


def test_nothing_is_handed_over_without_a_top_level_list() -> None:
    (document, _), taken = _stream("invites: []\n")
    assert document is not None and document.value == {"invites": []} and taken == []
    for text in ("other: [1]\n", "invites: text\n", "invites:\n", "- a list\n", ""):
        assert _stream(text)[1] == [], text


def test_a_list_nested_deeper_or_under_another_key_is_kept_not_streamed() -> None:
    text = "other:\n  invites: [1, 2]\nmore: [3]\n"
    (document, problems), taken = _stream(text)
    assert problems == [] and taken == []
    assert document is not None
    assert document.value == {"other": {"invites": [1, 2]}, "more": [3]}


def test_a_file_that_cannot_be_read_says_how_far_the_stream_went() -> None:
    (document, problems), taken = _stream("invites:\n  - id: a\n  - *nowhere\n")
    assert document is None and len(problems) == 1 and len(taken) == 1


# A plain value cut short by a comment (`name: Store #12`), found as libyaml reads it.


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


def test_entries_after_a_nel_ls_or_ps_are_placed_on_the_lines_libyaml_counts() -> None:
    # libyaml's marks (an entry's place) and the line table (every other place) agree.
    text = "invites:\n  - id: a\x85  - id: b\u2028  - id: c\u2029  - {id: d, name: 5}\n"
    taken = _stream(text)[1]
    assert [i.mark for i in taken] == [Mark(2, 5), Mark(3, 5), Mark(4, 5), Mark(5, 5)]
    assert [i.mark for i in taken] == [Lines(text).mark(i.located.position) for i in taken]
    assert [(p.line, p.column) for p in load_text(text, "t.yaml")[1]] == [(5, 19)]
