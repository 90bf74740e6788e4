"""The advice at the end of each failed invite's `error:` line: only about what exists."""

from __future__ import annotations

import pytest

from reconciler.model.invite import SourceLocation
from reconciler.output.console import what_to_do


@pytest.mark.parametrize(
    ("status", "request_id", "advice"),
    [
        (503, "req-1", "try again later; if it persists, contact support with the requestId"),
        (
            502,
            None,  # an nginx page: there is no requestId to quote
            "try again later; if it persists, check the network path to the API (proxy, gateway)",
        ),
        (
            413,
            None,
            "a proxy or gateway in front of the API limits request bodies; ask its operators",
        ),
    ],
)
def test_the_advice_names_a_request_id_only_when_there_is_one(
    status: int, request_id: str | None, advice: str
) -> None:
    assert what_to_do(status, SourceLocation("invites/a.yaml", 3), request_id) == advice
