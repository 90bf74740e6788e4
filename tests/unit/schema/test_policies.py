"""Policies compiled once, judged by jsonschema with every pattern on RE2: what compiling
refuses, and a failure placed at the field a failing keyword names."""

from __future__ import annotations

import warnings
from typing import Any

import pytest

from reconciler.errors import FileProblem
from reconciler.schema import policies
from reconciler.schema.policies import Policies, Policy, PolicyError, compile_policy

SCHEMAS: list[Any] = [
    {
        "if": {"properties": {"groups": {"contains": {"const": "us"}}}, "required": ["groups"]},
        "then": {
            "properties": {"attachments": {"contains": {"const": "ein-letter"}}},
            "required": ["attachments"],
        },
    },
    {"properties": {"email": {"not": {"pattern": "@(gmail|yahoo)\\."}}}},
]


def _compiled(schema: Any) -> Any:
    return compile_policy(Policy("p", "m", "error", schema, "reconciler.yaml", 0))


def test_a_failure_is_placed_at_the_field_the_failing_keyword_names() -> None:
    policy = _compiled(SCHEMAS[0])
    assert policy.failure({"id": "i", "groups": ["us"], "attachments": ["x"]}) == ("attachments",)
    assert policy.failure({"id": "i", "groups": ["us"]}) == ()
    email = _compiled(SCHEMAS[1])
    assert email.failure({"id": "i", "email": "j@gmail.com"}) == ("email",)
    assert email.failure({"id": "i", "email": "j@acme.example"}) is None


def test_a_policy_comparing_the_whole_entry_with_a_value_sees_every_field() -> None:
    # Every entry has an `id`, so none is the empty object.
    entry = {"id": "inv_oresund", "name": "Øresund Logistik ApS"}
    assert _compiled({"enum": [{}]}).failure(entry) == ()
    assert _compiled({"not": {"enum": [{}]}}).failure(entry) is None


def test_contains_is_placed_at_the_list_it_judges() -> None:
    # At least one group a two-letter country code.
    policy = _compiled({"properties": {"groups": {"contains": {"maxLength": 2}}}})
    assert policy.failure({"id": "inv_1", "groups": ["emea", "de"]}) is None
    assert policy.failure({"id": "inv_1", "groups": ["emea", "enterprise"]}) == ("groups",)
    assert policy.failure({"id": "inv_1", "groups": []}) == ("groups",)
    assert policy.failure({"id": "inv_1"}) is None


@pytest.mark.parametrize(
    ("pattern", "text", "found"),
    [
        ("^inv_", "inv_1", True),
        ("^inv_", "xinv_1", False),
        ("a$", "ba\n", False),  # RE2's `$` is the end of the text, not before its last \n
        ("", "", True),
        ("(?i)ACME", "Acme Ltd", True),
        ("é+", "Café", True),
        ("\\bab\\b", "ab cd", True),
    ],
)
def test_a_pattern_is_searched_for_on_re2(pattern: str, text: str, found: bool) -> None:
    policy = _compiled({"properties": {"name": {"pattern": pattern}}})
    assert (policy.failure({"id": "inv_1", "name": text}) is None) is found


def test_a_loop_only_some_entries_reach_is_refused_when_compiled_at_its_ref() -> None:
    # It used to compile (the probe entry has no phone) and stop the run at the first
    # entry with one: refused before any entry is judged.
    schema = {"if": {"required": ["phone"]}, "then": {"$ref": "#"}}
    assert _refusal(schema) == (("then", "$ref"), LOOP)


# -- what compiling refuses --------------------------------------------------------------


def _refusal(schema: Any) -> tuple[tuple[Any, ...], str] | None:
    try:
        _compiled(schema)
    except PolicyError as error:
        return error.path, error.reason
    return None


OUTSIDE = (
    "may only point inside the policy (`#/$defs/...`): "
    "a policy never fetches a schema from a URL or a file"
)
NOT_ALLOWED = "is not allowed in a policy: a `$ref` names a place in it (`#/$defs/NAME`)"


@pytest.mark.parametrize(
    ("schema", "refused"),
    [
        ({"$ref": "https://x.example/s.json"}, (("$ref",), f"`$ref` {OUTSIDE}")),
        # Issue 51: no local file either, however written (no path rule needed: none is read).
        ({"$ref": "../../etc/passwd"}, (("$ref",), f"`$ref` {OUTSIDE}")),
        ({"$ref": "file:///etc/passwd#/x"}, (("$ref",), f"`$ref` {OUTSIDE}")),
        (
            {"properties": {"a": {"$dynamicRef": "s.json"}}},
            (("properties", "a", "$dynamicRef"), f"`$dynamicRef` {OUTSIDE}"),
        ),
        ({"allOf": [{"$id": "x"}]}, (("allOf", 0, "$id"), f"`$id` {NOT_ALLOWED}")),
        ({"$dynamicRef": "#x"}, (("$dynamicRef",), f"`$dynamicRef` {NOT_ALLOWED}")),
        ({"$dynamicAnchor": "x"}, (("$dynamicAnchor",), f"`$dynamicAnchor` {NOT_ALLOWED}")),
        ({"$anchor": "x"}, (("$anchor",), f"`$anchor` {NOT_ALLOWED}")),
        (
            {"$schema": "http://json-schema.org/draft-07/schema#"},
            (
                ("$schema",),
                "a policy is draft 2020-12: `$schema` may only be "
                "https://json-schema.org/draft/2020-12/schema",
            ),
        ),
        (
            {"allOf": [{"$ref": "#/$defs/missing"}]},
            (("allOf", 0, "$ref"), "`$ref` points at nothing in the policy"),
        ),
        # A pointer through a list by a name, or through a value: nothing, not a traceback.
        (
            {"allOf": [{"$ref": "#/allOf/x"}]},
            (("allOf", 0, "$ref"), "`$ref` points at nothing in the policy"),
        ),
        (
            {"$defs": {"t": {"uniqueItems": True}}, "items": {"$ref": "#/$defs/t/uniqueItems/0"}},
            (("items", "$ref"), "`$ref` points at nothing in the policy"),
        ),
        # At a value, not a schema: jsonschema would fail on every entry reaching it.
        *(
            (
                {"$defs": {"code": code}, "properties": {"name": {"$ref": ref}}},
                (
                    ("properties", "name", "$ref"),
                    f"`$ref` points at {what} in the policy, not at a schema (one that "
                    "`$defs`, `properties`, `allOf` or another keyword of schemas holds)",
                ),
            )
            for code, ref, what in [
                ({"pattern": "^[A-ZÄÖÜ]"}, "#/$defs/code/pattern", "text"),
                ({"pattern": "^[A-ZÄÖÜ]"}, "#/$defs/code/pattern/0", "text"),
                ({"enum": ["Société", "GmbH"]}, "#/$defs/code/enum", "a list"),
                ({"maxLength": 80}, "#/$defs/code/maxLength", "a number"),
                ({"const": None}, "#/$defs/code/const", "null"),
            ]
        ),
        # Not JSON Schema: the config file's own schema refuses it first, and compiling
        # on its own does too, at its place.
        (
            {"properties": {"email": {"type": "text"}}},
            (
                ("properties", "email", "type"),
                "not valid JSON Schema (draft 2020-12): 'text' is not valid under any of the "
                "given schemas",
            ),
        ),
        (
            {"properties": {"groups": {"minItems": -1}}},
            (
                ("properties", "groups", "minItems"),
                "not valid JSON Schema (draft 2020-12): -1 is less than the minimum of 0",
            ),
        ),
        # A boolean is a schema.
        ({"$defs": {"no": False}, "properties": {"fax": {"$ref": "#/$defs/no"}}}, None),
        # Values, not schemas: what they hold is never a reference.
        (
            {
                "const": {"$ref": "#/nowhere", "$id": "x"},
                "enum": [{"$ref": "https://x.example"}],
                "default": {"$ref": "#/nowhere", "$anchor": "a"},
                "examples": [{"$ref": "#/nowhere", "$anchor": "a"}],
            },
            None,
        ),
    ],
    ids=lambda v: str(v)[:30],
)
def test_a_policy_is_refused_at_the_part_that_cannot_be_run(schema: Any, refused: Any) -> None:
    assert _refusal(schema) == refused


def _all_of(count: int) -> dict[str, Any]:
    """A subschema of ``count`` + 2: itself, its list, and ``count`` empty schemas."""
    return {"allOf": [{}] * count}


def _referred(name: str, pointer: str, count: int, times: int) -> dict[str, Any]:
    """3 + times * (count + 3): itself, `$defs` (counted once), the list, and each `$ref`
    (1) counting what it points at (count + 2) every time it is met."""
    return {"$defs": {name: _all_of(count)}, "allOf": [{"$ref": pointer}] * times}


TOO_DEEP = (
    "it nests too deeply to be followed (more than 50 schemas one inside another, its "
    "`$ref`s followed); an invite entry nests three levels, and no rule needs so many"
)
LOOP = (
    "`$ref` leads back into a schema it stands in (a loop); an invite entry nests three "
    "levels at most: write each level out"
)
CHAIN = (
    "`$ref`s lead one to the next more than 32 times to here; point at the schema meant, "
    "not at another `$ref`"
)
FAN_OUT = (
    "its `$ref`s expand it to more than 5,000 subschemas (each `$ref` counts the schema it "
    "points at, every time it is met); a policy that large would take minutes on each invite"
)


@pytest.mark.parametrize(
    ("at_limit", "past_it"),
    [
        (_all_of(4998), _all_of(4999)),  # itself, its list, 4,998 schemas: exactly 5,000
        (_referred("a", "#/$defs/a", 260, 19), _referred("a", "#/$defs/a", 144, 34)),
        (_referred("a/b", "#/$defs/a~1b", 260, 19), _referred("a/b", "#/$defs/a~1b", 144, 34)),
        (_referred("c~d", "#/$defs/c~0d", 260, 19), _referred("c~d", "#/$defs/c~0d", 144, 34)),
        (
            {
                "$defs": {"l": {"anyOf": [_all_of(260)]}},
                "allOf": [{"$ref": "#/$defs/l/anyOf/0"}] * 19,
            },
            {
                "$defs": {"l": {"anyOf": [_all_of(144)]}},
                "allOf": [{"$ref": "#/$defs/l/anyOf/0"}] * 34,
            },
        ),
    ],
    ids=["plain", "ref", "ref-escaped-slash", "ref-escaped-tilde", "ref-into-a-list"],
)
def test_a_policy_may_expand_to_5000_subschemas_and_no_more(at_limit: Any, past_it: Any) -> None:
    assert _refusal(at_limit) is None
    assert _refusal(past_it) == ((), FAN_OUT)


def test_values_and_defs_count_one_each_whatever_they_hold(monkeypatch: pytest.MonkeyPatch) -> None:
    # 1 + (1 + n) + 5: what is counted, at a bound of 100 (the 5,000 itself: above); at
    # 5,000 a policy this flat took two seconds of jsonschema checking its 4,999 schemas.
    monkeypatch.setattr(policies, "MAX_EXPANDED", 100)

    def valued(count: int) -> dict[str, Any]:
        return {
            **_all_of(count),
            "const": [1, 2],
            "enum": [1, 2],
            "default": [1, 2],
            "examples": [[1], [2]],
            "$defs": {"a": _all_of(3)},
        }

    assert _refusal(valued(93)) is None
    assert _refusal(valued(94)) == ((), FAN_OUT)


def test_entries_that_fail_on_different_sub_fields_are_placed_at_each() -> None:
    contact = {"properties": {"email": {"pattern": "^c"}, "name": {"pattern": "^n"}}}
    policy = _compiled({"properties": {"primaryContact": contact, "groups": {"maxItems": 1}}})
    good = {"id": "i", "primaryContact": {"name": "n", "email": "c@x"}, "groups": ["a"]}
    assert policy.failure(good) is None
    # Two contacts of the same sub-fields failing on different ones: two verdicts.
    bad_email = {**good, "primaryContact": {"name": "n", "email": "x@x"}}
    bad_name = {**good, "primaryContact": {"name": "m", "email": "c@x"}}
    assert policy.failure(bad_email) == ("primaryContact", "email")
    assert policy.failure(bad_name) == ("primaryContact", "name")
    assert policy.failure({**good, "groups": ["a", "b"]}) == ("groups",)
    assert policy.failure(bad_email) == ("primaryContact", "email")


def test_a_failure_is_placed_at_the_deepest_field_an_error_names() -> None:
    policy = _compiled(
        {"properties": {"name": {"const": "a"}, "attachments": {"items": {"const": "x"}}}}
    )
    assert policy.failure({"id": "i", "name": "b", "attachments": ["y"]}) == ("attachments", 0)


MAIL = "policy no-free-mail: use a company address"


def test_each_failed_policy_is_a_problem_placed_where_its_failure_is() -> None:
    rules = [
        Policy("us-letter", "US invites need an EIN letter", "error", SCHEMAS[0], "r.yaml", 0),
        Policy("no-free-mail", "use a company address", "warning", SCHEMAS[1], "r.yaml", 1),
    ]
    policies = Policies(tuple(compile_policy(rule) for rule in rules))
    places = {("attachments",): (7, 5), ("email",): (4, 12), (): (2, 3)}
    entry = {"id": "i", "groups": ["us"], "attachments": ["x"], "email": "j@gmail.com"}
    assert policies.check(entry, "invites/a.yaml", places.__getitem__) == [
        FileProblem(
            "invites/a.yaml", 7, 5, "policy us-letter: US invites need an EIN letter", "error"
        ),
        FileProblem("invites/a.yaml", 4, 12, MAIL, "warning"),
    ]
    assert policies.check({"id": "i"}, "invites/a.yaml", places.__getitem__) == []
    # A policy an entry passes does not keep the next one from judging it.
    entry = {"id": "inv_bjork", "name": "Björk Ísfeld ehf.", "email": "bjork@gmail.com"}
    (problem,) = policies.check(entry, "invites/is.yaml", {("email",): (3, 12)}.__getitem__)
    assert problem == FileProblem("invites/is.yaml", 3, 12, MAIL, "warning")


def test_a_pattern_re2_cannot_run_is_refused_at_its_place() -> None:
    assert _refusal({"properties": {"name": {"pattern": "(a)\\1"}}}) == (
        ("properties", "name", "pattern"),
        "`pattern` cannot be run in linear time (invalid escape sequence: \\1): policies' "
        "patterns run on RE2, which has no look-around and no back-references",
    )


def test_a_loop_the_entries_ids_lead_into_is_refused_when_compiled() -> None:
    schema = {"if": {"required": ["id"], "properties": {"id": {"pattern": "^inv_"}}}}
    assert _refusal({**schema, "then": {"$ref": "#"}}) == (("then", "$ref"), LOOP)


def test_a_policys_formats_are_checked() -> None:
    policy = _compiled({"properties": {"email": {"format": "email"}}})
    assert policy.failure({"id": "i", "email": "not-an-address"}) == ("email",)
    assert policy.failure({"id": "i", "email": "a@b.example"}) is None


@pytest.mark.parametrize("form", ["date-time", "uri", "emial"])
def test_a_format_no_check_exists_for_is_refused_at_its_place(form: str) -> None:
    # jsonschema says yes to anything in a format it cannot check: the rule would be skipped.
    where, why = _refusal({"properties": {"name": {"format": form}}}) or ((), "")
    assert where == ("properties", "name", "format")
    assert why == (
        f"`format: {form}` cannot be checked here, so it would pass any value; the formats "
        "checked are date, email, idn-email, idn-hostname, ipv4, ipv6, regex, time, uuid "
        "(or use `pattern`)"
    )
    # A field named `format` is a name, not the keyword.
    assert _refusal({"properties": {"format": {"pattern": "^a"}}}) is None


# -- issue 40: `$ref`s counted and followed as jsonschema follows them ------------------------


def _looped(count: int) -> dict[str, Any]:
    """A contact whose name refers back to the contact, and ``count`` empty schemas."""
    node = {"properties": {"name": {"$ref": "#/$defs/contact"}}, "allOf": [{}] * count}
    return {
        "$defs": {"contact": node},
        "properties": {"primaryContact": {"$ref": "#/$defs/contact"}},
    }


def test_a_ref_back_into_the_subschema_it_stands_in_is_refused_at_that_ref() -> None:
    # However few values: each level of an entry would multiply the work (900 `$ref`s to
    # `#` under `additionalProperties` took a minute on one invite).
    assert _refusal(_looped(3)) == (("$defs", "contact", "properties", "name", "$ref"), LOOP)
    wide = {"additionalProperties": {"allOf": [{"$ref": "#"}] * 900}}
    assert _refusal(wide) == (("additionalProperties", "allOf", 0, "$ref"), LOOP)


def test_a_note_that_names_a_place_in_the_policy_is_text_not_a_ref() -> None:
    # 2,509 subschemas; were any of the three notes followed as a `$ref`, 5,011 or more,
    # and the policy refused.
    schema = {
        "$defs": {"a": _all_of(2500)},
        "allOf": [{"$ref": "#/$defs/a"}],
        **{
            note: "Each entry is held to #/$defs/a" for note in ("description", "$comment", "title")
        },
    }
    assert _refusal(schema) is None


def test_a_ref_to_defs_named_by_numbers_is_followed() -> None:
    tiers = {
        "$defs": {
            "1": {"required": ["email"]},
            "2": {"required": ["email", "primaryContact"]},
            "3": {"required": ["email", "primaryContact", "phone"]},
        },
        "if": {"properties": {"groups": {"contains": {"const": "tier-2"}}}},
        "then": {"$ref": "#/$defs/2"},
        "else": {"$ref": "#/$defs/1"},
    }
    policy = _compiled(tiers)
    contact = {"name": "Zoë Ångström", "email": "zoe@örsted.example"}
    assert policy.failure({"id": "i", "groups": ["tier-2"], "email": "a@b.example"}) == ()
    assert policy.failure({"id": "i", "groups": ["tier-1"], "email": "a@b.example"}) is None
    assert (
        policy.failure(
            {"id": "i", "groups": ["tier-2"], "email": "a@b.example", "primaryContact": contact}
        )
        is None
    )


# -- issue 40: what the survivors of today's mutation run showed untested -----------------------


def test_text_a_policy_holds_is_read_as_a_pattern_only_under_pattern() -> None:
    # Neither a title nor a value is a pattern: `***` and `C++` are no RE2, and no matter.
    schema = {
        "title": "*** KYB onboarding: no test businesses ***",
        "properties": {"name": {"not": {"const": "C++ Test GmbH"}}},
    }
    policy = _compiled(schema)
    assert policy.failure({"id": "inv_1", "name": "C++ Test GmbH"}) == ("name",)
    assert policy.failure({"id": "inv_1", "name": "Société Générale"}) is None


def test_a_pattern_of_pattern_properties_re2_cannot_run_is_refused_at_its_place() -> None:
    # Every sub-field of the contact but its e-mail: a look-ahead, which RE2 has not.
    contact = {"patternProperties": {"^(?!email$)": {"maxLength": 80}}}
    assert _refusal({"properties": {"primaryContact": contact}}) == (
        ("properties", "primaryContact", "patternProperties", "^(?!email$)"),
        "`pattern` cannot be run in linear time (invalid perl operator: (?!): policies' "
        "patterns run on RE2, which has no look-around and no back-references",
    )


def test_names_of_properties_and_defs_are_names_not_patterns() -> None:
    # `c++` is no RE2 pattern, and need not be: only `patternProperties` holds patterns.
    schema = {
        "$defs": {"c++": {"required": ["attachments"]}},
        "if": {"properties": {"groups": {"contains": {"const": "c++"}}}, "required": ["groups"]},
        "then": {"$ref": "#/$defs/c++"},
    }
    policy = _compiled(schema)
    assert policy.failure({"id": "inv_1", "groups": ["c++"]}) == ()
    assert policy.failure({"id": "inv_1", "groups": ["c++"], "attachments": ["nda"]}) is None


def _contact_rule() -> dict[str, Any]:
    """18 subschemas, 10 of them a value a keyword holds (each counts one): itself, `type`,
    `required` and its 2 names, `properties`, and its 4 fields with what they hold."""
    return {
        "type": "object",
        "required": ["email", "phone"],
        "properties": {
            "email": {"format": "email", "maxLength": 254},
            "phone": {"pattern": "^\\+[1-9][0-9]{6,14}$"},
            "name": {"minLength": 1, "maxLength": 200},
            "primaryContact": {"required": ["name", "email"]},
        },
    }


def test_each_value_a_keyword_holds_counts_one_at_the_fan_out_bound() -> None:
    # 3 + 263 x (1 + 18) = 5,000: itself, `$defs` (counted once), the list, each `$ref`.
    schema = {"$defs": {"contact": _contact_rule()}, "allOf": [{"$ref": "#/$defs/contact"}] * 263}
    assert _refusal(schema) is None
    # A note is a value too: 5,001.
    described = {**schema, "description": "Every invite names who to call, and how"}
    assert _refusal(described) == ((), FAN_OUT)


def test_a_ref_to_a_def_whose_name_ends_in_a_hash_is_followed_at_the_fan_out_bound() -> None:
    assert _refusal(_referred("c#", "#/$defs/c#", 260, 19)) is None
    assert _refusal(_referred("c#", "#/$defs/c#", 144, 34)) == ((), FAN_OUT)


def test_refs_that_lead_one_to_the_next_are_refused_past_32_links_at_the_link() -> None:
    # A chain of 600 used to compile and then stop the run at the first entry with a
    # phone (past Python's stack); 1,500 was refused as "more than 5,000 subschemas".
    def chain(links: int, end: Any = None) -> dict[str, Any]:
        steps: dict[str, Any] = {f"s{i}": {"$ref": f"#/$defs/s{i + 1}"} for i in range(links)}
        steps[f"s{links}"] = end or {"pattern": "^\\+44"}
        return {"$defs": steps, "properties": {"phone": {"$ref": "#/$defs/s0"}}}

    assert _refusal(chain(31)) is None  # 32 links with the one in `properties`
    assert _refusal(chain(32)) == (("$defs", "s31", "$ref"), CHAIN)
    # The same for a chain ending in a list of schemas.
    alternatives = {"anyOf": [{"pattern": "^\\+44"}, {"pattern": "^\\+353"}]}
    assert _refusal(chain(31, alternatives)) is None
    assert _refusal(chain(32, alternatives)) == (("$defs", "s31", "$ref"), CHAIN)
    assert _refusal(chain(1_500)) == (("$defs", "s31", "$ref"), CHAIN)
    # A chain sized first from elsewhere is refused where it is reached too long.
    deep = {f"deep{i}": {"$ref": f"#/$defs/deep{i + 1}"} for i in range(12)}
    tail = {
        "allOf": [{"$ref": "#/$defs/s0"}],  # sized first: 21 links, within the bound
        "$defs": {**chain(20)["$defs"], **deep, "deep12": {"$ref": "#/$defs/s0"}},
        "properties": {"phone": {"$ref": "#/$defs/deep0"}},  # 14 more before it
    }
    assert _refusal(tail) == (("$defs", "deep12", "$ref"), CHAIN)


def _doubling_by(index: str, steps: int) -> dict[str, Any]:
    """`$defs` each referring twice to the next, through the next's `allOf` at ``index``."""
    defs: dict[str, Any] = {
        f"d{i}": {"anyOf": [{"allOf": [{"$ref": f"#/$defs/d{i + 1}/anyOf/{index}"}] * 2}]}
        for i in range(steps)
    }
    defs[f"d{steps}"] = {"anyOf": [{"minLength": 1}]}
    return {"$defs": defs, "properties": {"name": {"$ref": "#/$defs/d0"}}}


@pytest.mark.parametrize("index", ["0", "-1", "+0", "0_0", "%200"])
def test_a_fan_out_through_any_index_referencing_takes_is_counted(index: str) -> None:
    # `referencing` reads an index with int(): `-1`, `+0` and `0_0` step into the list as
    # `0` does. Counted as 1 each, 24 such steps held a run for hours.
    assert _refusal(_doubling_by(index, 14)) == ((), FAN_OUT)


@pytest.mark.parametrize(
    ("schema", "refused"),
    [
        # A schema written in a value (`const`, `enum`, `default`, `examples`) was used
        # through a `$ref` unchecked: a traceback at the first entry.
        (
            {"const": {"$ref": "#/nowhere"}, "properties": {"name": {"$ref": "#/const"}}},
            (("properties", "name", "$ref"), "an object no check reads as a schema"),
        ),
        (
            {"enum": [{"type": 5}], "properties": {"name": {"$ref": "#/enum/0"}}},
            (("properties", "name", "$ref"), "an object no check reads as a schema"),
        ),
        (
            {"x-shared": {"type": 5}, "properties": {"name": {"$ref": "#/x-shared"}}},
            (("properties", "name", "$ref"), "an object no check reads as a schema"),
        ),
        # A schema *named* like a value keyword is a schema, and checked as one.
        (
            {
                "$defs": {"const": {"$ref": "#/nowhere"}},
                "properties": {"name": {"$ref": "#/$defs/const"}},
            },
            (("$defs", "const", "$ref"), "`$ref` points at nothing in the policy"),
        ),
        (
            {"$defs": {"enum": {"$ref": "https://schemas.example/x"}}},
            (("$defs", "enum", "$ref"), "may only point inside the policy"),
        ),
        ({"$defs": {"default": {"pattern": "^(?!x)"}}}, (("$defs", "default", "pattern"), "RE2")),
        # An index int() cannot read: nothing, not a traceback.
        (
            {"allOf": [{}], "properties": {"name": {"$ref": "#/allOf/²"}}},
            (("properties", "name", "$ref"), "`$ref` points at nothing in the policy"),
        ),
    ],
    ids=lambda v: str(v)[:40],
)
def test_a_ref_is_refused_unless_it_points_at_a_schema_the_checks_read(
    schema: Any, refused: tuple[tuple[Any, ...], str]
) -> None:
    found = _refusal(schema)
    assert found is not None
    assert found[0] == refused[0]
    assert refused[1] in found[1]


def test_a_ref_to_a_schema_named_like_a_value_keyword_is_followed() -> None:
    schema = {
        "$defs": {"const": {"maxLength": 5}},
        "properties": {"name": {"$ref": "#/$defs/const"}},
    }
    policy = _compiled(schema)
    assert policy.failure({"id": "i", "name": "Björk Ísfeld ehf."}) == ("name",)
    assert policy.failure({"id": "i", "name": "Björk"}) is None


def test_pattern_properties_and_additional_properties_run_their_patterns_on_re2() -> None:
    # On Python's re, `$` also matches before a final line break, and `^(.*)*(.*)*X$`
    # over a field name took a minute for every invite: RE2 runs them, as `pattern`.
    named = _compiled({"patternProperties": {"^x$": {"maxLength": 0}}})
    assert named.failure({"id": "i", "x\n": "v"}) is None
    assert named.failure({"id": "i", "x": "v"}) == ("x",)
    closed = _compiled({"patternProperties": {"^x$": {}}, "additionalProperties": False})
    assert closed.failure({"id": "i", "x": "v"}) == ()  # `id` is not `x`
    only = _compiled(
        {"properties": {"id": {}}, "patternProperties": {"^x$": {}}, "additionalProperties": False}
    )
    assert only.failure({"id": "i", "x": "v"}) is None
    assert only.failure({"id": "i", "x\n": "v"}) == ()
    typed = _compiled(
        {
            "properties": {"id": {}},
            "patternProperties": {"^x": {}},
            "additionalProperties": {"type": "integer"},
        }
    )
    assert typed.failure({"id": "i", "xy": "v", "z": 1}) is None
    assert typed.failure({"id": "i", "xy": "v", "z": "Zürich"}) == ("z",)


def test_unevaluated_properties_beside_pattern_properties_is_refused_at_its_place() -> None:
    schema = {
        "properties": {"primaryContact": {"patternProperties": {"^ph": {"pattern": "^\\+"}}}},
        "unevaluatedProperties": False,
    }
    assert _refusal(schema) == (
        ("unevaluatedProperties",),
        "`unevaluatedProperties` cannot be used with `patternProperties` in a policy (their "
        "patterns would run on Python's re, not RE2); name the fields in `properties`, or use "
        "`additionalProperties`",
    )
    assert _refusal({"unevaluatedProperties": False}) is None


def test_a_policy_nested_past_50_schemas_is_refused_at_the_first_place_too_deep() -> None:
    def nots(levels: int) -> Any:
        schema: Any = {"minLength": 1}
        for _ in range(levels):
            schema = {"not": {"not": schema}}
        return schema

    assert _refusal(nots(24)) is None  # 49 schemas one inside another
    assert _refusal(nots(25)) == (("not",) * 50, TOO_DEEP)


def _country_rule() -> dict[str, Any]:
    """7 subschemas: itself, `required` and its name, `properties`, the field, and its
    `enum` and `default` (a value counts one, whatever it holds)."""
    return {
        "required": ["country"],
        "properties": {"country": {"enum": ["IS", "CH", "LI"], "default": "CH"}},
    }


@pytest.mark.parametrize("defs", ["$defs", "definitions"])
def test_a_rule_used_through_refs_counts_where_used_and_its_defs_once(defs: str) -> None:
    # 5 notes + itself + `defs` (once) + the list + 624 x (the `$ref` + 7) = 5,000.
    schema = {
        "title": "Where the company is registered",
        "description": "Invites name the country of the company they are for",
        "$comment": "Liechtenstein added 2026-11",
        "examples": [{"country": "LI"}],
        "deprecated": False,
        defs: {"country": _country_rule()},
        "allOf": [{"$ref": f"#/{defs}/country"}] * 624,
    }
    assert _refusal(schema) is None
    assert _refusal({**schema, "readOnly": False}) == ((), FAN_OUT)


def test_a_ref_beside_other_keywords_counts_what_it_points_at_once() -> None:
    # 3 + 249 x (the holder + its note + 18) = 4,983: within the bound.
    used = {"$ref": "#/$defs/contact", "description": "who to call about the invite"}
    assert _refusal({"$defs": {"contact": _contact_rule()}, "allOf": [used] * 249}) is None


@pytest.mark.parametrize("keyword", ["not", "if", "items", "contains", "additionalProperties"])
def test_a_pattern_re2_cannot_run_under_a_keyword_of_one_schema_is_refused_there(
    keyword: str,
) -> None:
    # "Any address but one of ours": look-ahead, which RE2 cannot run.
    schema = {"properties": {"email": {keyword: {"pattern": "^(?!.*@bjork\\.is$)"}}}}
    refused = _refusal(schema)
    assert refused is not None
    assert refused[0] == ("properties", "email", keyword, "pattern")
    assert "policies' patterns run on RE2" in refused[1]


def _deep_only_for_ids(steps: int = 14, every: int = 4) -> dict[str, Any]:
    """Within every bound the checks read (32 links, 16 steps, under 5,000 subschemas),
    but followed on an entry whose id starts `inv_`, 31 `$ref`s of 14 `not`s each: deeper
    than jsonschema can go on Python's stack."""
    defs: dict[str, Any] = {}
    for i in range(31):
        schema: Any = {"$ref": f"#/$defs/d{i + 1}"}
        for _ in range(steps):
            schema = {"not": schema}
        defs[f"d{i}"] = schema
    defs["d31"] = {"minLength": 1}
    # Every fourth one used first: each is sized a few links deep, not 31.
    used = [{"$ref": f"#/$defs/d{i}"} for i in reversed(range(0, 31, every))]
    return {
        "$defs": defs,
        "properties": {"id": {"if": {"pattern": "^inv_"}, "then": {"allOf": used}}},
    }


def test_a_policy_too_deep_to_follow_is_refused_when_compiled_whatever_entries_reach_it() -> None:
    # Within 32 links and 5,000 subschemas, but 31 `$ref`s of 14 `not`s each deep: it used
    # to compile when no probe reached it, then stop the run at the first invite with a
    # phone, or end it with a Rust panic when the stack ran out inside `referencing`.
    deep = _deep_only_for_ids()
    assert _refusal(deep) == (("$defs", "d31"), TOO_DEEP)
    only_phones = {
        "$defs": deep["$defs"],
        "if": {"required": ["phone"]},
        "then": {"properties": deep["properties"]},
    }
    refused = _refusal(only_phones)
    assert refused is not None
    assert (refused[0][:2], refused[1]) == (("$defs", "d30"), TOO_DEEP)  # where it passes 50


def test_a_schema_error_is_quoted_in_at_most_300_characters() -> None:
    # `required` written as the fields' names in one text, not a list of them.
    fields = "name, email, phone, primaryContact, groups, attachments, addOns, " * 6
    refused = _refusal({"required": fields})
    assert refused is not None
    prefix = "not valid JSON Schema (draft 2020-12): "
    assert refused[1].startswith(prefix)
    assert len(refused[1]) == len(prefix) + 300


def _used_near_the_top_and_at(depth: int, name: str, rule: Any) -> dict[str, Any]:
    """``rule`` (in `$defs`, as ``name``) used near the top, then met again ``depth``
    schemas down (each level between an `allOf` of one: the same rule). Sized where it
    is first used, it is not sized again: its height is added to the depth it is met at."""
    deep: Any = {"$ref": f"#/$defs/{name}"}
    for _ in range(depth - 2):
        deep = {"allOf": [deep]}
    return {
        "$defs": {name: rule, "kurz": {"maxLength": 64}},
        "properties": {"email": {"$ref": f"#/$defs/{name}"}},
        "if": {"required": ["primaryContact"]},
        "then": deep,
    }


@pytest.mark.parametrize(
    ("name", "rule", "deepest"),
    [
        ("kurz", {"maxLength": 64}, 49),  # one schema (the one `über-kurz` points at)
        ("pflicht", {"required": ["email", "primaryContact"]}, 49),  # a list of names
        ("geschäftlich", {"not": {"pattern": "@(gmail|yahoo)\\."}}, 48),  # two deep
        ("über-kurz", {"$ref": "#/$defs/kurz"}, 48),  # two deep, the `$ref` followed
        ("beides", {"allOf": [{"required": ["email"]}, {"not": {"maxLength": 0}}]}, 47),
    ],
    ids=["scalar", "list", "nested", "ref", "three-deep-in-a-list"],
)
def test_a_rule_used_again_from_deeper_is_refused_where_its_height_passes_50(
    name: str, rule: Any, deepest: int
) -> None:
    assert _refusal(_used_near_the_top_and_at(deepest, name, rule)) is None
    assert _refusal(_used_near_the_top_and_at(deepest + 1, name, rule)) == (
        ("$defs", name),
        TOO_DEEP,
    )


# What a policy's keywords do with hostile values: a verdict, never an exception or a
# warning of Python's (issue 51, row 12). `a{99999999999}` made `re.compile`, which
# jsonschema's `format: regex` calls, raise OverflowError; `[[a]` made it warn.
HOSTILE_VALUES = ["a{99999999999}", "[[a]", "[a&&b]", "(" * 100, "\\", "9" * 200, "::" * 50]
FORMATS = ["regex", "date", "time", "ipv4", "ipv6", "idn-hostname", "uuid", "email"]


@pytest.mark.parametrize("form", FORMATS)
def test_a_format_on_a_hostile_value_is_a_verdict_never_an_exception_or_a_warning(
    form: str,
) -> None:
    policy = _compiled({"properties": {"name": {"format": form}}})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        verdicts = {v: policy.failure({"id": "inv_1", "name": v}) for v in HOSTILE_VALUES}
    assert set(verdicts.values()) <= {None, ("name",)}
    if form == "regex":
        assert verdicts["a{99999999999}"] == ("name",)  # no regex Python can compile
        assert verdicts["[[a]"] is None  # one it compiles (and warns of)


@pytest.mark.parametrize(
    "schema",
    [
        {"properties": {"name": {"pattern": "a{99999999999}"}}},
        {"patternProperties": {"a{99999999999}": True}},
        {"propertyNames": {"pattern": "a{99999999999}"}},
    ],
    ids=["pattern", "patternProperties", "propertyNames"],
)
def test_a_pattern_python_cannot_compile_is_refused_when_compiled_not_raised(
    schema: dict[str, Any],
) -> None:
    # RE2 runs it (`{` as a letter); the meta-schema's `format: regex` asks `re`.
    refused = _refusal(schema)
    assert refused is not None
    assert refused[1] == "not valid JSON Schema (draft 2020-12): 'a{99999999999}' is not a 'regex'"


@pytest.mark.parametrize(
    "schema",
    [
        {"properties": {"name": {"pattern": "[[:alpha:]]"}}},
        {"properties": {"groups": {"minItems": 10**30, "maxItems": 10**30}}},
        {"properties": {"name": {"minLength": 10**30, "multipleOf": float("inf")}}},
        {"properties": {"name": {"enum": [float("nan"), float("inf"), 10**400]}}},
        {"unevaluatedProperties": {"format": "regex"}},
        {"additionalProperties": {"format": "regex"}, "properties": {"id": True}},
    ],
    ids=["re-warns", "huge-counts", "huge-bounds", "odd-numbers", "unevaluated", "additional"],
)
def test_a_hostile_keyword_compiles_and_judges_without_exception_or_warning(
    schema: dict[str, Any],
) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        policy = _compiled(schema)
        for value in HOSTILE_VALUES:
            entry = {"id": "inv_1", "name": value, "groups": [value]}
            assert policy.failure(entry) in (None, (), ("name",), ("groups",))
