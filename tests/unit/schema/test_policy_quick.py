"""What a policy's verdict depends on, and its quick verdict: each shortcut gives the
verdict jsonschema gives on the whole entry."""

from __future__ import annotations

from typing import Any

from reconciler.schema.policies import CompiledPolicy, Policy, compile_policy


def _compiled(schema: Any) -> CompiledPolicy:
    return compile_policy(Policy("p", "m", "error", schema, "reconciler.yaml", 0))


def test_a_policy_comparing_the_whole_entry_with_a_value_sees_every_field() -> None:
    # Every entry has an `id`, so none is the empty object: judged on the entry as
    # written, not on the fields some keyword names (here none).
    entry = {"id": "inv_oresund", "name": "Øresund Logistik ApS"}
    assert _compiled({"enum": [{}]}).failure(entry) == ()
    assert _compiled({"not": {"enum": [{}]}}).failure(entry) is None


def test_contains_of_a_keyword_without_a_quick_verdict_is_judged_by_jsonschema() -> None:
    # At least one group a two-letter country code: `maxLength` has no quick verdict.
    policy = _compiled({"properties": {"groups": {"contains": {"maxLength": 2}}}})
    assert policy.failure({"id": "inv_1", "groups": ["emea", "de"]}) is None
    assert policy.failure({"id": "inv_1", "groups": ["emea", "enterprise"]}) == ("groups",)
    assert policy.failure({"id": "inv_1", "groups": []}) == ("groups",)
    assert policy.failure({"id": "inv_1"}) is None
