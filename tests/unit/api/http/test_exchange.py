"""Exchange, on the wire (requests-mock): how the token request carries the client's
credentials, what a refusal says of the token, the re-send's own turns. Everything
else it does is tested through the client (unit/api/test_client.py)."""

from __future__ import annotations

import base64
from typing import Any

import pytest
from support.api_answers import BASE, INVITE, INVITE_URL, TOKEN, envelope, token_response
from support.limits import FakeTime

from reconciler.api.capacity.pacing import RequestPacer
from reconciler.api.exceptions import ApiError, PermissionDenied, RateLimited
from reconciler.api.http.exchange import Exchange
from reconciler.api.http.urls import parse_base_url
from reconciler.settings.config import Settings
from reconciler.stop import Stop

TOKEN_URL = BASE + "/oauth/token"
INVITE_PATH = INVITE_URL.removeprefix(BASE)
RESEND_PATH = INVITE_PATH + "/resend"


def exchange(time: FakeTime | None = None, **values: Any) -> Exchange:
    settings = Settings().with_values(
        {"base_url": BASE, "client_id": "ci-client", "client_secret": "cs-Value-42", **values}
    )
    credentials = settings.credentials()
    time = time or FakeTime()
    return Exchange(
        settings,
        credentials,
        parse_base_url(credentials.base_url),
        RequestPacer(clock=time.clock, sleep=time.sleep),
        clock=time.clock,
        sleep=time.sleep,
        jitter=lambda: 0.5,
        observer=None,
        stop=Stop(),
    )


def test_client_secret_basic_sends_the_credentials_in_the_header_not_the_form(
    requests_mock: Any,
) -> None:
    requests_mock.post(TOKEN_URL, [token_response()])
    requests_mock.get(INVITE_URL, json=envelope(INVITE))

    exchange(token_auth_method="client_secret_basic").call("GET", INVITE_PATH, idempotent=True)

    token_request = requests_mock.request_history[0]
    assert token_request.headers["Authorization"] == (
        "Basic " + base64.b64encode(b"ci-client:cs-Value-42").decode()
    )
    assert "client_secret" not in token_request.text


def test_a_403_names_the_scope_the_token_answer_granted(requests_mock: Any) -> None:
    granted = {"access_token": TOKEN, "token_type": "Bearer", "expires_in": 86400}
    granted["scope"] = "invites:read"
    requests_mock.post(TOKEN_URL, status_code=201, json=envelope(granted, status=201))
    requests_mock.patch(
        INVITE_URL, status_code=403, json=envelope(None, status=403, message="forbidden")
    )

    with pytest.raises(PermissionDenied) as caught:
        exchange().call("PATCH", INVITE_PATH, json_body={"name": "X"}, idempotent=False)

    assert "; granted: 'invites:read' (so the token answer said))" in str(caught.value)


def test_a_token_refused_with_an_oauth_error_names_it(requests_mock: Any) -> None:
    refused = {"error": "invalid_client", "error_description": "no such client"}
    requests_mock.post(TOKEN_URL, status_code=401, json=refused)

    with pytest.raises(ApiError) as caught:
        exchange().call("GET", INVITE_PATH, idempotent=True)

    assert str(caught.value) == (
        "HTTP 401: the token request (POST /oauth/token) was refused: invalid_client (no such "
        "client); check RECONCILER_CLIENT_ID and RECONCILER_CLIENT_SECRET; they were sent with "
        "token_auth_method client_secret_post: the id and secret in the form (a server that "
        "takes only the other way needs token_auth_method: client_secret_basic, or "
        "RECONCILER_TOKEN_AUTH_METHOD=client_secret_basic)"
    )


def refused(status: int, retry_after: str | None = None) -> dict[str, Any]:
    headers = {"Retry-After": retry_after} if retry_after is not None else {}
    return {
        "status_code": status,
        "headers": headers,
        "json": envelope(None, status=status, message="refused"),
    }


def test_a_pause_the_resend_endpoint_asks_for_holds_up_no_other_request(
    requests_mock: Any,
) -> None:
    # A gateway may limit the endpoint that sends e-mail alone: its refusals slow the
    # re-sends (their own pacer), never the run's reads and updates.
    time = FakeTime()
    client = exchange(time)
    resends = RequestPacer(clock=time.clock, sleep=time.sleep)
    requests_mock.post(TOKEN_URL, [token_response()])
    requests_mock.post(BASE + RESEND_PATH, **refused(429, retry_after="3600"))
    requests_mock.get(INVITE_URL, json=envelope(INVITE))

    with pytest.raises(RateLimited):  # an hour is more than its retry budget
        client.call("POST", RESEND_PATH, json_body={}, idempotent=False, pacer=resends)
    client.call("GET", INVITE_PATH, idempotent=True)  # not held: sent and answered

    assert [r.method for r in requests_mock.request_history] == ["POST", "POST", "GET"]
    assert time.now < 101.0  # no hour waited either


def test_a_403_whose_message_names_reconciler_scope_gets_no_scope_note_of_ours(
    requests_mock: Any,
) -> None:
    # The platform (or a gateway set up for this tool) already says which setting to
    # change: a note of ours after it would only say it again.
    said = "forbidden: ask for invites:write with RECONCILER_SCOPE"
    requests_mock.post(TOKEN_URL, [token_response()])
    requests_mock.patch(INVITE_URL, status_code=403, json=envelope(None, status=403, message=said))

    with pytest.raises(PermissionDenied) as caught:
        exchange().call("PATCH", INVITE_PATH, json_body={"name": "X"}, idempotent=False)

    assert str(caught.value) == f"HTTP 403: {said} (requestId 1001)"
