"""Exchange, on the wire (requests-mock): how the token request carries the client's
credentials, and what a refusal says of the token. Everything else it does is tested
through the client (unit/api/test_client.py)."""

from __future__ import annotations

import base64
from typing import Any

import pytest
from support.api_answers import BASE, INVITE, INVITE_URL, TOKEN, envelope, token_response
from support.limits import FakeTime

from reconciler.api.capacity.pacing import RequestPacer
from reconciler.api.exceptions import ApiError, PermissionDenied
from reconciler.api.http.exchange import Exchange
from reconciler.api.http.urls import parse_base_url
from reconciler.settings.config import Settings
from reconciler.stop import Stop

TOKEN_URL = BASE + "/oauth/token"
INVITE_PATH = INVITE_URL.removeprefix(BASE)


def exchange(**values: Any) -> Exchange:
    settings = Settings().with_values(
        {"base_url": BASE, "client_id": "ci-client", "client_secret": "cs-Value-42", **values}
    )
    credentials = settings.credentials()
    time = FakeTime()
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
