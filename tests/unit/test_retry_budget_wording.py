"""What a user reads when a request is given up: the whole note, and its edges.

The note is appended to the error a run reports, so its wording is asserted whole:
"1 attempt" not "1 attempts", never a negative number of seconds left, and the
reason that really ended the retries.
"""

from __future__ import annotations

from reconciler.api.exceptions import ApiError, RateLimited, ServerError, TransportError
from reconciler.api.http.retry import RetryDecision, decide_retry


def decide(error: ApiError, attempt: int = 1, time_left: float = 60.0, **kw: object):
    options = {"idempotent": True, "max_attempts": 5, "jitter": 0.5, **kw}
    return decide_retry(error, attempt, time_left, **options)  # type: ignore[arg-type]


def test_a_single_attempt_is_said_in_the_singular():
    decision = decide(ServerError("down", status=503), attempt=1, max_attempts=1)

    assert decision == RetryDecision(False, note=" (gave up after 1 attempt)")


def test_several_attempts_are_said_in_the_plural():
    decision = decide(ServerError("down", status=503), attempt=2, max_attempts=2)

    assert decision == RetryDecision(False, note=" (gave up after 2 attempts)")


def test_a_budget_already_spent_is_said_as_zero_seconds_left():
    decision = decide(RateLimited("slow", status=429, retry_after=30.0), time_left=-4.0)

    assert decision == RetryDecision(
        False,
        note=" (gave up after 1 attempt: the server asked to wait 30 s, "
        "more than the 0 s left of retry_max_seconds)",
    )


def test_a_server_asking_for_exactly_the_time_left_has_spent_the_budget():
    # Waiting all of it would leave no time for the attempt itself.
    decision = decide(ServerError("busy", status=503, retry_after=20.0), time_left=20.0)

    assert decision == RetryDecision(
        False, note=" (gave up after 1 attempt: retry_max_seconds spent)"
    )


def test_a_backoff_that_fits_the_budget_is_waited():
    decision = decide(ServerError("down", status=503), attempt=2, jitter=0.5, time_left=0.6)

    assert decision == RetryDecision(True, 0.5)


def test_a_connection_refused_before_sending_is_retried_even_for_a_write():
    refused = TransportError("connection refused", maybe_sent=False, permanent=False)
    maybe = TransportError("read timed out", maybe_sent=True, permanent=False)

    assert decide(refused, idempotent=False).retry
    assert not decide(maybe, idempotent=False).retry
    assert decide(maybe, idempotent=True).retry


def test_a_write_is_never_retried_after_a_server_error():
    assert decide(ServerError("down", status=503), idempotent=False) == RetryDecision(False)
    assert decide(RateLimited("slow", status=429), idempotent=False) == RetryDecision(False)
