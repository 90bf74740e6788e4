"""Whether to try a failed request again, and after how long: a pure function.

It sees only the error, how many attempts were made and how much of the
retry budget is left, so every rule is tested without HTTP or clocks.
"""

from __future__ import annotations

from typing import NamedTuple

from reconciler.api.exceptions import (
    ApiError,
    GatewayRefused,
    RateLimited,
    ServerError,
    TransportError,
)

BACKOFF_BASE = 0.5
BACKOFF_CAP = 8.0


class RetryDecision(NamedTuple):
    retry: bool
    delay: float = 0.0  # seconds to wait before the next attempt
    note: str = ""  # appended to the error's message when giving up after retrying


def may_retry(error: ApiError, idempotent: bool) -> bool:
    """Whether another attempt could succeed and do no harm."""
    if isinstance(error, TransportError):
        # A request that may have reached the server is repeated only if repeating is safe.
        return not error.permanent and (idempotent or not error.maybe_sent)
    if error.refused_before_acting:  # a 429 or a 503, any body: nothing was done
        return True
    return idempotent and isinstance(error, RateLimited | ServerError)


def is_rate_signal(error: ApiError) -> bool:
    """A refusal that says "slower" to the whole run rather than "not this one": a 429,
    or a gateway's bare 503. The pacer cuts the rate; the request waits its turn again."""
    return isinstance(error, RateLimited | GatewayRefused)


def decide_retry(
    error: ApiError,
    attempt: int,
    time_left: float,
    *,
    idempotent: bool,
    max_attempts: int,
    jitter: float,
    own: bool = False,
) -> RetryDecision:
    """``attempt`` attempts failed, the last with ``error``; ``jitter`` is in [0, 1);
    ``own``: a refusal the pacer found to be this request's own, not a limit on all."""
    if not may_retry(error, idempotent):
        return RetryDecision(False)
    tried = f"gave up after {attempt} attempt{'s' if attempt != 1 else ''}"
    asked = error.retry_after
    if asked is not None and asked > 0 and time_left < asked:  # `Retry-After: 0` asks no wait
        said, left = _apart(asked, max(time_left, 0.0))
        return RetryDecision(
            False,
            note=f" ({tried}: the server asked to wait {said} s, more than the "
            f"{left} s left of retry_max_seconds)",
        )
    if is_rate_signal(error):
        # Not counted against max_attempts: a limit slows a run, it does not end it.
        # Its wait happens in the pacer, for every request at once; the server's share
        # of that wait (a Retry-After, one interval of its rate) spends the budget.
        if time_left <= 0:
            return RetryDecision(
                False,
                note=f" ({tried}: refused for all of retry_max_seconds, not counting "
                "the time it waited for its turn)",
            )
        if own:
            # Refused again while others went through: it backs off alone, as after a
            # fault, and the others go on at the rate.
            wait = _wait(error, attempt, jitter)
            if wait >= time_left:
                return RetryDecision(False, note=f" ({tried}: retry_max_seconds spent)")
            return RetryDecision(True, wait)
        return RetryDecision(True, 0.0)
    if attempt >= max_attempts:
        return RetryDecision(False, note=f" ({tried})")
    wait = _wait(error, attempt, jitter)
    if wait >= time_left:
        return RetryDecision(False, note=f" ({tried}: retry_max_seconds spent)")
    return RetryDecision(True, wait)


def _wait(error: ApiError, attempt: int, jitter: float) -> float:
    if error.retry_after is not None:
        return error.retry_after
    # Exponential backoff with full jitter, so workers do not retry in step.
    # The exponent bounded: a refusal is not counted against max_attempts, so a request
    # refused for all of retry_max_seconds may have made thousands of attempts.
    return jitter * min(BACKOFF_CAP, BACKOFF_BASE * 2.0 ** min(attempt - 1, 16))


def _apart(asked: float, left: float) -> tuple[str, str]:
    """``asked`` and ``left`` (less) in whole seconds, or with as many decimals as it takes
    (up to nine) to read apart: "1.00 s, more than the 0.96 s left", not "1 s ... the 1 s"."""
    digits = 0
    while digits < 9 and float(f"{asked:.{digits}f}") <= float(f"{left:.{digits}f}"):
        digits += 1
    return f"{asked:.{digits}f}", f"{left:.{digits}f}"
