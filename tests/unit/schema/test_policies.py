"""Policies compiled once: the quick verdict and the kept verdicts agree with jsonschema,
and a failure is placed at the field a failing keyword names."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reconciler.schema.policies import Policy, PolicyLoop, compile_policy
from reconciler.schema.policy_quick import looked_at, quick_check

SCHEMAS: list[Any] = [
    {
        "if": {"properties": {"groups": {"contains": {"const": "us"}}}, "required": ["groups"]},
        "then": {
            "properties": {"attachments": {"contains": {"const": "ein-letter"}}},
            "required": ["attachments"],
        },
    },
    {"properties": {"email": {"not": {"pattern": "@(gmail|yahoo)\\."}}}},
    {"properties": {"addOns": {"maxItems": 1, "minItems": 1}}},
    {"anyOf": [{"required": ["email"]}, {"required": ["primaryContact"]}]},
    {"properties": {"primaryContact": {"properties": {"email": {"pattern": "^c"}}}}},
    {"allOf": [{"properties": {"name": {"enum": ["a", "b"]}}}, {"not": {"required": ["phone"]}}]},
    {"properties": {"groups": {"uniqueItems": True}}},  # not quick: jsonschema alone
    {"additionalProperties": False, "properties": {"id": True}},  # the whole entry
]
TEXT = st.sampled_from(["a", "b", "us", "ein-letter", "x@gmail.com", "c@x.example", ""])
ENTRY = st.fixed_dictionaries(
    {"id": st.just("inv_1")},
    optional={
        "name": TEXT,
        "email": TEXT,
        "phone": TEXT,
        "groups": st.lists(TEXT, max_size=3),
        "attachments": st.lists(TEXT, max_size=3),
        "addOns": st.lists(TEXT, max_size=3),
        "primaryContact": st.fixed_dictionaries({"name": TEXT, "email": TEXT}),
        "resendOnChange": st.booleans(),
    },
)


def _compiled(schema: Any) -> Any:
    return compile_policy(Policy("p", "m", "error", schema, "reconciler.yaml", 0))


@pytest.mark.parametrize("schema", SCHEMAS, ids=lambda s: str(s)[:40])
@given(entry=ENTRY)
def test_the_verdicts_are_jsonschemas(schema: Any, entry: dict[str, Any]) -> None:
    policy = _compiled(schema)
    expected = policy._validator.is_valid(entry)
    assert (policy.failure(entry) is None) is expected
    assert (policy.failure(dict(entry)) is None) is expected  # again, from what is kept
    quick = quick_check(schema)
    if quick is not None:
        assert quick(entry) is expected


def test_what_a_policy_looks_at() -> None:
    assert looked_at(SCHEMAS[0]) == {"groups", "attachments"}
    assert looked_at(SCHEMAS[3]) == {"email", "primaryContact"}
    assert looked_at(SCHEMAS[7]) is None
    assert quick_check(SCHEMAS[6]) is None


def test_a_failure_is_placed_at_the_field_the_failing_keyword_names() -> None:
    policy = _compiled(SCHEMAS[0])
    assert policy.failure({"id": "i", "groups": ["us"], "attachments": ["x"]}) == ("attachments",)
    assert policy.failure({"id": "i", "groups": ["us"]}) == ()
    email = _compiled(SCHEMAS[1])
    assert email.failure({"id": "i", "email": "j@gmail.com"}) == ("email",)


def test_a_loop_only_some_entries_reach_is_a_configuration_error_naming_the_policy() -> None:
    schema = {"if": {"required": ["phone"]}, "then": {"$ref": "#"}}
    policy = _compiled(schema)  # the probe entry has no phone: compiled
    assert policy.failure({"id": "i"}) is None
    with pytest.raises(PolicyLoop, match=r"reconciler.yaml: policy p \(item 1 of `policies`\)"):
        policy.failure({"id": "i", "phone": "+4412345678"})
