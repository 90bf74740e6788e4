"""What a refused plan tells the user to do: split it, or make a new plan.

A saved plan carries the limit it was reviewed under; telling its user to
"raise the limit" on apply would be advice that cannot work.
"""

from __future__ import annotations

import pytest

from reconciler.plan.changes import InviteChange
from reconciler.plan.model import Plan, TooMuchChange

SPLIT = "Split the change or raise the limit."


def plan_of(count: int, max_changes: int | None, *, saved: bool = False) -> Plan:
    changes = [
        InviteChange(
            f"inv_{n}", f"invites/a.yaml:{n + 2}", None, {"name": "A"}, {"name": "B"}, False
        )
        for n in range(count)
    ]
    return Plan(
        base_url="https://api.example.com", changes=changes, max_changes=max_changes, saved=saved
    )


def refusal(plan: Plan, limit: int | None = None) -> str:
    with pytest.raises(TooMuchChange) as caught:
        plan.raise_if_unsafe(limit)
    return str(caught.value)


def test_a_saved_plan_over_its_own_limit_says_to_make_a_new_plan():
    message = refusal(plan_of(3, max_changes=2, saved=True))

    assert message == (
        "refusing to apply, nothing was changed: the plan updates 3 invites, more than "
        "max_changes (2). This plan was made with --max-changes 2; make a new plan with a "
        "higher limit."
    )


@pytest.mark.parametrize("limit", [2, 5])
def test_a_looser_or_equal_limit_on_apply_still_names_the_saved_one(limit: int):
    message = refusal(plan_of(3, max_changes=2, saved=True), limit)

    assert message.endswith(
        "This plan was made with --max-changes 2; make a new plan with a higher limit."
    )


def test_a_stricter_limit_on_apply_says_to_split_or_raise_it():
    message = refusal(plan_of(3, max_changes=5, saved=True), 2)

    assert message.endswith(f"more than max_changes (2). {SPLIT}")


def test_a_plan_just_made_says_to_split_or_raise_the_limit():
    assert refusal(plan_of(3, max_changes=2)).endswith(f"more than max_changes (2). {SPLIT}")
    assert refusal(plan_of(3, max_changes=None), 1).endswith(f"max_changes (1). {SPLIT}")
    assert str(TooMuchChange(3, 2)).endswith(SPLIT)


def test_a_plan_within_its_limits_is_not_refused():
    plan_of(2, max_changes=2, saved=True).raise_if_unsafe(2)
    plan_of(5, max_changes=None).raise_if_unsafe()
