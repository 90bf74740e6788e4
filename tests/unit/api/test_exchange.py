"""Exchange, on the wire (requests-mock): how the token request carries the client's
credentials, what a refusal says of the token, the re-send's own turns, what one
request's attempts make of the others' answers between them (two workers on one
exchange, in fake time, the second run while the first one's attempt is in flight),
what the retry budget is charged (the hold after refusals, not the run's own pace),
the audit record of a write kept back by a failed token renewal, and the two 403s
told apart (the platform's own, a gateway's block).
Everything else it does is tested through the client (unit/api/test_client.py).

decide_retry: whether a failed request is tried again, and when, without HTTP.
"""

from __future__ import annotations

import base64
import json
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest
import requests
from support.api_answers import BASE, INVITE, INVITE_URL, INVITES, TOKEN, envelope, token_response
from support.limits import FakeTime

from reconciler.api import exceptions as errors
from reconciler.api.capacity import QUIET, RequestPacer
from reconciler.api.exceptions import ApiError, GatewayForbidden, PermissionDenied, RateLimited
from reconciler.api.exchange import BACKOFF_CAP, Answer, Exchange, RetryDecision, decide_retry
from reconciler.apply.audit import AttemptRecorder, AuditLog
from reconciler.settings.config import Settings

TOKEN_URL = BASE + "/oauth/token"
INVITE_PATH = INVITE_URL.removeprefix(BASE)
RESEND_PATH = INVITE_PATH + "/resend"
OTHER_URL = INVITES + "inv_other"
OTHER_PATH = OTHER_URL.removeprefix(BASE)
RESEND_URL = INVITE_URL + "/resend"
OK = {"json": envelope(INVITE)}
OTHER_OK = {"json": envelope(INVITE | {"id": "inv_other"})}
RESENT = {"json": envelope({"id": "inv_8f2k1"})}


@pytest.fixture
def time() -> FakeTime:
    return FakeTime()


@pytest.fixture
def api(requests_mock: Any) -> Any:
    """requests_mock, its token endpoint answering a token (a test may register another)."""
    requests_mock.post(TOKEN_URL, [token_response()])
    return requests_mock


def exchange(
    time: FakeTime | None = None, pacer: RequestPacer | None = None, **values: Any
) -> Exchange:
    settings = Settings().with_values(
        {"base_url": BASE, "client_id": "ci-client", "client_secret": "cs-Value-42", **values}
    )
    time = time or FakeTime()
    pacer = pacer or RequestPacer(clock=time.clock, sleep=time.sleep)
    return Exchange(settings, pacer=pacer, clock=time.clock, sleep=time.sleep, jitter=lambda: 0.5)


def read(client: Exchange, path: str = INVITE_PATH, **kw: Any) -> Answer:
    return client.call("GET", path, idempotent=True, **kw)


def patch(client: Exchange, idempotent: bool = True, **kw: Any) -> Answer:
    return client.call("PATCH", INVITE_PATH, json_body={"name": "X"}, idempotent=idempotent, **kw)


def resend(client: Exchange, **kw: Any) -> Answer:
    return client.call("POST", RESEND_PATH, json_body={}, idempotent=False, **kw)


E = TypeVar("E", bound=BaseException)


def raises(kind: type[E], call: Callable[..., object], *args: Any, **kw: Any) -> E:
    """What ``call`` raised, checked to be a ``kind``."""
    with pytest.raises(kind) as caught:
        call(*args, **kw)
    return caught.value


def methods(api: Any) -> list[str]:
    return [r.method for r in api.request_history]


def urls(api: Any) -> list[str]:
    return [r.url for r in api.request_history]


def refused(status: int, retry_after: str | None = None) -> dict[str, Any]:
    headers = {"Retry-After": retry_after} if retry_after is not None else {}
    return {
        "status_code": status,
        "headers": headers,
        "json": envelope(None, status=status, message="refused"),
    }


def test_client_secret_basic_sends_the_credentials_in_the_header_not_the_form(api):
    api.get(INVITE_URL, **OK)

    read(exchange(token_auth_method="client_secret_basic"))

    token_request = api.request_history[0]
    assert token_request.headers["Authorization"] == (
        "Basic " + base64.b64encode(b"ci-client:cs-Value-42").decode()
    )
    assert "client_secret" not in token_request.text


def test_a_403_names_the_scope_the_token_answer_granted(api):
    granted = {"access_token": TOKEN, "token_type": "Bearer", "expires_in": 86400}
    granted["scope"] = "invites:read"
    api.post(TOKEN_URL, status_code=201, json=envelope(granted, status=201))
    api.patch(INVITE_URL, status_code=403, json=envelope(None, status=403, message="forbidden"))

    error = raises(PermissionDenied, patch, exchange(), idempotent=False)

    assert "; granted: 'invites:read' (so the token answer said))" in str(error)


def test_a_token_refused_with_an_oauth_error_names_it(api):
    refusal = {"error": "invalid_client", "error_description": "no such client"}
    api.post(TOKEN_URL, status_code=401, json=refusal)

    error = raises(ApiError, read, exchange())

    assert str(error) == (
        "HTTP 401: the token request (POST /oauth/token) was refused: invalid_client (no such "
        "client); check RECONCILER_CLIENT_ID and RECONCILER_CLIENT_SECRET; they were sent with "
        "token_auth_method client_secret_post: the id and secret in the form (a server that "
        "takes only the other way needs token_auth_method: client_secret_basic, or "
        "RECONCILER_TOKEN_AUTH_METHOD=client_secret_basic)"
    )


def test_a_pause_the_resend_endpoint_asks_for_holds_up_no_other_request(api, time):
    # A gateway may limit the endpoint that sends e-mail alone: its refusals slow the
    # re-sends (their own pacer), never the run's reads and updates.
    client = exchange(time)
    api.post(BASE + RESEND_PATH, **refused(429, retry_after="3600"))
    api.get(INVITE_URL, **OK)

    with pytest.raises(RateLimited):  # an hour is more than its retry budget
        resend(client, pacer=RequestPacer(clock=time.clock, sleep=time.sleep))
    read(client)  # not held: sent and answered

    assert methods(api) == ["POST", "POST", "GET"]
    assert time.now < 101.0  # no hour waited either


class OtherWorker:
    """The watch of one request's attempts (``AttemptWatch``) that, before each attempt
    leaves, has another worker of the run send a request on the same exchange, on a
    thread of its own, and waits (bounded) until it ended: when each attempt left and
    when each failed, and how each of the other's requests ended (None: answered)."""

    def __init__(self, time: FakeTime, client: Exchange) -> None:
        self.time, self.client = time, client
        self.left: list[float] = []
        self.failed_at: list[float] = []
        self.others: list[ApiError | None] = []

    def before(self) -> None:
        self.left.append(self.time.now)
        thread = threading.Thread(target=self._request, daemon=True)
        thread.start()
        thread.join(10)
        assert not thread.is_alive(), "the other worker's request did not end within 10 s"

    def failed(self, error: ApiError) -> None:
        self.failed_at.append(self.time.now)

    def _request(self) -> None:
        try:
            read(self.client, OTHER_PATH)
        except ApiError as error:
            self.others.append(error)
        else:
            self.others.append(None)


def test_a_request_refused_again_and_again_while_others_go_through_backs_off_alone(api, time):
    # Refused three times in a row while another worker's request went through between
    # each: from the third on it is the request's own refusal (a path limited on its
    # own, a broken record), and it waits its own backoff before it goes again (1 s at
    # this jitter: half of 0.5 s x 2^2), not the run's pace alone.
    client = exchange(time)
    other = OtherWorker(time, client)
    api.get(INVITE_URL, [refused(429), refused(429), refused(429), OK])
    api.get(OTHER_URL, **OTHER_OK)

    read(client, watch=other)

    assert len(other.left) == 4 and other.others == [None] * 4  # the others let through
    gaps = [other.left[i + 1] - other.failed_at[i] for i in range(3)]
    assert gaps[2] == pytest.approx(1.0)
    assert max(gaps[:2]) < 0.5  # before: the holds after a refusal of the rate, shorter


def test_a_retry_held_past_its_budget_by_another_requests_pause_was_not_retried(api, time):
    # Its first attempt fails (a 500: retried after a backoff); meanwhile another
    # worker's request is refused with Retry-After: 3600, more than the retry budget
    # left. The request was sent once, and the error says it was not retried.
    client = exchange(time)
    other = OtherWorker(time, client)
    api.get(INVITE_URL, [refused(500), OK])
    api.get(OTHER_URL, **refused(429, retry_after="3600"))

    error = raises(RateLimited, read, client, watch=other)

    assert len(other.left) == 1 and [type(e) for e in other.others] == [RateLimited]
    assert str(error) == (
        "not retried: the server asked that no request start for another 3600 s, more than "
        "the 60 s left of this request's retry budget (retry_max_seconds: 60)"
    )


def test_a_403_whose_message_names_reconciler_scope_still_gets_the_note_of_what_was_granted(
    api,
):
    # The server's words decide nothing of ours: a message naming the setting used to
    # silence the note, and with it what the token was granted, which only we know.
    said = "forbidden: ask for invites:write with RECONCILER_SCOPE"
    api.patch(INVITE_URL, status_code=403, json=envelope(None, status=403, message=said))

    error = raises(PermissionDenied, patch, exchange(), idempotent=False)

    # Granted as asked (the token answer named no scope): no scope is missing as far as
    # the client can tell, and the note says so rather than blame one (issue 55: it
    # said "does not carry the scope" beside "granted: (the same) as asked"); "named no
    # scope" said once, not again in a parenthesis inside it.
    assert str(error) == (
        f"HTTP 403: {said}; the token answer named no scope, so the token was granted what "
        "was asked for ('kyb:invites:read kyb:invites:write', set with RECONCILER_SCOPE): as "
        "far as the client can tell no scope is missing, and the platform refused this for "
        "another reason: the client's "
        "permissions on the platform (for whoever administers it to check), or this invite "
        "(requestId 1001)"
    )


def test_a_request_after_refusals_is_not_sent_when_the_hold_outlasts_its_budget(api):
    # A read refused twice (429s without Retry-After) gives up within its 1 s budget;
    # nothing may start for another 1.2 s after those refusals, more than the next
    # read's whole budget: it is not sent at all, and says so.
    client = exchange(retry_max_seconds=1)
    api.get(INVITE_URL, **refused(429))
    api.get(OTHER_URL, **OTHER_OK)

    with pytest.raises(RateLimited):
        read(client)
    error = raises(RateLimited, read, client, OTHER_PATH)

    # No Retry-After: the wait is the run's own hold, not something the server asked.
    assert str(error) == (
        "not sent: no request may start for another 1.2 s after the server's refusals, "
        "more than the 1.0 s left of this request's retry budget (retry_max_seconds: 1)"
    )
    assert urls(api) == [TOKEN_URL, INVITE_URL, INVITE_URL]


def test_a_read_refused_again_and_again_is_not_retried_past_its_budget(api, time):
    # Each refusal with nothing let through since doubles the hold (0.4 s, 0.8 s, 1.6 s).
    # After the third, 0.4 s of the read's 2 s budget are left: it is not sent a fourth
    # time (that would leave after its budget ended), and the error says why.
    api.get(INVITE_URL, [refused(429), refused(429), refused(429), OK])

    error = raises(RateLimited, read, exchange(time, retry_max_seconds=2))

    assert str(error) == (
        "HTTP 429: refused (refused for all of retry_max_seconds: no request may start for "
        "another 1.6 s after the server's refusals, more than the 0.4 s left) (requestId 1001)"
    )
    assert methods(api) == ["POST", "GET", "GET", "GET"]
    assert time.now < 102.0  # the last hold not waited out


def test_waiting_for_the_runs_own_pace_spends_none_of_a_retry_budget(api, time):
    # Paced at one request every 4 s to begin with (the run's own guess: no limit known
    # yet), a read that failed twice with a 500 had its third try 3 s after its first,
    # all of its 3 s budget: 2.25 s of that it waited for the run's pace, which is no
    # server refusing and spends none of the budget, so the third try is still made.
    slow = RequestPacer(clock=time.clock, sleep=time.sleep, start_rate=0.25)
    api.get(INVITE_URL, [refused(500), refused(500), OK])

    answer = read(exchange(time, slow, retry_max_seconds=3, max_attempts=3))

    assert answer.status == 200
    assert methods(api) == ["POST", "GET", "GET", "GET"]
    assert time.now == pytest.approx(107.0)  # the first try at 104, when the pace let it


def update_whose_token_renewal_fails(
    api: Any, tmp_path: Path, renewal: dict[str, Any], **values: Any
) -> ApiError:
    """A PATCH answered 401 (its token revoked early), the renewal answered ``renewal``
    (each retry of it too): the error raised. The audit log records the update failed,
    not of unknown outcome, with the error's message and none of the token endpoint's
    status and requestId, as if the PATCH had been answered so."""
    path = tmp_path / "audit.jsonl"
    log = AuditLog(str(path), "ci-client")
    recorder = AttemptRecorder(log, "inv_8f2k1", "update")
    api.post(TOKEN_URL, [token_response(), renewal])
    expired = envelope(None, status=401, message="token revoked", request_id="4011")
    api.patch(INVITE_URL, status_code=401, json=expired)
    write = {"json_body": {"name": "Müller & Söhne GmbH"}, "idempotent": False, "watch": recorder}

    error = raises(ApiError, exchange(**values).call, "PATCH", INVITE_PATH, **write)
    log.close()

    records = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    outcomes = [(r["record"], r.get("outcome")) for r in records]
    assert outcomes == [("attempt", None), ("outcome", "failed")]
    assert records[1]["message"] == str(error)
    assert records[1].get("http_status") is None and records[1].get("request_id") is None
    return error


def test_an_update_whose_token_renewal_failed_is_logged_failed_not_unknown(api, tmp_path):
    # Renewing the token times out twice. The 401 carried nothing out and the PATCH never
    # went again: the audit log records it failed, naming the token step, not of unknown
    # outcome (the token request's timeout, which may have reached the token endpoint, is
    # not this write's).
    slow = {"exc": requests.exceptions.ReadTimeout("read timed out")}
    error = update_whose_token_renewal_fails(api, tmp_path, slow, max_attempts=2)

    assert isinstance(error, errors.TransportError)
    assert error.maybe_sent is False and not error.outcome_unknown
    assert str(error).endswith("(while getting a token; this request was not sent)")
    assert methods(api) == ["POST", "PATCH", "POST", "POST"]


def test_an_update_whose_token_renewal_was_refused_records_none_of_the_token_endpoints_ids(
    api, tmp_path
):
    # The token endpoint refuses the renewal (401 invalid_client, requestId tok-77). The
    # audit log's record of the update must not carry the token endpoint's status and
    # requestId as if the PATCH had been answered so; the message names the token
    # request, with its own.
    refusal = {
        "status_code": 401,
        "json": {"error": "invalid_client", "error_description": "client disabled"},
        "headers": {"X-Request-Id": "tok-77"},
    }
    error = update_whose_token_renewal_fails(api, tmp_path, refusal)

    assert "tok-77" in str(error)  # the token request's own, named with it


def test_a_token_request_failing_as_the_run_stops_is_still_named(api):
    # Ctrl-C while the token endpoint answers a 500: not retried, and the error still
    # says it was the token request that failed, not the read it was for.
    client = exchange()

    def failing_while_stopped(request: Any, context: Any) -> dict[str, Any]:
        client.stop.set("interrupted")
        return envelope(None, status=500, message="internal error", request_id="5001")

    api.post(TOKEN_URL, status_code=500, json=failing_while_stopped)

    error = raises(ApiError, read, client)

    assert str(error) == (
        "HTTP 500: no token from the token request (POST /oauth/token): internal error "
        "(requestId 5001)"
    )
    assert urls(api) == [TOKEN_URL]


def test_a_run_stopped_while_a_retry_waits_ends_with_the_error_it_waited_to_retry(api, time):
    # Ctrl-C during the back-off after a 500: no retry is sent, and what the user reads
    # is the 500 that was to be retried, with its requestId.
    client = exchange(time=time)

    def sleep(seconds: float) -> None:
        time.sleep(seconds)
        client.stop.set("interrupted")

    client._sleep = sleep
    failed = envelope(None, status=500, message="internal error", request_id="5001")
    api.get(INVITE_URL, status_code=500, json=failed)

    error = raises(ApiError, read, client)

    assert str(error) == "HTTP 500: internal error (requestId 5001)"
    assert methods(api) == ["POST", "GET"]


def decide(error: ApiError, attempt: int = 1, time_left: float = 60.0, **kw: object):
    options = {"idempotent": True, "max_attempts": 5, "jitter": 0.5, **kw}
    return decide_retry(error, attempt, time_left, **options)  # type: ignore[arg-type]


# Answers that cannot change are never retried, and say nothing of a retry ("gave up
# after 1 attempt" would suggest it tried to).
NEVER_RETRIED = [
    errors.InvalidRequest("bad email", status=400),
    errors.AuthenticationFailed("revoked", status=401),
    PermissionDenied("scope", status=403),
    errors.NotFound("gone", status=404),
    errors.Conflict("accepted", status=409),
    errors.Redirected("redirect to evil.example", status=307),
    errors.EnvelopeFailure("success: false", status=200),
    errors.WrongInvite("answered about inv_other", status=200),
    errors.AnswerTooLarge("too large", status=200),
    errors.TokenRefused("token holds a line break"),
    errors.TransportError("certificate verify failed", maybe_sent=False, permanent=True),
]
DOWN = errors.ServerError("down", status=503)
SLOW = RateLimited("slow", status=429)
BARE_503 = errors.GatewayRefused("an HTML page", status=503)
ASKED = "the server asked to wait {} s, more than the {} s left of retry_max_seconds"
REFUSED = "refused for all of retry_max_seconds, not counting the time it waited for its turn"
SPENT = "retry_max_seconds spent"
NEVER_LEFT = errors.TransportError("connection refused", maybe_sent=False)
MAYBE_LEFT = errors.TransportError("read timed out", maybe_sent=True)
NO_ANSWER = errors.TransportError("no answer within 30s", maybe_sent=True)
NO_CONNECT = errors.TransportError("could not connect", maybe_sent=False)
UNAVAILABLE = errors.ServerError("service temporarily unavailable", status=503)
FAULT = errors.ServerError("fault", status=500, enveloped=True)
NOT = RetryDecision(False)


def retried(delay: float) -> RetryDecision:
    return RetryDecision(True, delay)


def gave_up(attempts: str, why: str = "") -> RetryDecision:
    return RetryDecision(False, note=f" (gave up after {attempts}{': ' + why if why else ''})")


def rate_limited(retry_after: float) -> RateLimited:
    return RateLimited("slow", status=429, retry_after=retry_after)


def after(attempt: int = 1, time_left: float = 60.0, **kw: object) -> dict[str, Any]:
    """decide's options: ``attempt`` attempts failed, ``time_left`` of the budget left."""
    return {"attempt": attempt, "time_left": time_left, **kw}


def asked(wait: str, left: str) -> str:
    return ASKED.format(wait, left)


WRITE = {"idempotent": False}


def busy(retry_after: float) -> errors.ServerError:
    return errors.ServerError("busy", status=503, retry_after=retry_after)


# id: (the error, decide's options, the decision): a refusal (a 429, a bare 503) waits in
# the pacer and is not counted against max_attempts; a write is sent again only when it
# surely never left or was refused before it was acted on; a request refused on its own
# backs off alone (thousands of refusals still give a bounded back-off); a give-up names
# its reason, "1 attempt" in the singular, never a negative number of seconds left, never
# a wait of 0 s asked, the wait and the time left as precise as it takes to read apart.
DECISIONS: dict[str, tuple[ApiError, dict[str, Any], RetryDecision]] = {
    **{type(error).__name__: (error, after(), NOT) for error in NEVER_RETRIED},
    # passing failures of idempotent requests are retried
    "5xx": (DOWN, after(), retried(0.25)),
    "429": (SLOW, after(), retried(0.0)),
    "timeout": (NO_ANSWER, after(), retried(0.25)),
    "refused": (NO_CONNECT, after(), retried(0.25)),
    "5xx-retry-after": (busy(7.0), after(), retried(7.0)),
    "429-waits-in-the-pacer": (rate_limited(3.0), after(), retried(0.0)),
    "retry-after-past-budget": (
        rate_limited(100000.0),
        after(1, 59.6),
        gave_up("1 attempt", asked("100000", "60")),
    ),
    "below-max-attempts": (DOWN, after(4), retried(2.0)),
    "max-attempts": (DOWN, after(5), gave_up("5 attempts")),
    "backoff-spends-budget": (DOWN, after(4, 2.0, jitter=0.99), gave_up("4 attempts", SPENT)),
    "429-through-pacer": (SLOW, after(1, 0.5), retried(0.0)),
    "bare-503-through-pacer": (BARE_503, after(1, 0.5), retried(0.0)),
    "429-not-counted": (SLOW, after(12), retried(0.0)),
    "bare-503-not-counted": (BARE_503, after(12), retried(0.0)),
    "429-past-budget": (SLOW, after(9, -0.2), gave_up("9 attempts", REFUSED)),
    "bare-503-past-budget": (BARE_503, after(9, -0.2), gave_up("9 attempts", REFUSED)),
    "api-503-backs-off": (UNAVAILABLE, after(), retried(0.25)),
    "one-attempt": (DOWN, after(max_attempts=1), gave_up("1 attempt")),
    "two-attempts": (DOWN, after(2, max_attempts=2), gave_up("2 attempts")),
    "budget-spent-said-as-0": (
        rate_limited(30.0),
        after(1, -4.0),
        gave_up("1 attempt", asked("30", "0")),
    ),
    "asked-exactly-the-time-left": (busy(20.0), after(1, 20.0), gave_up("1 attempt", SPENT)),
    "backoff-fits": (DOWN, after(2, 0.6), retried(0.5)),
    "write-never-sent": (NEVER_LEFT, after(**WRITE), retried(0.25)),
    "write-maybe-sent": (MAYBE_LEFT, after(**WRITE), NOT),
    "read-maybe-sent": (MAYBE_LEFT, after(), retried(0.25)),
    "write-after-500": (errors.ServerError("down", status=500), after(**WRITE), NOT),
    "write-after-500-enveloped": (FAULT, after(**WRITE), NOT),
    "write-after-502": (errors.ServerError("bad gateway", status=502), after(**WRITE), NOT),
    "write-after-504": (errors.ServerError("timed out", status=504), after(**WRITE), NOT),
    "write-refused-503": (DOWN, after(**WRITE), retried(0.25)),
    "write-refused-429": (SLOW, after(**WRITE), retried(0.0)),
    "own-refusal-backs-off": (SLOW, after(jitter=1.0, own=True), retried(0.5)),
    "own-refusal-capped": (SLOW, after(9, jitter=1.0, own=True), retried(8.0)),
    "shared-refusal": (SLOW, after(jitter=1.0), retried(0.0)),
    "own-thousands-of-times": (SLOW, after(5000, jitter=1.0, own=True, **WRITE), retried(8.0)),
    "refused-no-time-left": (SLOW, after(3, 0.0), gave_up("3 attempts", REFUSED)),
    "own-outlasts-budget": (SLOW, after(5, 4.0, own=True), gave_up("5 attempts", SPENT)),
    "own-fits-budget": (SLOW, after(5, 4.5, own=True), retried(4.0)),
    "retry-after-0-spent": (rate_limited(0.0), after(3, -0.2), gave_up("3 attempts", REFUSED)),
    "asked-reads-as-left": (
        rate_limited(1.0),
        after(2, 0.96),
        gave_up("2 attempts", asked("1.00", "0.96")),
    ),
}


@pytest.mark.parametrize(
    ("error", "options", "decided"), list(DECISIONS.values()), ids=list(DECISIONS)
)
def test_what_is_decided_after_a_failure_and_what_a_give_up_says(error, options, decided):
    assert decide(error, **options) == decided


def test_the_runs_own_not_sent_is_no_refusal_of_the_servers():
    assert not RateLimited("not sent: the server asked ...").refused_before_acting


def test_backoff_grows_per_attempt_with_full_jitter_and_a_cap():
    delays = [decide(DOWN, attempt=n, jitter=1.0, max_attempts=20).delay for n in range(1, 9)]

    assert delays[:4] == [0.5, 1.0, 2.0, 4.0]
    assert max(delays) == BACKOFF_CAP
    assert decide(DOWN, attempt=3, jitter=0.0).delay == 0.0
    assert decide(DOWN, attempt=3, jitter=0.25).delay == pytest.approx(0.5)


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
    asked, time_left, said
):
    why = f"the server asked to wait {said} of retry_max_seconds"
    assert decide(rate_limited(asked), time_left=time_left) == gave_up("1 attempt", why)


# -- the two 403s told apart (issue 55), in fake time ---------------------------------
# The platform's own 403 (its envelope, its requestId) is a permission stop: at once, no
# retry, the message naming what it refused and the requestId. A 403 that is not the
# platform's (an HTML page or an empty body, no requestId) to a token the platform had
# accepted is a gateway blocking the client for speed (mod_evasive, a WAF's rate rule): a
# rate signal. Nothing is sent for a quiet period, then one request probes; a PATCH or a
# re-send it refused never reached the platform and is sent again, exactly once. A 403
# that is not the platform's before any token was accepted names no missing scope.

PAGE = (
    '<!DOCTYPE HTML PUBLIC "-//W3C//DTD HTML 4.01//EN">\n<html><head>\n<title>403 Forbidden'
    "</title>\n</head><body>\n<h1>Forbidden</h1>\n<p>You don't have permission to access "
    "this resource.</p>\n</body></html>\n"
)
# mod_evasive's refusal: Apache's own page, no requestId.
BLOCKED: dict[str, Any] = {
    "status_code": 403,
    "text": PAGE,
    "headers": {"Content-Type": "text/html; charset=iso-8859-1"},
}
EMPTY: dict[str, Any] = {"status_code": 403, "content": b""}
PLATFORM_403: dict[str, Any] = {
    "status_code": 403,
    "json": envelope(None, status=403, message="client ci-client may not update invites"),
}
# nginx's add_header or Heroku's router put an X-Request-Id on any page (attack t7):
# only the platform's envelope makes a 403 the platform's.
WITH_REQUEST_ID = {**BLOCKED, "headers": {**BLOCKED["headers"], "X-Request-Id": "gw-00000007"}}
JSON_FORBIDDEN: dict[str, Any] = {  # API Gateway's or a WAF's own JSON: no envelope
    "status_code": 403,
    "json": {"message": "Forbidden"},
    "headers": {"x-amzn-ErrorType": "ForbiddenException"},
}


class AttemptWatch:
    def __init__(self) -> None:
        self.sent = 0
        self.errors: list[ApiError] = []

    def before(self) -> None:
        self.sent += 1

    def failed(self, error: ApiError) -> None:
        self.errors.append(error)


def accepted(api: Any, time: FakeTime, **values: Any) -> Exchange:
    """An exchange whose read the platform answered: the token is accepted."""
    client = exchange(time, **values)
    api.get(INVITE_URL, **OK)
    read(client)
    return client


@pytest.mark.parametrize(
    "refusal",
    [BLOCKED, EMPTY, WITH_REQUEST_ID],
    ids=["html-page", "empty-body", "x-request-id-header-alone"],
)
def test_a_403_not_the_platforms_after_its_token_was_accepted_is_retried_after_a_quiet(
    api, time, refusal
):
    client = accepted(api, time)
    api.get(OTHER_URL, [refusal, OK])
    before = time.now

    read(client, OTHER_PATH)

    assert urls(api) == [TOKEN_URL, INVITE_URL, OTHER_URL, OTHER_URL]
    assert time.now - before >= QUIET - 1e-9  # nothing sent in the quiet period
    assert client.pacer.blocked


def test_the_platforms_own_403_stops_at_once_naming_the_permission_and_request_id(api, time):
    client = accepted(api, time)
    api.patch(INVITE_URL, [PLATFORM_403, OK])

    text = str(raises(PermissionDenied, patch, client))
    assert text.startswith("HTTP 403: client ci-client may not update invites; ")
    assert text.endswith("(requestId 1001)")
    assert "permissions on the platform" in text
    assert "does not carry the scope" not in text  # granted as asked: none is missing
    assert methods(api) == ["POST", "GET", "PATCH"]
    assert not client.pacer.blocked


def test_a_403_page_before_any_token_was_accepted_names_no_scope_and_is_not_retried(api, time):
    # The first answer of a run inside a block: nothing says the platform ever let this
    # client through, so it is no rate signal; but it is not the platform's either.
    api.get(INVITE_URL, [BLOCKED, OK])

    text = str(raises(PermissionDenied, read, exchange(time)))
    assert "not the platform's answer (no envelope)" in text
    assert "--max-rate" in text and "scope" not in text
    assert len(api.request_history) == 2


def test_a_patch_the_gateway_refused_is_sent_again_exactly_once_when_a_read_is_refused_too(
    api, time
):
    # The read sent right after the 403 (before the quiet period) is refused too: a block
    # on the whole client, which the PATCH never got past.
    client = accepted(api, time)
    api.get(INVITE_URL, [BLOCKED, OK])
    api.patch(INVITE_URL, [BLOCKED, OK])
    watch = AttemptWatch()

    patch(client, watch=watch, confirm=INVITE_PATH)

    assert watch.sent == 2 and [type(e) for e in watch.errors] == [GatewayForbidden]
    assert watch.errors[0].refused_before_acting
    assert methods(api) == ["POST", "GET", "PATCH", "GET", "PATCH"]


def test_a_re_send_the_gateway_refused_is_made_again_in_the_run_exactly_once(api, time):
    # Not idempotent, and refused before the platform saw it: sent again after the quiet
    # period, on the run's pacer (a block is on the client, not on the endpoint).
    client = accepted(api, time)
    resends = RequestPacer(clock=time.clock, sleep=time.sleep)
    api.get(INVITE_URL, [BLOCKED, OK])  # the read that confirms the block
    api.post(RESEND_URL, [BLOCKED, RESENT])
    watch = AttemptWatch()
    before = time.now

    resend(client, watch=watch, pacer=resends, confirm=INVITE_PATH)

    assert watch.sent == 2 and [type(e) for e in watch.errors] == [GatewayForbidden]
    assert urls(api).count(RESEND_URL) == 2
    assert time.now - before >= QUIET - 1e-9
    assert client.pacer.blocked  # the run's pacer keeps quiet too, and paces re-sends now


def test_giving_up_behind_a_gateway_says_who_refused_what_got_through_and_what_to_do(api, time):
    # The quiet doubles while the probe is refused: 5.1 s, 10.2 s; the next, 20.4 s, is
    # more than the budget has left.
    client = accepted(api, time, retry_max_seconds=20)
    api.get(OTHER_URL, **BLOCKED)

    text = str(raises(GatewayForbidden, read, client, OTHER_PATH))
    assert text.startswith("HTTP 403: Forbidden (an HTML page, probably from a proxy or gateway)")
    assert "A gateway in front of the platform (not the platform) refused this client" in text
    assert "2 answers got through before it first refused" in text  # the token, the read
    # Attack LOW 8: the figures are the waits made (5.1 s, then 10.2 s), not half of one.
    assert "it kept refusing for 15.3 s, the last after a quiet of 10.2 s" in text
    # LOW 7: a 403 that never ends may be a rule, not a block for speed: hedged.
    assert "a block for sending too fast, or a rule that refuses this client" in text
    assert "--parallelism 1" in text and "--max-rate" in text and "RECONCILER_MAX_RATE" in text
    assert "scope" not in text
    assert urls(api).count(OTHER_URL) == 3


def test_a_gateways_403_may_be_sent_again_even_when_not_idempotent():
    blocked = GatewayForbidden("Forbidden", status=403)

    assert blocked.refused_before_acting and not blocked.outcome_unknown
    decision = decide_retry(blocked, 1, 30.0, idempotent=False, max_attempts=1, jitter=0.5)
    assert decision.retry and decision.delay == 0.0  # its wait is the pacer's quiet period


@pytest.mark.parametrize(
    "error",
    [
        PermissionDenied("forbidden", status=403, request_id="r-1", enveloped=True),
        PermissionDenied("forbidden", status=403, bearer_error="insufficient_scope"),
    ],
    ids=["envelope", "bearer-challenge"],
)
def test_a_403_with_any_sign_of_the_platform_is_no_gateways(error):
    assert GatewayForbidden.of(error) is None


def test_a_token_request_answered_with_a_gateways_page_blames_no_setting(api, time):
    # A run started inside a block: its token request meets the gateway's page first.
    api.post(TOKEN_URL, **BLOCKED)

    text = str(raises(ApiError, read, exchange(time)))
    assert text.startswith("HTTP 403: no token from the token request (POST /oauth/token): ")
    assert "not the platform's answer (no envelope)" in text
    assert "--max-rate" in text
    assert "RECONCILER_SCOPE" not in text and "token_path" not in text


# -- a 403 to a write is a block only when a read confirms it (attack on issue 55) ----


@pytest.mark.parametrize(
    "refusal", [BLOCKED, EMPTY, JSON_FORBIDDEN], ids=["html-page", "empty-body", "json-message"]
)
def test_a_re_send_refused_by_a_403_a_read_gets_past_is_unknown_and_never_sent_again(
    api, time, refusal
):
    # A gateway that refuses in the answer phase (ModSecurity's phase 4, a proxy that
    # rewrites the answer): the platform may have sent the e-mail. The read sent right
    # after it is answered: no block covers the client, so the 403 proves nothing.
    client = accepted(api, time)
    api.post(RESEND_URL, [refusal, RESENT])
    watch = AttemptWatch()

    error = raises(GatewayForbidden, resend, client, watch=watch, confirm=INVITE_PATH)
    assert error.outcome_unknown and not error.refused_before_acting and not error.run_fatal
    assert "whether it was carried out is unknown" in str(error)
    assert "for speed" not in str(error)  # no block: nothing says the rate was the cause
    assert watch.sent == 1 and [e.outcome_unknown for e in watch.errors] == [True]
    assert urls(api) == [TOKEN_URL, INVITE_URL, RESEND_URL, INVITE_URL]  # the read right after
    assert not client.pacer.blocked  # no block: nothing learned, no quiet period


def test_a_patch_refused_by_a_403_a_read_gets_past_is_not_sent_again_its_outcome_unknown(api, time):
    client = accepted(api, time)
    api.patch(INVITE_URL, [BLOCKED, OK])

    error = raises(GatewayForbidden, patch, client, confirm=INVITE_PATH)

    assert error.outcome_unknown  # the applier reads it back
    assert methods(api) == ["POST", "GET", "PATCH", "GET"]


def test_a_write_refused_with_no_read_to_confirm_a_block_is_unknown(api, time):
    client = accepted(api, time)
    api.post(RESEND_URL, [BLOCKED, RESENT])

    error = raises(GatewayForbidden, resend, client)

    assert error.outcome_unknown
    assert urls(api).count(RESEND_URL) == 1


def test_a_write_that_left_while_a_block_was_on_is_sent_again_without_a_read(api, time):
    # The last answer before it left was a gateway's 403 (another request's, in flight
    # beside it): the block was on when it left; no read is needed to tell.
    client = accepted(api, time)
    client._block_on = True
    api.post(RESEND_URL, [BLOCKED, RESENT])

    resend(client, confirm=INVITE_PATH)

    assert urls(api) == [TOKEN_URL, INVITE_URL, RESEND_URL, RESEND_URL]
    assert client.pacer.blocked


def test_a_block_just_after_a_token_renewal_is_still_a_gateways(api, time):
    # The token of this run was accepted once; the one renewed after a 401 meets a block
    # before any answer accepted it (attack t11): still this client's block, not a
    # permission stop.
    client = accepted(api, time)
    api.post(TOKEN_URL, [token_response(), token_response()])
    expired = {"status_code": 401, "json": envelope(None, status=401, message="expired")}
    api.get(OTHER_URL, [expired, BLOCKED, OK])

    read(client, OTHER_PATH)

    assert urls(api).count(OTHER_URL) == 3 and urls(api).count(TOKEN_URL) == 2  # renewed once
    assert client.pacer.blocked


def test_a_token_that_expired_while_the_probe_waited_is_fetched_within_its_turn(api, time):
    # Attack t11 hung: the probe after a block's quiet is the one request out; its token
    # expired during the quiet, and the token request waited for a turn of the run's
    # pacer behind that very probe, for ever. Fetched inside a turn, it takes none.
    client = exchange(time)
    api.post(TOKEN_URL, [token_response(expires_in=12), token_response()])
    api.get(INVITE_URL, **OK)
    read(client)
    time.now += 6.0  # renewed 10.8 s after it was issued: inside the quiet to come
    api.get(OTHER_URL, [BLOCKED, OK])
    before = time.now

    read(client, OTHER_PATH)

    assert time.now - before < 2 * QUIET  # no wait past the quiet period
    assert urls(api) == [TOKEN_URL, INVITE_URL, OTHER_URL, TOKEN_URL, OTHER_URL]
