"""One request, start to finish: a turn from the pacer, attempts bounded in time
and size, retries as ``decide_retry`` says, and the token fetched on the way.

Whether to try a failed request again, and after how long, is a pure function
(``decide_retry``): it sees only the error, how many attempts were made and how much
of the retry budget is left, so every rule is tested without HTTP or clocks.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol

from reconciler.api.capacity.pacing import SLEEP_SLICE, NoTurn, Refusal, RequestPacer, Turn
from reconciler.api.capacity.rate import MAX_RATE
from reconciler.api.exceptions import (
    ApiError,
    GatewayForbidden,
    GatewayRefused,
    NotSent,
    PermissionDenied,
    RateLimited,
    ServerError,
    TransportError,
)
from reconciler.api.http.answer import Answer
from reconciler.api.http.attempt import Attempts
from reconciler.api.http.auth import (
    BearerAuth,
    ClientBasicAuth,
    Grant,
    IssuedTokens,
    OAuthError,
    Token,
    TokenSource,
    token_failure,
    token_from_payload,
)
from reconciler.api.http.network import BaseUrl
from reconciler.safetext import seconds
from reconciler.settings.config import Credentials, Settings
from reconciler.stop import Stop

log = logging.getLogger("reconciler.api")

# (seconds an attempt took, its HTTP status or None when no answer came)
Observer = Callable[[float, "int | None"], None]
Send = Callable[["float | None"], Answer]


class AttemptWatch(Protocol):
    """Told of each attempt of one request (the audit log's write-ahead rule, per attempt).

    ``before`` is called right before an attempt leaves: if it raises, the attempt is not
    sent and the exception goes to the caller. ``failed`` is told each attempt that
    failed, retried or not; a successful attempt is the caller's to record, once it has
    looked at the answer.
    """

    def before(self) -> None: ...

    def failed(self, error: ApiError) -> None: ...


@dataclass
class _Request:
    """One request and what its attempts came to so far."""

    method: str
    path: str
    send: Send
    idempotent: bool
    pacer: RequestPacer
    watch: AttemptWatch | None = None
    observed: bool = False  # told to the observer: the invite operations, not the token's
    attempts: int = 0
    give_up_at: float | None = None  # the retry budget's end, once the first attempt left
    error: ApiError | None = None  # the last attempt's
    refusal: Refusal | None = None  # what the pacer made of this request's last refusal
    own: bool = False  # the last refusal is the request's own, not a limit on all


class Exchange:
    def __init__(
        self,
        settings: Settings,
        credentials: Credentials,
        base: BaseUrl,
        pacer: RequestPacer,
        *,
        clock: Callable[[], float],
        sleep: Callable[[float], None],
        jitter: Callable[[], float],
        observer: Observer | None,
        stop: Stop,
    ) -> None:
        self.settings = settings
        self._credentials = credentials
        self._pacer = pacer
        self._clock = clock
        self._sleep = sleep
        self._jitter = jitter
        self._observer = observer
        self._attempts = Attempts(settings, base, clock)
        self._tokens = TokenSource(self._fetch_token, clock)
        self._issued = IssuedTokens()  # what redaction keeps of the tokens issued
        self._client_basic = (
            ClientBasicAuth(credentials.client_id, credentials.client_secret)
            if settings.token_auth_method == "client_secret_basic"
            else None
        )
        self._auth = BearerAuth(self._tokens)
        # A token fetched inside another request's attempt (it expired while that one
        # waited for its turn, or a 401 renewed it) is part of that request's turn: it
        # waits for no turn of the run's pacer, where the probe after a block's quiet
        # would be that very request, still out: it would wait for itself for ever.
        self._in_turn = threading.local()
        self._turn_pacer = RequestPacer(clock=clock, sleep=sleep, start_rate=MAX_RATE)
        # Whether an answer of the platform accepted a token of this run (any: one renewed
        # after a 401 and refused by a block right away is still this client's).
        self._accepted = False
        # Whether the last answer to an invite operation was a gateway's block (its 403):
        # a write that leaves while it is on and meets a 403 met the block.
        self._block_on = False
        self.stop = stop

    def close(self) -> None:
        self._attempts.close()

    def grant(self) -> Grant | None:
        """What the token answer granted, once a token was issued in this run."""
        token = self._tokens.last
        if token is None:
            return None
        return Grant(tuple(self.settings.contract.scope.split()), token.granted)

    def call(
        self,
        method: str,
        path: str,
        *,
        json_body: Any = None,
        idempotent: bool,
        headers: Mapping[str, str] | None = None,
        watch: AttemptWatch | None = None,
        pacer: RequestPacer | None = None,
        confirm: str | None = None,
    ) -> Answer:
        """An invite operation: authenticated, observed, retried when safe; ``watch`` is
        told of each attempt. ``pacer``: the turns of an endpoint a limit may cover alone
        (the re-send), instead of the run's: not once a gateway refused the client with
        its own 403 (it blocks the client, every endpoint alike), nor with ``max_rate``
        (the user's limit is on every request together). ``confirm``: for a write, the
        path of a harmless read of the same invite, sent right after a gateway's 403 to
        tell a block on the client (refused too) from a refusal of this write alone
        (``_confirmed``)."""

        def send(give_up_at: float | None) -> Answer:
            block_on = self._block_on  # as the attempt leaves
            answer = self._attempts.attempt(
                method,
                path,
                self._auth,
                json_body=json_body,
                give_up_at=give_up_at,
                headers=headers,
            )
            if answer.error is None:
                self._accepted, self._block_on = True, False
                return answer
            answer = self._gateway_forbidden(answer, answer.error)
            error = answer.error
            if isinstance(error, GatewayForbidden) and method != "GET" and not block_on:
                why = self._unconfirmed(confirm)
                if why is not None:
                    answer = answer._replace(error=error.unconfirmed(why))
            self._block_on = isinstance(answer.error, GatewayForbidden) and (answer.error.confirmed)
            if answer.error is not None:
                # Here, not in the retry loop: a 403 from the token endpoint is no token
                # lacking a scope (there is no token yet); token_failure explains it.
                self._take_note(answer.error)
            return answer

        own = pacer if pacer is not None and self._own_pacer_kept() else None
        request = _Request(method, path, send, idempotent, own or self._pacer, watch, True)
        return self._with_retries(request, ready=self._tokens.current)

    def _own_pacer_kept(self) -> bool:
        """Whether an endpoint's own pacer still paces it (see ``call``)."""
        return self.settings.max_rate is None and not self._pacer.blocked

    def _gateway_forbidden(self, answer: Answer, error: ApiError) -> Answer:
        """``answer`` with its 403 told for what it is: a gateway's refusal when it is not
        the platform's (``GatewayForbidden.of``) and a token of this run was accepted."""
        if not self._accepted:
            return answer
        gateway = GatewayForbidden.of(error)
        return answer if gateway is None else answer._replace(error=gateway)

    def _unconfirmed(self, confirm: str | None) -> str | None:
        """Why a gateway's 403 to a write is not shown to be a block on the whole client
        (None: it is). The evidence is a harmless read of the same invite sent at once,
        before the quiet period (a block that covers the client refuses it too); a write
        is never sent again on the strength of a 403 alone: a gateway that refuses in the
        answer phase (a WAF's response rule, a proxy rewriting the platform's 200) would
        have the platform send the e-mail each time."""
        if confirm is None:
            return "no read could confirm a block on the client"
        try:
            answer = self._attempts.attempt("GET", confirm, self._auth)
        except ApiError as failed:
            log.debug("GET %s (to confirm a block) -> %s", confirm, type(failed).__name__)
            return f"the read sent right after it to confirm a block got no answer ({failed})"
        if answer.error is not None:
            answer = self._gateway_forbidden(answer, answer.error)
        log.debug("GET %s (to confirm a block) -> %s", confirm, answer.status)
        if isinstance(answer.error, GatewayForbidden):
            return None
        got = "was answered" if answer.error is None else f"got HTTP {answer.status}"
        return f"a read of the same invite sent right after it {got}: no block on the client"

    # -- the retry loop ---------------------------------------------------------

    def _with_retries(self, request: _Request, ready: Callable[[], object] | None = None) -> Answer:
        while True:
            if ready is not None:
                # The token first, on its own turn: fetched inside this request's turn,
                # it would leave just before it, and a gateway allowing no burst
                # refuses the second of two requests sent together.
                try:
                    ready()
                except ApiError as no_token:
                    raise _unsent(no_token) from None
            answer = self._attempt(request)
            if answer is not None:
                return answer
            self._retry_or_raise(request)

    def _attempt(self, request: _Request) -> Answer | None:
        """One attempt, on its turn, told to the pacer; None when it failed (``error``)."""
        turn = self._take_turn(request)
        started = self._clock()
        request.attempts += 1
        if request.give_up_at is None:
            # The retry budget starts with the first attempt: time queued for a turn before
            # it, or behind other requests later, is ours, not the server's refusing.
            request.give_up_at = started + self.settings.retry_max_seconds
        else:
            request.give_up_at += turn.queued
        try:
            answer, error = self._send(request)
        except BaseException:
            request.pacer.on_no_answer(turn)
            raise
        elapsed = self._clock() - started
        status = answer.status if answer is not None else error.status if error else None
        self._tell(request, answer, error, status, elapsed)
        request.error, request.own = error, False
        if status is None:
            request.pacer.on_no_answer(turn)
        else:  # an answer came: it says something about the rate
            refused = error is not None and is_rate_signal(error)
            blocked = isinstance(error, GatewayForbidden) and error.confirmed
            request.refusal = request.pacer.on_answer(
                turn,
                elapsed,
                refused=refused,
                retry_after=error.retry_after if refused and error else None,
                again=request.refusal,
                blocked=blocked,
            )
            request.own = request.refusal is not None and request.refusal.own
            if blocked and request.pacer is not self._pacer:
                # A block is on the client, not on this endpoint: the run's pacer keeps
                # quiet too, and this request waits for its turn there with every other.
                self._pacer.block_seen()
                request.pacer, request.refusal = self._pacer, None
        return answer if error is None else None

    def _send(self, request: _Request) -> tuple[Answer | None, ApiError | None]:
        watch = request.watch
        if watch is not None:
            watch.before()  # its record first: raising, it keeps this attempt unsent
        answer: Answer | None = None
        outer, self._in_turn.on = getattr(self._in_turn, "on", False), True
        try:
            answer = request.send(request.give_up_at if request.attempts > 1 else None)
            error = answer.error
        except ApiError as failure:
            error = failure
        finally:
            self._in_turn.on = outer
        if error is not None and error is self._tokens.failure:
            # The token request already had its retries; this one never left (or its
            # resend after a 401 did not). Its record names no HTTP status or requestId:
            # those the token endpoint answered are in the message, and are not this
            # request's.
            unsent = _unsent(error)
            if watch is not None:
                watch.failed(NotSent(str(unsent)))
            raise unsent
        if error is not None and watch is not None:
            watch.failed(error)
        return answer, error

    def _tell(
        self,
        request: _Request,
        answer: Answer | None,
        error: ApiError | None,
        status: int | None,
        elapsed: float,
    ) -> None:
        """The attempt in the verbose log, and to the observer (invite operations only)."""
        log.debug(
            "%s %s -> %s (%.0f ms, requestId %s)",
            request.method,
            request.path,
            status or type(error).__name__,
            elapsed * 1000,
            (answer.request_id if answer else None) or "-",
        )
        if request.observed and self._observer is not None:
            try:
                self._observer(elapsed, status)
            except Exception:  # a watcher's fault must not fail a request
                log.debug("the request observer failed", exc_info=True)

    def _retry_or_raise(self, request: _Request) -> None:
        error = request.error
        assert error is not None and request.give_up_at is not None
        decision = decide_retry(
            error,
            request.attempts,
            request.give_up_at - self._clock(),
            idempotent=request.idempotent,
            max_attempts=self.settings.max_attempts,
            jitter=self._jitter(),
            own=request.own,
        )
        if not decision.retry or self.stop.is_set():
            error.message += decision.note + self._behind_gateway(error)
            raise error
        log.debug(
            "%s %s failed (%s); retry %d in %.2fs",
            request.method,
            request.path,
            error,
            request.attempts,
            decision.delay,
        )
        self._pause(decision.delay, error)

    def _take_turn(self, request: _Request) -> Turn:
        # A pause the server asks for is its refusing, charged to the budget: one
        # longer than a whole budget is refused even before a request's first try.
        end = request.give_up_at
        left = self.settings.retry_max_seconds if end is None else end - self._clock()
        try:
            return request.pacer.wait_turn(stop=self.stop, budget_left=left)
        except NoTurn as no:
            raise self._no_turn(no, request.error, end is None, max(left, 0.0)) from None

    def _no_turn(self, no: NoTurn, last: ApiError | None, first: bool, left: float) -> ApiError:
        if no.stopped:
            return NotSent("not sent: the run is stopping")
        if not no.asked and last is not None:
            # Held after refusals: the server's window would not move in time.
            last.message += (
                f" (refused for all of retry_max_seconds: no request may start for "
                f"another {seconds(no.wait)} after the server's refusals, more than the "
                f"{seconds(left)} left)"
            ) + self._behind_gateway(last)
            return last
        what = "not sent" if first else "not retried"
        wait = (
            f"the server asked that no request start for another {seconds(no.wait)}"
            if no.asked  # its Retry-After; else the hold after its refusals is ours
            else f"no request may start for another {seconds(no.wait)} after the server's refusals"
        )
        return RateLimited(
            f"{what}: {wait}, more than the {seconds(left)} left of this request's "
            f"retry budget (retry_max_seconds: {self.settings.retry_max_seconds:g})"
        )

    def _behind_gateway(self, error: ApiError) -> str:
        """What a run that gives up behind a gateway's 403 tells: who refused, what got
        through first, and what to do."""
        if not isinstance(error, GatewayForbidden) or not error.confirmed:
            return ""
        return (
            f". A gateway in front of the platform (not the platform) refused this client "
            f"and kept refusing: {self._pacer.describe_block()}: a block for sending too "
            "fast, or a rule that refuses this client whatever its pace. Run again once "
            "a block would be over with --parallelism 1, or with --max-rate "
            "(RECONCILER_MAX_RATE, setting max_rate) below the gateway's limit; if it "
            "still refuses, ask its operator what it refuses (a limit it can name or "
            "raise, or a rule)"
        )

    def _take_note(self, error: ApiError) -> None:
        if isinstance(error, PermissionDenied):  # what the server says decides none of it
            if not error.enveloped and error.bearer_error is None:
                # Not the platform's answer, and no token it accepted yet: a gateway's page.
                error.message += (
                    "; not the platform's answer (no envelope): a gateway or "
                    "proxy in front of it refused the request. One that blocks a client "
                    "sending too fast (mod_evasive, a WAF's rate rule) refuses every request "
                    "for a while after a burst: wait, then run again with --max-rate below "
                    "its limit"
                )
                return
            grant = self.grant()
            scope_said = error.bearer_error == "insufficient_scope"
            if grant is not None and not grant.missing and not scope_said:
                # The token carries every scope asked for (named, or as asked), and the
                # refusal does not say it lacks one: blaming the scope would contradict
                # itself and send the user to change a setting that is right.
                if grant.said is None:
                    error.message += (
                        f"; the token answer named no scope, so the token was granted what "
                        f"was asked for ({grant.shown()}, set with RECONCILER_SCOPE): as far "
                        "as the client can tell no scope is missing, and the platform refused "
                        "this for another reason: the client's permissions on the platform "
                        "(for whoever administers it to check), or this invite"
                    )
                    return
                error.message += (
                    f"; the token was granted every scope asked for ({grant.shown()}, asked "
                    "for with RECONCILER_SCOPE): the platform refused this for another "
                    "reason (what the client may do there, or this invite): check the "
                    "client's permissions on the platform"
                )
                return
            granted = f"; granted: {grant.shown()}" if grant is not None else ""
            error.message += (
                f"; the client's token does not carry the scope this needs "
                f"(asked for: {self.settings.contract.scope!r}, set with RECONCILER_SCOPE"
                f"{granted})"
            )

    def _pause(self, seconds: float, error: ApiError) -> None:
        """Wait before a retry, in short slices so a stopped run does not wait."""
        end = self._clock() + seconds
        while True:
            if self.stop.is_set():  # also after the last slice: a stopped run sends no retry
                raise error
            left = end - self._clock()
            if left <= 0:
                return
            self._sleep(min(left, SLEEP_SLICE))

    # -- the token --------------------------------------------------------------

    def _fetch_token(self) -> Token:
        """A token, or one error that names the token request and says what to check."""
        contract = self.settings.contract
        path = contract.token_path
        form = {"grant_type": "client_credentials", "scope": contract.scope}
        auth = self._client_basic
        if auth is None:  # client_secret_post: the credentials go in the form
            form["client_id"] = self._credentials.client_id
            form["client_secret"] = self._credentials.client_secret
        said: list[OAuthError | None] = [None]  # the last answer's RFC 6749 §5.2 error

        def send(give_up_at: float | None) -> Answer:
            answer = self._attempts.attempt("POST", path, auth, form=form, give_up_at=give_up_at)
            said[0] = OAuthError.of(answer.body) if answer.error is not None else None
            if answer.error is not None and said[0] is None:
                # A token renewed inside a gateway's block: refused like any request.
                answer = self._gateway_forbidden(answer, answer.error)
            return answer

        try:
            inside = getattr(self._in_turn, "on", False)
            pacer = self._turn_pacer if inside else self._pacer
            answer = self._with_retries(_Request("POST", path, send, True, pacer))
        except (TransportError, NotSent):
            # No answer (the network's words name the host; _unsent adds the rest), or
            # none sent (the run stopping, a wait past the budget): the token's own words.
            raise
        except ApiError as exc:
            raise token_failure(exc, said[0], self.settings) from None
        return token_from_payload(answer.data, answer.body, self._clock(), self._issued)


def _unsent(error: ApiError) -> ApiError:
    """The token step's failure, as seen by a request it kept from leaving."""
    if isinstance(error, TransportError):  # its maybe_sent was about the token request
        return TransportError(
            f"{error.message} (while getting a token; this request was not sent)",
            maybe_sent=False,
            permanent=error.permanent,
        )
    return error


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
    if error.refused_before_acting:  # a 429, a 503, a gateway's 403: nothing was done
        return True
    return idempotent and isinstance(error, RateLimited | ServerError)


def is_rate_signal(error: ApiError) -> bool:
    """A refusal that says "slower" to the whole run rather than "not this one": a 429,
    a gateway's bare 503, or a gateway's own 403 (a burst blocker's). The pacer cuts the
    rate; the request waits its turn again."""
    if isinstance(error, GatewayForbidden):  # not one a read got past (``_unconfirmed``)
        return error.confirmed
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
    if asked and time_left < asked:  # `Retry-After: 0` asks no wait
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
        # Refused again while others went through (``own``): it backs off alone, as
        # after a fault, and the others go on at the rate.
        return _backed_off(error, attempt, jitter, time_left, tried) if own else RetryDecision(True)
    if attempt >= max_attempts:
        return RetryDecision(False, note=f" ({tried})")
    return _backed_off(error, attempt, jitter, time_left, tried)


def _backed_off(
    error: ApiError, attempt: int, jitter: float, time_left: float, tried: str
) -> RetryDecision:
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
