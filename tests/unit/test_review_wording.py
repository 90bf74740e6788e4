"""Counts read as English: one answer, one invite."""

from __future__ import annotations

from reconciler.api.limiter import AdaptiveLimit
from reconciler.plan.model import TooMuchChange


def test_the_settled_line_says_one_answer() -> None:
    limiter = AdaptiveLimit()
    limiter.observe(0.010, 200)
    assert limiter.describe().endswith("; 1 answer)")
    limiter.observe(0.010, 429)
    assert limiter.describe().endswith("; 2 answers, 1 refused)")


def test_the_max_changes_refusal_counts_invites() -> None:
    assert "updates 1 invite, more than max_changes (0)" in TooMuchChange(1, 0).reason
    assert "updates 2 invites, more than" in TooMuchChange(2, 1).reason
