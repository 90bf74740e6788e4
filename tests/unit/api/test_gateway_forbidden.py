"""The two 403s told apart (issue 55), on the wire (requests-mock) in fake time.

The platform's own 403 (its envelope, its requestId) is a permission stop: at once, no
retry, the message naming what it refused and the requestId. A 403 that is not the
platform's (an HTML page or an empty body, no requestId) to a token the platform had
accepted is a gateway blocking the client for speed (mod_evasive, a WAF's rate rule): a
rate signal. Nothing is sent for a quiet period, then one request probes; a PATCH or a
re-send it refused never reached the platform and is sent again, exactly once. A 403
that is not the platform's before any token was accepted names no missing scope.
"""

from __future__ import annotations

from typing import Any

import pytest
from support.api_answers import BASE, INVITE, INVITE_URL, INVITES, envelope, token_response
from support.limits import FakeTime

from reconciler.api.capacity import QUIET, RequestPacer
from reconciler.api.exceptions import ApiError, GatewayForbidden, PermissionDenied
from reconciler.api.exchange import Exchange, decide_retry
from reconciler.settings.config import Settings

TOKEN_URL = BASE + "/oauth/token"
INVITE_PATH = INVITE_URL.removeprefix(BASE)
OTHER_URL = INVITES + "inv_other"
OTHER_PATH = OTHER_URL.removeprefix(BASE)
RESEND_URL = INVITE_URL + "/resend"
RESEND_PATH = INVITE_PATH + "/resend"
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
OK: dict[str, Any] = {"json": envelope(INVITE)}
PLATFORM_403: dict[str, Any] = {
    "status_code": 403,
    "json": envelope(None, status=403, message="client ci-client may not update invites"),
}


def exchange(time: FakeTime, **values: Any) -> Exchange:
    settings = Settings().with_values(
        {"base_url": BASE, "client_id": "ci-client", "client_secret": "cs-Value-42", **values}
    )
    pacer = RequestPacer(clock=time.clock, sleep=time.sleep)
    return Exchange(settings, pacer=pacer, clock=time.clock, sleep=time.sleep, jitter=lambda: 0.5)


class AttemptWatch:
    def __init__(self) -> None:
        self.sent = 0
        self.errors: list[ApiError] = []

    def before(self) -> None:
        self.sent += 1

    def failed(self, error: ApiError) -> None:
        self.errors.append(error)


@pytest.fixture
def time() -> FakeTime:
    return FakeTime()


def accepted(client: Exchange, requests_mock: Any) -> None:
    """A read the platform answered: the token is accepted."""
    requests_mock.post(TOKEN_URL, [token_response()])
    requests_mock.get(INVITE_URL, **OK)
    client.call("GET", INVITE_PATH, idempotent=True)


# nginx's add_header or Heroku's router put an X-Request-Id on any page (attack t7):
# only the platform's envelope makes a 403 the platform's.
WITH_REQUEST_ID = {**BLOCKED, "headers": {**BLOCKED["headers"], "X-Request-Id": "gw-00000007"}}


@pytest.mark.parametrize(
    "refusal",
    [BLOCKED, EMPTY, WITH_REQUEST_ID],
    ids=["html-page", "empty-body", "x-request-id-header-alone"],
)
def test_a_403_not_the_platforms_after_its_token_was_accepted_is_retried_after_a_quiet(
    requests_mock: Any, time: FakeTime, refusal: dict[str, Any]
) -> None:
    client = exchange(time)
    accepted(client, requests_mock)
    requests_mock.get(OTHER_URL, [refusal, OK])
    before = time.now

    client.call("GET", OTHER_PATH, idempotent=True)

    assert [r.url for r in requests_mock.request_history] == [
        TOKEN_URL,
        INVITE_URL,
        OTHER_URL,
        OTHER_URL,
    ]
    assert time.now - before >= QUIET - 1e-9  # nothing sent in the quiet period
    assert client.pacer.blocked


def test_the_platforms_own_403_stops_at_once_naming_the_permission_and_request_id(
    requests_mock: Any, time: FakeTime
) -> None:
    client = exchange(time)
    accepted(client, requests_mock)
    requests_mock.patch(INVITE_URL, [PLATFORM_403, OK])

    with pytest.raises(PermissionDenied) as caught:
        client.call("PATCH", INVITE_PATH, json_body={"name": "X"}, idempotent=True)

    text = str(caught.value)
    assert text.startswith("HTTP 403: client ci-client may not update invites; ")
    assert text.endswith("(requestId 1001)")
    assert "permissions on the platform" in text
    assert "does not carry the scope" not in text  # granted as asked: none is missing
    assert [r.method for r in requests_mock.request_history] == ["POST", "GET", "PATCH"]
    assert not client.pacer.blocked


def test_a_403_page_before_any_token_was_accepted_names_no_scope_and_is_not_retried(
    requests_mock: Any, time: FakeTime
) -> None:
    # The first answer of a run inside a block: nothing says the platform ever let this
    # client through, so it is no rate signal; but it is not the platform's either.
    client = exchange(time)
    requests_mock.post(TOKEN_URL, [token_response()])
    requests_mock.get(INVITE_URL, [BLOCKED, OK])

    with pytest.raises(PermissionDenied) as caught:
        client.call("GET", INVITE_PATH, idempotent=True)

    text = str(caught.value)
    assert "not the platform's answer (no envelope)" in text
    assert "--max-rate" in text and "scope" not in text
    assert len(requests_mock.request_history) == 2


def test_a_patch_the_gateway_refused_is_sent_again_exactly_once_when_a_read_is_refused_too(
    requests_mock: Any, time: FakeTime
) -> None:
    # The read sent right after the 403 (before the quiet period) is refused too: a block
    # on the whole client, which the PATCH never got past.
    client = exchange(time)
    accepted(client, requests_mock)
    requests_mock.get(INVITE_URL, [BLOCKED, OK])
    requests_mock.patch(INVITE_URL, [BLOCKED, OK])
    watch = AttemptWatch()

    client.call(
        "PATCH",
        INVITE_PATH,
        json_body={"name": "X"},
        idempotent=True,
        watch=watch,
        confirm=INVITE_PATH,
    )

    assert watch.sent == 2 and [type(e) for e in watch.errors] == [GatewayForbidden]
    assert watch.errors[0].refused_before_acting
    methods = [r.method for r in requests_mock.request_history]
    assert methods == ["POST", "GET", "PATCH", "GET", "PATCH"]


def test_a_re_send_the_gateway_refused_is_made_again_in_the_run_exactly_once(
    requests_mock: Any, time: FakeTime
) -> None:
    # Not idempotent, and refused before the platform saw it: sent again after the quiet
    # period, on the run's pacer (a block is on the client, not on the endpoint).
    client = exchange(time)
    resends = RequestPacer(clock=time.clock, sleep=time.sleep)
    accepted(client, requests_mock)
    requests_mock.get(INVITE_URL, [BLOCKED, OK])  # the read that confirms the block
    requests_mock.post(RESEND_URL, [BLOCKED, {"json": envelope({"id": "inv_8f2k1"})}])
    watch = AttemptWatch()
    before = time.now

    client.call(
        "POST",
        RESEND_PATH,
        json_body={},
        idempotent=False,
        watch=watch,
        pacer=resends,
        confirm=INVITE_PATH,
    )

    assert watch.sent == 2 and [type(e) for e in watch.errors] == [GatewayForbidden]
    assert [r.url for r in requests_mock.request_history].count(RESEND_URL) == 2
    assert time.now - before >= QUIET - 1e-9
    assert client.pacer.blocked  # the run's pacer keeps quiet too, and paces re-sends now


def test_giving_up_behind_a_gateway_says_who_refused_what_got_through_and_what_to_do(
    requests_mock: Any, time: FakeTime
) -> None:
    # The quiet doubles while the probe is refused: 5.1 s, 10.2 s; the next, 20.4 s, is
    # more than the budget has left.
    client = exchange(time, retry_max_seconds=20)
    accepted(client, requests_mock)
    requests_mock.get(OTHER_URL, **BLOCKED)

    with pytest.raises(GatewayForbidden) as caught:
        client.call("GET", OTHER_PATH, idempotent=True)

    text = str(caught.value)
    assert text.startswith("HTTP 403: Forbidden (an HTML page, probably from a proxy or gateway)")
    assert "A gateway in front of the platform (not the platform) refused this client" in text
    assert "2 answers got through before it first refused" in text  # the token, the read
    # Attack LOW 8: the figures are the waits made (5.1 s, then 10.2 s), not half of one.
    assert "it kept refusing for 15.3 s, the last after a quiet of 10.2 s" in text
    # LOW 7: a 403 that never ends may be a rule, not a block for speed: hedged.
    assert "a block for sending too fast, or a rule that refuses this client" in text
    assert "--parallelism 1" in text and "--max-rate" in text and "RECONCILER_MAX_RATE" in text
    assert "scope" not in text
    assert [r.url for r in requests_mock.request_history].count(OTHER_URL) == 3


def test_a_gateways_403_may_be_sent_again_even_when_not_idempotent() -> None:
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
def test_a_403_with_any_sign_of_the_platform_is_no_gateways(error: PermissionDenied) -> None:
    assert GatewayForbidden.of(error) is None


def test_a_token_request_answered_with_a_gateways_page_blames_no_setting(
    requests_mock: Any, time: FakeTime
) -> None:
    # A run started inside a block: its token request meets the gateway's page first.
    client = exchange(time)
    requests_mock.post(TOKEN_URL, **BLOCKED)

    with pytest.raises(ApiError) as caught:
        client.call("GET", INVITE_PATH, idempotent=True)

    text = str(caught.value)
    assert text.startswith("HTTP 403: no token from the token request (POST /oauth/token): ")
    assert "not the platform's answer (no envelope)" in text
    assert "--max-rate" in text
    assert "RECONCILER_SCOPE" not in text and "token_path" not in text


# -- a 403 to a write is a block only when a read confirms it (attack on issue 55) ----

JSON_FORBIDDEN: dict[str, Any] = {  # API Gateway's or a WAF's own JSON: no envelope
    "status_code": 403,
    "json": {"message": "Forbidden"},
    "headers": {"x-amzn-ErrorType": "ForbiddenException"},
}


@pytest.mark.parametrize(
    "refusal", [BLOCKED, EMPTY, JSON_FORBIDDEN], ids=["html-page", "empty-body", "json-message"]
)
def test_a_re_send_refused_by_a_403_a_read_gets_past_is_unknown_and_never_sent_again(
    requests_mock: Any, time: FakeTime, refusal: dict[str, Any]
) -> None:
    # A gateway that refuses in the answer phase (ModSecurity's phase 4, a proxy that
    # rewrites the answer): the platform may have sent the e-mail. The read sent right
    # after it is answered: no block covers the client, so the 403 proves nothing.
    client = exchange(time)
    accepted(client, requests_mock)
    requests_mock.post(RESEND_URL, [refusal, {"json": envelope({"id": "inv_8f2k1"})}])
    watch = AttemptWatch()

    with pytest.raises(GatewayForbidden) as caught:
        client.call(
            "POST", RESEND_PATH, json_body={}, idempotent=False, watch=watch, confirm=INVITE_PATH
        )

    error = caught.value
    assert error.outcome_unknown and not error.refused_before_acting and not error.run_fatal
    assert "whether it was carried out is unknown" in str(error)
    assert "for speed" not in str(error)  # no block: nothing says the rate was the cause
    assert watch.sent == 1 and [e.outcome_unknown for e in watch.errors] == [True]
    urls = [r.url for r in requests_mock.request_history]
    assert urls == [TOKEN_URL, INVITE_URL, RESEND_URL, INVITE_URL]  # the read right after
    assert not client.pacer.blocked  # no block: nothing learned, no quiet period


def test_a_patch_refused_by_a_403_a_read_gets_past_is_not_sent_again_its_outcome_unknown(
    requests_mock: Any, time: FakeTime
) -> None:
    client = exchange(time)
    accepted(client, requests_mock)
    requests_mock.patch(INVITE_URL, [BLOCKED, OK])

    with pytest.raises(GatewayForbidden) as caught:
        client.call(
            "PATCH", INVITE_PATH, json_body={"name": "X"}, idempotent=True, confirm=INVITE_PATH
        )

    assert caught.value.outcome_unknown  # the applier reads it back
    assert [r.method for r in requests_mock.request_history] == ["POST", "GET", "PATCH", "GET"]


def test_a_write_refused_with_no_read_to_confirm_a_block_is_unknown(
    requests_mock: Any, time: FakeTime
) -> None:
    client = exchange(time)
    accepted(client, requests_mock)
    requests_mock.post(RESEND_URL, [BLOCKED, {"json": envelope({"id": "inv_8f2k1"})}])

    with pytest.raises(GatewayForbidden) as caught:
        client.call("POST", RESEND_PATH, json_body={}, idempotent=False)

    assert caught.value.outcome_unknown
    assert [r.url for r in requests_mock.request_history].count(RESEND_URL) == 1


def test_a_write_that_left_while_a_block_was_on_is_sent_again_without_a_read(
    requests_mock: Any, time: FakeTime
) -> None:
    # The last answer before it left was a gateway's 403 (another request's, in flight
    # beside it): the block was on when it left; no read is needed to tell.
    client = exchange(time)
    accepted(client, requests_mock)
    client._block_on = True
    requests_mock.post(RESEND_URL, [BLOCKED, {"json": envelope({"id": "inv_8f2k1"})}])

    client.call("POST", RESEND_PATH, json_body={}, idempotent=False, confirm=INVITE_PATH)

    urls = [r.url for r in requests_mock.request_history]
    assert urls == [TOKEN_URL, INVITE_URL, RESEND_URL, RESEND_URL]
    assert client.pacer.blocked


def test_a_block_just_after_a_token_renewal_is_still_a_gateways(
    requests_mock: Any, time: FakeTime
) -> None:
    # The token of this run was accepted once; the one renewed after a 401 meets a block
    # before any answer accepted it (attack t11): still this client's block, not a
    # permission stop.
    client = exchange(time)
    accepted(client, requests_mock)
    requests_mock.post(TOKEN_URL, [token_response(), token_response()])
    requests_mock.get(
        OTHER_URL,
        [{"status_code": 401, "json": envelope(None, status=401, message="expired")}, BLOCKED, OK],
    )

    client.call("GET", OTHER_PATH, idempotent=True)

    urls = [r.url for r in requests_mock.request_history]
    assert urls.count(OTHER_URL) == 3 and urls.count(TOKEN_URL) == 2  # renewed once
    assert client.pacer.blocked


def test_a_token_that_expired_while_the_probe_waited_is_fetched_within_its_turn(
    requests_mock: Any, time: FakeTime
) -> None:
    # Attack t11 hung: the probe after a block's quiet is the one request out; its token
    # expired during the quiet, and the token request waited for a turn of the run's
    # pacer behind that very probe, for ever. Fetched inside a turn, it takes none.
    client = exchange(time)
    requests_mock.post(TOKEN_URL, [token_response(expires_in=12), token_response()])
    requests_mock.get(INVITE_URL, **OK)
    client.call("GET", INVITE_PATH, idempotent=True)
    time.now += 6.0  # renewed 10.8 s after it was issued: inside the quiet to come
    requests_mock.get(OTHER_URL, [BLOCKED, OK])
    before = time.now

    client.call("GET", OTHER_PATH, idempotent=True)

    assert time.now - before < 2 * QUIET  # no wait past the quiet period
    urls = [r.url for r in requests_mock.request_history]
    assert urls == [TOKEN_URL, INVITE_URL, OTHER_URL, TOKEN_URL, OTHER_URL]
