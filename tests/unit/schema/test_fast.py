"""The quick check compiled from a schema: for the keywords it knows it says exactly
what jsonschema says (so valid invites skip jsonschema); whatever it does not
know, or doubts, it answers False and leaves to jsonschema. Never more lenient."""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from jsonschema import Draft202012Validator, FormatChecker

from reconciler.schema.check import FORMATS, format_checker
from reconciler.schema.fast import compile_check

STRING = {"type": "string"}
WORD = {"type": "string", "pattern": "^[a-z]+$"}  # items with a pattern are remembered


class Text(str):
    """A subclass of str: text to jsonschema (its `type`, `pattern`, lengths)."""


EXACT: list[tuple[dict[str, Any], list[Any]]] = [
    ({"type": "array"}, [[], [1, "a"], "ab", None]),
    ({"type": "array", "minItems": 1}, [[], [1]]),
    ({"type": "array", "maxItems": 2}, [[1, 2], [1, 2, 3]]),
    ({"type": "array", "items": STRING}, [["a"], ["a", 1], []]),
    ({"type": "array", "uniqueItems": True}, [[1, 2], [1, 1], ["a", "a"], [[1], [1]]]),
    ({"type": "array", "uniqueItems": True}, [[], [None], [None, None], ["a", "b", "c", "a"]]),
    (  # texts: two and three compared in place, more in a set
        {"type": "array", "items": WORD, "uniqueItems": True},
        [
            *(["a", "b", "c", "d", "e"][:n] for n in range(6)),
            ["a", "a"],
            ["a", "b", "a"],
            ["b", "a", "a"],
            ["a", "b", "b"],
            ["a", "b", "c", "d", "a"],
            ["a", Text("a")],
            ["a", "B"],
            ["a", None],
            ["a", ["a"]],
            [["a"], ["a"]],
            "ab",
            None,
        ],
    ),
    (  # texts with a format: not remembered, still compared in place
        {"type": "array", "items": {"type": "string", "format": "email"}, "uniqueItems": True},
        [["a@b", "c@d"], ["a@b", "a@b"], ["a@b", "ab"], ["a@b", "c@d", "a@b"], ["a@b", 1]],
    ),
    (
        {"type": "array", "items": {"type": "string", "enum": ["x", "y"]}, "minItems": 1},
        [["x"], ["x", "y", "x"], ["z"], [], [Text("y")], ["x", None], [1]],
    ),
    ({"type": "array", "items": {"type": "boolean"}, "maxItems": 2}, [[True], [1], [True] * 3]),
    ({"type": "array", "items": {"type": "array", "items": WORD}}, [[["a"], []], [["a", 1]]]),
    ({"type": "string"}, ["", "a", 1, None]),
    ({"type": "string", "minLength": 2}, ["a", "ab"]),
    ({"type": "string", "maxLength": 2}, ["ab", "abc"]),
    ({"type": "string", "pattern": "^a"}, ["ab", "ba"]),
    ({"type": "string", "format": "date"}, ["2026-11-25", "2026-13-45", "x"]),
    ({"type": "string", "enum": ["a", "b"]}, ["a", "b", "c", 1, None]),
    ({"type": "string"}, [Text("a"), True, b"a", ["a"], {"a": 1}]),
    (
        {
            "type": "string",
            "minLength": 2,
            "maxLength": 3,
            "pattern": "^[a-c]",
            "enum": ["ab", "ccc", "ad", "abcd"],
        },
        ["ab", "ccc", "ad", "abcd", "a", "bd", Text("ab"), None, 2, True],
    ),
    ({"type": "string", "maxLength": 3}, ["", "abc", "abcd", Text("abcd"), None]),
    ({"type": "string", "enum": ["a"]}, ["a", Text("a"), "A", None]),
    ({"type": "string", "pattern": "b"}, ["abc", "a\nb", "ac"]),  # search, not match
    ({"type": "string", "format": "email"}, ["a@b", "ab", Text("ab"), None, 1]),
    ({"type": "boolean"}, [True, False, 0, "true"]),
    (
        {"anyOf": [{"type": "boolean"}, {"type": "array", "items": STRING, "minItems": 1}]},
        [True, False, ["a"], [], [1], "a", None],
    ),
    (
        {"anyOf": [WORD, {"type": "array", "items": WORD, "uniqueItems": True}]},
        ["a", "A", ["a"], ["a", "a"], [], None, 1],
    ),
    ({"type": "object"}, [{}, {"x": 1}, []]),
    ({"type": "object", "$defs": {"x": STRING}}, [{}, []]),  # the file-level schema has $defs
    (
        {"type": "object", "properties": {"a": STRING}, "required": ["a"]},
        [{"a": "x"}, {}, {"a": 1}, {"a": "x", "b": 1}],
    ),
    (
        {"type": "object", "properties": {"a": STRING}, "additionalProperties": False},
        [{"a": "x"}, {"b": "x"}, {}],
    ),
    (
        {
            "type": "object",
            "properties": {"a": WORD, "b": {"type": "object", "required": ["c"]}},
            "required": ["a", "a"],
            "additionalProperties": False,
        },
        [
            {"a": "x"},
            {"a": "x", "b": {"c": None}},
            {"a": "x", "b": {}},
            {"a": "x", "b": []},
            {"a": "X"},
            {"b": {"c": 1}},
            {"a": "x", 1: "x"},
            OrderedDict(a="x"),
            {"a": Text("x")},
            {"a": None},
            None,
            [("a", "x")],
            "a",
        ],
    ),
    (  # the invite file's top level: `x-` keys hold templates, anything (issue 39, row 3)
        {
            "type": "object",
            "properties": {"a": STRING},
            "patternProperties": {"^x-": {}},
            "additionalProperties": False,
        },
        [{"a": "x"}, {"a": "x", "x-t": [1]}, {"a": "x", "y-t": 1}, {"a": "x", "ax-": 1}, {}],
    ),
]


@pytest.mark.parametrize(
    ("schema", "value"),
    [(schema, value) for schema, values in EXACT for value in values],
    ids=lambda v: repr(v)[:40],
)
def test_for_the_keywords_it_knows_it_says_what_jsonschema_says(schema: Any, value: Any) -> None:
    formats = FormatChecker()
    valid = Draft202012Validator(schema, format_checker=formats).is_valid(value)
    assert compile_check(schema, formats.checkers)(value) is valid


DOUBT: list[tuple[Any, Any]] = [
    ({"type": ["string", "null"]}, "a"),  # a list of types
    ({"type": "string", "enum": ["a", 1]}, "a"),  # an enum of other than text
    ({"type": "string", "const": "a"}, "a"),  # a keyword it does not know
    ({"anyOf": [{"type": "null"}, STRING]}, None),  # a branch it does not know
    ({"enum": ["a"]}, "a"),  # no type at all
    (True, "a"),  # a schema that is not a mapping
    ({"type": "object", "additionalProperties": STRING}, {"b": "x"}),
    ({"type": "object", "patternProperties": {"^x-": STRING}}, {"x-a": "x"}),  # a checked pattern
    ({"type": "array", "uniqueItems": True}, [[1], [2]]),  # not hashable: in doubt
    ({"type": "array", "uniqueItems": True}, [1, True]),  # 1 == True to Python, not to jsonschema
    ({"type": "array", "uniqueItems": 1}, [1, 2]),  # a true that is not `true`
    ({"type": "string", "minLength": 1.0}, "a"),  # a length that is not an int
    ({"type": "array", "maxItems": True}, [1]),
]


@pytest.mark.parametrize(("schema", "value"), DOUBT, ids=lambda v: repr(v)[:40])
def test_what_it_does_not_know_or_doubts_is_left_to_jsonschema(schema: Any, value: Any) -> None:
    formats = FormatChecker()
    assert Draft202012Validator(schema, format_checker=formats).is_valid(value)
    assert compile_check(schema, formats.checkers)(value) is False


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "string", "pattern": "("},
        {"type": "array", "items": {"type": "string", "pattern": "("}},
        {"type": "object", "patternProperties": {"(": {}}, "additionalProperties": False},
    ],
    ids=repr,
)
def test_a_pattern_python_cannot_compile_is_left_to_jsonschema(schema: Any) -> None:
    check = compile_check(schema, {})  # compiled without an error: the schema's own problem
    assert [check(value) for value in ("(", ["("], {"(": 1})] == [False] * 3


def test_a_format_it_has_no_function_for_is_left_to_jsonschema() -> None:
    schema = {"type": "string", "format": "date"}
    assert compile_check(schema, {})("2026-11-25") is False
    assert compile_check(schema, FormatChecker().checkers)("2026-11-25") is True


def test_an_open_object_with_a_wrong_extra_field_is_never_accepted() -> None:
    # The one way to be more lenient than jsonschema: trust an extra field that a
    # schema for additional properties would have refused.
    schema = {"type": "object", "properties": {}, "additionalProperties": STRING}
    assert compile_check(schema, FormatChecker().checkers)({"b": 1}) is False


@pytest.mark.parametrize("schema", [schema for schema, _ in EXACT], ids=lambda v: repr(v)[:40])
def test_asked_again_a_check_answers_as_the_first_time(schema: Any) -> None:
    # String checks remember the texts they passed: the verdict must not change.
    formats = FormatChecker()
    values = next(v for s, v in EXACT if s is schema)
    check = compile_check(schema, formats.checkers)
    first = [check(value) for value in values]
    assert [check(value) for value in reversed(values)] == first[::-1]
    valid = Draft202012Validator(schema, format_checker=formats).is_valid
    assert first == [valid(value) for value in values]


def test_a_text_one_check_passed_is_not_passed_by_another() -> None:
    formats = FormatChecker().checkers
    schema = {
        "type": "object",
        "properties": {
            "a": {"type": "array", "items": {"type": "string", "pattern": "^x"}},
            "b": {"type": "array", "items": {"type": "string", "pattern": "^y"}},
            "c": {"type": "array", "items": {"type": "string", "maxLength": 2}},
            "d": {"type": "string", "pattern": "^y"},
        },
    }
    check = compile_check(schema, formats)
    assert check({"a": ["xyz"]}) is True
    assert check({"b": ["xyz"]}) is False
    assert check({"c": ["xyz"]}) is False
    assert check({"d": "xyz"}) is False
    assert check({"a": [["xyz"]]}) is False  # not text, not hashable: no cache asked


def test_what_a_string_check_remembers_is_bounded() -> None:
    check = compile_check({"type": "array", "items": {"type": "string", "pattern": "^t"}}, {})
    assert check(["t" * 65, "t" * 64]) is True
    remembered = next(value for value in check.__globals__.values() if isinstance(value, set))
    assert remembered == {"t" * 64}  # short texts only
    for n in range(5000):
        assert check([f"t{n}"]) is True
    assert len(remembered) == 4096


def test_a_subclass_of_str_is_never_taken_for_an_address_it_equals() -> None:
    # The tool's e-mail format refuses what is not exactly text; so does the check, even
    # after it has passed the equal text (a set would take one for the other).
    schema = {
        "type": "object",
        "properties": {
            "email": {"type": "string", "format": "email"},
            "cc": {"type": "array", "items": {"type": "string", "format": "email", "pattern": "@"}},
        },
    }
    valid = Draft202012Validator(schema, format_checker=format_checker()).is_valid
    check = compile_check(schema, FORMATS)
    for value in (
        {"email": "kyb@acme.example", "cc": ["kyb@acme.example"]},
        {"email": Text("kyb@acme.example")},
        {"cc": [Text("kyb@acme.example")]},
    ):
        assert check(value) is valid(value), value
        assert check(value) is valid(value), value  # and asked again


def test_a_list_of_remembered_texts_passes_as_the_first_time() -> None:
    schema = {"type": "array", "items": WORD, "uniqueItems": True}
    valid = Draft202012Validator(schema).is_valid
    check = compile_check(schema, {})
    values: list[Any] = [["a", "b"], ["b", "a"], ["a", "b", "a"], ["a", Text("b")], ["a", 1]]
    values += [["a", ["b"]], ["a", {"b": 1}], [Text("a"), "b"], ["a", "b", "c", "b"], ["A"]]
    for value in values + values[::-1]:
        assert check(value) is valid(value), value


@pytest.mark.parametrize("kind", ["array", "object"])
def test_a_deeply_nested_schema_compiles_and_agrees(kind: str) -> None:
    # Python allows 20 nested loops in a function: deep parts get functions of their own.
    schema: dict[str, Any] = WORD
    good: Any = "a"
    bad: Any = "A"
    for _ in range(40):
        if kind == "array":
            schema = {"type": "array", "items": schema, "uniqueItems": True}
            good, bad = [good], [good, bad]
        else:
            schema = {"type": "object", "properties": {"k": schema}, "required": ["k"]}
            good, bad = {"k": good}, {"k": bad}
    check = compile_check(schema, {})
    valid = Draft202012Validator(schema).is_valid
    assert (check(good), check(bad)) == (valid(good), valid(bad)) == (True, False)


@pytest.mark.parametrize(
    "name",
    ["a'b", 'a"b', "a\\", "\n", "'); import os; os._exit(3); ('", "__import__('os')", "", "é"],
)
def test_a_property_name_is_only_ever_a_key(name: str) -> None:
    # The check is Python source written from the schema: a name is written through
    # repr() and never becomes code, whatever it holds.
    schema = {
        "type": "object",
        "properties": {name: WORD},
        "required": [name],
        "additionalProperties": False,
    }
    valid = Draft202012Validator(schema).is_valid
    check = compile_check(schema, {})
    for value in ({name: "a"}, {name: "A"}, {}, {name: "a", "other": "a"}):
        assert check(value) is valid(value), value


def test_uniqueness_written_one_way_is_not_taken_for_another() -> None:
    # `uniqueItems: 1` is true to jsonschema: it must never be read as absent.
    schema = {"type": "array", "uniqueItems": 1}
    assert not Draft202012Validator(schema).is_valid([1, 1])
    assert compile_check(schema, {})([1, 1]) is False


# -- generated values against one schema of every keyword the check knows -----------------

SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["id"],
    "additionalProperties": False,
    "patternProperties": {"^x-": {}},
    "properties": {
        "id": {"type": "string", "pattern": "^[a-z0-9]{1,4}$(?!\\n)"},
        "name": {"type": "string", "minLength": 1, "maxLength": 4},
        "email": {"type": "string", "format": "email", "maxLength": 10},
        "kind": {"type": "string", "enum": ["a", "b"]},
        "flag": {"type": "boolean"},
        "tags": {
            "type": "array",
            "uniqueItems": True,
            "maxItems": 5,
            "items": {"type": "string", "minLength": 1, "pattern": "^[a-c]*$"},
        },
        "mails": {
            "type": "array",
            "uniqueItems": True,
            "items": {"type": "string", "format": "email"},
        },
        "contact": {
            "type": "object",
            "required": ["name"],
            "additionalProperties": False,
            "properties": {"name": {"type": "string", "maxLength": 3}, "tags": {"type": "array"}},
        },
        "choice": {
            "anyOf": [
                {"type": "boolean"},
                {
                    "type": "array",
                    "minItems": 1,
                    "uniqueItems": True,
                    "items": {"type": "string", "enum": ["a", "b", "c"]},
                },
            ]
        },
    },
}
_odd = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-1, 1),
    st.sampled_from(["", "\n", [], {}, ["a"], {"name": "a"}]),
)
_texts = st.one_of(
    st.sampled_from(["a", "b", "c", "ab", "abcd", "abcde", "a\n", "A", "é", "", "a@b.example"]),
    st.text(alphabet="abcA@.\n", max_size=6),
    st.builds(Text, st.sampled_from(["a", "b", "ab", "a@b.example"])),
)
_values = st.one_of(_texts, _odd)
_lists = st.one_of(st.lists(_texts, max_size=6), st.lists(_values, max_size=3), _values)


def _entries(good: bool) -> st.SearchStrategy[dict[str, Any]]:
    """Entries of values valid for their field, or (not ``good``) of any values, keys
    unknown, odd values and texts that only look valid."""

    def field(valid: st.SearchStrategy[Any], other: st.SearchStrategy[Any]) -> Any:
        return valid if good else st.one_of(valid, other)

    words = st.lists(st.sampled_from(["a", "b", "c", "ab", "abc", Text("bc")]), unique=True)
    mails = st.lists(st.sampled_from(["a@b.example", "c@d.example"]), unique=True)
    contact = st.fixed_dictionaries(
        {"name": field(st.sampled_from(["a", "abc", Text("ab")]), _values)},
        optional={"tags": field(st.lists(_values, max_size=2), _lists)},
    )
    optional = {
        "name": field(st.sampled_from(["a", "abcd", Text("ab")]), _values),
        "email": field(st.sampled_from(["a@b.example", "c@d.example"]), _values),
        "kind": field(st.sampled_from(["a", "b", Text("a")]), _values),
        "flag": field(st.booleans(), _values),
        "tags": field(words, _lists),
        "mails": field(mails, _lists),
        "contact": field(contact, _values),
        "choice": field(
            st.one_of(st.booleans(), st.lists(st.sampled_from("abc"), min_size=1, unique=True)),
            _lists,
        ),
        "x-note": _values,
    }
    if not good:
        optional |= {"other": _values, "x": _values}
    ids = field(st.sampled_from(["a", "b1", "abcd", Text("a")]), _values)
    return st.fixed_dictionaries({"id": ids}, optional=optional)


_CHECK = compile_check(SCHEMA, FORMATS)  # one check for every example: remembered texts too
_VALID = Draft202012Validator(SCHEMA, format_checker=format_checker()).is_valid


@given(entry=st.one_of(_entries(good=True), _entries(good=False), _odd))
def test_for_generated_values_it_says_what_jsonschema_says(entry: Any) -> None:
    assert _CHECK(entry) is _VALID(entry), entry
