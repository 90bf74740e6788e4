"""The quick check compiled from a schema: for the keywords it knows it says exactly
what jsonschema says (so valid invites skip jsonschema); whatever it does not
know, or doubts, it answers False and leaves to jsonschema. Never more lenient."""

from __future__ import annotations

from typing import Any

import pytest
from jsonschema import Draft202012Validator, FormatChecker

from reconciler.schema.fast import compile_check

STRING = {"type": "string"}

EXACT: list[tuple[dict[str, Any], list[Any]]] = [
    ({"type": "array"}, [[], [1, "a"], "ab", None]),
    ({"type": "array", "minItems": 1}, [[], [1]]),
    ({"type": "array", "maxItems": 2}, [[1, 2], [1, 2, 3]]),
    ({"type": "array", "items": STRING}, [["a"], ["a", 1], []]),
    ({"type": "array", "uniqueItems": True}, [[1, 2], [1, 1], ["a", "a"], [[1], [1]]]),
    ({"type": "string"}, ["", "a", 1, None]),
    ({"type": "string", "minLength": 2}, ["a", "ab"]),
    ({"type": "string", "maxLength": 2}, ["ab", "abc"]),
    ({"type": "string", "pattern": "^a"}, ["ab", "ba"]),
    ({"type": "string", "format": "date"}, ["2026-11-25", "2026-13-45", "x"]),
    ({"type": "string", "enum": ["a", "b"]}, ["a", "b", "c", 1, None]),
    ({"type": "boolean"}, [True, False, 0, "true"]),
    (
        {"anyOf": [{"type": "boolean"}, {"type": "array", "items": STRING, "minItems": 1}]},
        [True, False, ["a"], [], [1], "a", None],
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
]


@pytest.mark.parametrize(("schema", "value"), DOUBT, ids=lambda v: repr(v)[:40])
def test_what_it_does_not_know_or_doubts_is_left_to_jsonschema(schema: Any, value: Any) -> None:
    formats = FormatChecker()
    assert Draft202012Validator(schema, format_checker=formats).is_valid(value)
    assert compile_check(schema, formats.checkers)(value) is False


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
            "a": {"type": "string", "pattern": "^x"},
            "b": {"type": "string", "pattern": "^y"},
            "c": {"type": "string", "maxLength": 2},
        },
    }
    check = compile_check(schema, formats)
    assert check({"a": "xyz"}) is True
    assert check({"b": "xyz"}) is False
    assert check({"c": "xyz"}) is False
    assert check({"a": ["xyz"]}) is False  # not text, not hashable: no cache asked


def test_what_a_string_check_remembers_is_bounded() -> None:
    check = compile_check({"type": "string"}, {})
    for n in range(5000):
        assert check(f"t{n}") is True
    assert check("t" * 1000) is True
    remembered = next(
        cell.cell_contents
        for cell in check.__closure__ or ()
        if isinstance(cell.cell_contents, set)
    )
    assert len(remembered) == 4096
    assert "t" * 1000 not in remembered
