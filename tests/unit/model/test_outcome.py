"""What became of a call (reconciler.model.outcome): three cases, matched, never unpacked."""

from __future__ import annotations

import pytest

from reconciler.api.exceptions import (
    ApiError,
    AuthenticationFailed,
    Conflict,
    GatewayRefused,
    NotFound,
    PermissionDenied,
    RateLimited,
    ServerError,
    TokenRefused,
    TransportError,
)
from reconciler.errors import ReconcilerError
from reconciler.model.outcome import Done, Failed, NotRun, Outcome, stop_if_run_fatal


def described(outcome: Outcome[int, ApiError]) -> str:
    match outcome:
        case Done(value):
            return f"done {value}"
        case Failed(error):
            return f"failed {error.status}"
        case NotRun():
            return "not run"


def test_each_case_is_its_own_type() -> None:
    assert described(Done(3)) == "done 3"
    assert described(Failed(NotFound("gone", status=404))) == "failed 404"
    assert described(NotRun()) == "not run"
    assert Done(3) == Done(3) and Done(3) != Failed(3)


@pytest.mark.parametrize(
    "error",
    [
        AuthenticationFailed("token expired", status=401),
        TokenRefused("no token", status=401),
        PermissionDenied("missing scope", status=403),
        ServerError("bad gateway", status=502),
        GatewayRefused("busy", status=503),
        RateLimited("slow down", status=429),
        TransportError("connection refused", maybe_sent=False),
    ],
)
def test_an_error_every_read_would_meet_stops_the_run(error: ApiError) -> None:
    assert error.run_fatal
    with pytest.raises(ReconcilerError, match=r"^stopped reading invites: "):
        stop_if_run_fatal(error)


@pytest.mark.parametrize(
    "error", [NotFound("gone", status=404), Conflict("not pending", status=409)]
)
def test_an_error_about_one_invite_does_not(error: ApiError) -> None:
    assert not error.run_fatal
    stop_if_run_fatal(error)
