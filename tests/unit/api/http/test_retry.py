"""decide_retry: whether a failed request is tried again, and when, without HTTP."""

from __future__ import annotations

import pytest

from reconciler.api.exceptions import (
    AnswerTooLarge,
    ApiError,
    AuthenticationFailed,
    Conflict,
    EnvelopeFailure,
    GatewayRefused,
    InvalidRequest,
    NotFound,
    PermissionDenied,
    RateLimited,
    Redirected,
    ServerError,
    TokenRefused,
    TransportError,
    WrongInvite,
)
from reconciler.api.http.retry import BACKOFF_BASE, BACKOFF_CAP, RetryDecision, decide_retry


def decide(error: ApiError, attempt: int = 1, time_left: float = 60.0, **kw: object):
    options = {"idempotent": True, "max_attempts": 5, "jitter": 0.5, **kw}
    return decide_retry(error, attempt, time_left, **options)  # type: ignore[arg-type]


NEVER_RETRIED = [
    InvalidRequest("bad email", status=400),
    AuthenticationFailed("revoked", status=401),
    PermissionDenied("scope", status=403),
    NotFound("gone", status=404),
    Conflict("accepted", status=409),
    Redirected("redirect to evil.example", status=307),
    EnvelopeFailure("success: false", status=200),
    WrongInvite("answered about inv_other", status=200),
    AnswerTooLarge("too large", status=200),
    TokenRefused("token holds a line break"),
    TransportError("certificate verify failed", maybe_sent=False, permanent=True),
]


@pytest.mark.parametrize("error", NEVER_RETRIED, ids=lambda e: type(e).__name__)
def test_answers_that_cannot_change_are_never_retried(error: ApiError) -> None:
    decision = decide(error)

    assert not decision.retry
    assert decision.note == ""  # "gave up after 1 attempt" would suggest it tried to retry


@pytest.mark.parametrize(
    "error",
    [
        ServerError("down", status=503),
        RateLimited("slow down", status=429),
        TransportError("no answer within 30s", maybe_sent=True),
        TransportError("could not connect", maybe_sent=False),
    ],
    ids=["5xx", "429", "timeout", "refused"],
)
def test_passing_failures_of_idempotent_requests_are_retried(error: ApiError) -> None:
    assert decide(error).retry


def test_a_resend_is_retried_only_when_it_surely_never_left() -> None:
    never_left = TransportError("could not connect", maybe_sent=False)
    may_have_left = TransportError("no answer within 30s", maybe_sent=True)

    assert decide(never_left, idempotent=False).retry
    assert not decide(may_have_left, idempotent=False).retry
    assert not decide(ServerError("down", status=502), idempotent=False).retry
    assert not decide(ServerError("timed out", status=504), idempotent=False).retry
    assert not decide(ServerError("fault", status=500, enveloped=True), idempotent=False).retry


def test_a_resend_refused_before_it_was_acted_on_is_sent_again() -> None:
    # A 429 or a 503, any body: a refusal, made before the platform did anything (issue 36).
    assert decide(ServerError("down", status=503), idempotent=False).retry
    assert decide(RateLimited("slow", status=429), idempotent=False).retry
    # The run's own "not sent" (no status) is no refusal of the server's.
    assert not RateLimited("not sent: the server asked ...").refused_before_acting


def test_backoff_grows_per_attempt_with_full_jitter_and_a_cap() -> None:
    error = ServerError("down", status=503)

    delays = [decide(error, attempt=n, jitter=1.0, max_attempts=20).delay for n in range(1, 9)]

    assert delays[:4] == [0.5, 1.0, 2.0, 4.0]
    assert max(delays) == BACKOFF_CAP
    assert decide(error, attempt=3, jitter=0.0).delay == 0.0
    assert decide(error, attempt=3, jitter=0.25).delay == pytest.approx(0.5)


def test_a_5xx_retry_after_is_the_delay() -> None:
    assert decide(ServerError("busy", status=503, retry_after=7.0)).delay == 7.0


def test_a_429_waits_in_the_pacer_not_in_the_retry_loop() -> None:
    decision = decide(RateLimited("slow", status=429, retry_after=3.0))

    assert decision.retry and decision.delay == 0.0


def test_retry_after_longer_than_the_budget_left_gives_up_at_once() -> None:
    decision = decide(RateLimited("slow", status=429, retry_after=100000.0), time_left=59.6)

    assert not decision.retry
    assert "the server asked to wait 100000 s" in decision.note
    assert "60 s left of retry_max_seconds" in decision.note
    assert "gave up after 1 attempt:" in decision.note


def test_max_attempts_ends_retrying() -> None:
    error = ServerError("down", status=503)

    assert decide(error, attempt=4, max_attempts=5).retry
    decision = decide(error, attempt=5, max_attempts=5)
    assert not decision.retry and "gave up after 5 attempts" in decision.note


def test_a_wait_that_would_spend_the_budget_gives_up() -> None:
    error = ServerError("down", status=503)

    decision = decide(error, attempt=4, jitter=0.99, time_left=2.0)  # ~3.96 s of backoff

    assert not decision.retry and "retry_max_seconds spent" in decision.note


RATE_SIGNALS = [
    RateLimited("slow", status=429),
    GatewayRefused("Service Temporarily Unavailable (an HTML page)", status=503),
]


@pytest.mark.parametrize("error", RATE_SIGNALS, ids=lambda e: type(e).__name__)
def test_a_rate_signal_is_retried_through_the_pacer_while_budget_is_left(error: ApiError) -> None:
    # No backoff of its own: the pacer's cut slows every request, this one included.
    assert decide(error, time_left=0.5) == RetryDecision(True, 0.0)


@pytest.mark.parametrize("error", RATE_SIGNALS, ids=lambda e: type(e).__name__)
def test_a_rate_signal_does_not_count_against_max_attempts(error: ApiError) -> None:
    # A run slowed by a limit finishes: only the time budget ends a refused request.
    assert decide(error, attempt=12, max_attempts=5).retry


@pytest.mark.parametrize("error", RATE_SIGNALS, ids=lambda e: type(e).__name__)
def test_a_rate_signal_past_the_budget_says_so_without_a_number_of_seconds(
    error: ApiError,
) -> None:
    decision = decide(error, attempt=9, time_left=-0.2)

    assert decision == RetryDecision(
        False,
        note=" (gave up after 9 attempts: refused for all of retry_max_seconds, not counting "
        "the time it waited for its turn)",
    )


def test_an_api_503_with_its_envelope_is_a_server_error_with_backoff() -> None:
    # The platform's own 503 (an outage) backs off and counts attempts, as before.
    error = ServerError("service temporarily unavailable", status=503)

    assert decide(error, attempt=1, jitter=0.5).delay == pytest.approx(0.25)
    assert not decide(error, attempt=5, max_attempts=5).retry


# From test_retry_budget_wording.py:
# What a user reads when a request is given up: the whole note, and its edges.
#
# The note is appended to the error a run reports, so its wording is asserted whole:
# "1 attempt" not "1 attempts", never a negative number of seconds left, and the
# reason that really ended the retries.


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
    assert decide(ServerError("down", status=500), idempotent=False) == RetryDecision(False)
    assert decide(ServerError("bad gateway", status=502), idempotent=False) == RetryDecision(False)


def test_a_refusal_that_is_the_requests_own_backs_off_alone() -> None:
    # Refused again and again while others went through: it waits as after a fault,
    # not only for its turn, and still is not counted against max_attempts.
    error = RateLimited("slow down", status=429)

    first = decide_retry(error, 1, 60, idempotent=True, max_attempts=5, jitter=1.0, own=True)
    later = decide_retry(error, 9, 60, idempotent=True, max_attempts=5, jitter=1.0, own=True)
    shared = decide_retry(error, 1, 60, idempotent=True, max_attempts=5, jitter=1.0)

    assert first == RetryDecision(True, BACKOFF_BASE)
    assert later == RetryDecision(True, BACKOFF_CAP)
    assert shared == RetryDecision(True, 0.0)  # a limit on all: the wait is the pacer's


def test_a_request_refused_thousands_of_times_still_gets_a_backoff() -> None:
    # Refusals do not count against max_attempts: the attempt number can grow past what
    # 2 ** n as a float holds (an OverflowError once, behind a limit on /resend alone).
    error = RateLimited("slow down", status=429)
    decision = decide_retry(error, 5000, 60, idempotent=False, max_attempts=5, jitter=1.0, own=True)
    assert decision == RetryDecision(True, BACKOFF_CAP)


def test_a_refusal_with_no_time_left_gives_up_saying_it_was_refused_throughout() -> None:
    assert decide(RateLimited("slow down", status=429), attempt=3, time_left=0.0) == (
        RetryDecision(
            False,
            note=" (gave up after 3 attempts: refused for all of retry_max_seconds, not counting "
            "the time it waited for its turn)",
        )
    )


def test_its_own_refusal_whose_back_off_outlasts_the_budget_gives_up_saying_so() -> None:
    refused = RateLimited("slow down", status=429)  # backs off 0.5 x min(8, 0.5 x 2^4) = 4 s
    assert decide(refused, attempt=5, time_left=4.0, own=True) == RetryDecision(
        False, note=" (gave up after 5 attempts: retry_max_seconds spent)"
    )
    assert decide(refused, attempt=5, time_left=4.5, own=True) == RetryDecision(True, 4.0)


# -- what a give-up says of the wait asked and the time left --------------------------------


def test_a_retry_after_of_0_with_the_budget_spent_does_not_say_the_server_asked() -> None:
    # a server answering `429, Retry-After: 0` three times with a
    # 3 s budget ended the run with "the server asked to wait 0 s, more than the 0 s left
    # of retry_max_seconds": 0 s asked is no wait, and not more than anything left.
    error = RateLimited("slow down", status=429, retry_after=0.0)
    decision = decide(error, attempt=3, time_left=-0.2)
    assert not decision.retry
    assert "asked to wait 0 s" not in decision.note
    assert "refused for all of retry_max_seconds" in decision.note


def test_a_wait_asked_that_reads_the_same_as_the_time_left_is_not_said_more() -> None:
    # `Retry-After: 1` with 0.96 s left read "the server asked to wait
    # 1 s, more than the 1 s left of retry_max_seconds" (both rounded to whole seconds).
    error = RateLimited("slow down", status=429, retry_after=1.0)
    decision = decide(error, attempt=2, time_left=0.96)
    assert not decision.retry
    assert "wait 1 s, more than the 1 s left" not in decision.note


@pytest.mark.parametrize(
    ("asked", "time_left", "said"),
    [
        (30.0, 0.9, "30 s, more than the 1 s left"),  # whole seconds tell them apart
        (1.0, 0.9, "1.0 s, more than the 0.9 s left"),  # one decimal is enough
        (1.0, 0.96, "1.00 s, more than the 0.96 s left"),  # one decimal would read 1.0
        (0.5, 0.3, "0.5 s, more than the 0.3 s left"),  # 0.5 is not "0 s"
        (59.4, 59.3, "59.4 s, more than the 59.3 s left"),
        (1.0, 1 - 1e-12, "1.000000000 s, more than the 1.000000000 s left"),  # a ns at most
    ],
)
def test_the_wait_and_the_time_left_are_shown_as_precise_as_it_takes_to_read_apart(
    asked: float, time_left: float, said: str
) -> None:
    decision = decide(RateLimited("slow", status=429, retry_after=asked), time_left=time_left)

    assert decision == RetryDecision(
        False,
        note=f" (gave up after 1 attempt: the server asked to wait {said} of retry_max_seconds)",
    )
