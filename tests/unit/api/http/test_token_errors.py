"""The words a failed token request ends in: the request named, the server's RFC 6749
§5.2 code and description, advice for that code about settings that exist."""

from __future__ import annotations

import pytest

from reconciler.api.exceptions import (
    AuthenticationFailed,
    InvalidRequest,
    NotFound,
    ServerError,
)
from reconciler.api.http.token_answer import OAuthError
from reconciler.api.http.token_errors import token_failure
from reconciler.settings.config import Settings

SETTINGS = Settings(client_id="ci", client_secret="s3cret-value")
BASIC = Settings(
    client_id="ci", client_secret="s3cret-value", token_auth_method="client_secret_basic"
)
REQUEST = "the token request (POST /oauth/token)"


@pytest.mark.parametrize(
    ("code", "advice"),
    [
        ("unsupported_grant_type", "this endpoint does not offer the client_credentials grant; "
         "check token_path ('/oauth/token') and RECONCILER_BASE_URL"),
        ("invalid_request", "the server found the request malformed; check token_path "
         "('/oauth/token') and token_auth_method client_secret_post: the id and secret in the "
         "form"),
        ("invalid_grant", "check RECONCILER_CLIENT_ID and RECONCILER_CLIENT_SECRET; they were "
         "sent with token_auth_method client_secret_post"),
        ("server_special", "check RECONCILER_SCOPE ('kyb:invites:read kyb:invites:write'), "
         "RECONCILER_CLIENT_ID and token_path"),
    ],
)  # fmt: skip
def test_each_rfc6749_code_gets_its_own_advice(code: str, advice: str) -> None:
    error = token_failure(
        InvalidRequest("Bad Request", status=400), OAuthError(code, None), SETTINGS
    )
    assert isinstance(error, AuthenticationFailed) and error.status == 400
    assert error.message.startswith(f"{REQUEST} was refused: {code}; {advice}")


def test_invalid_client_names_the_method_used_and_the_other_one() -> None:
    refused = AuthenticationFailed("Unauthorized", status=401, request_id="r-1")
    error = token_failure(refused, OAuthError("invalid_client", "bad creds"), BASIC)
    assert str(error) == (
        f"HTTP 401: {REQUEST} was refused: invalid_client (bad creds); check "
        "RECONCILER_CLIENT_ID and RECONCILER_CLIENT_SECRET; they were sent with "
        "token_auth_method client_secret_basic: HTTP Basic (a server that takes only the other "
        "way needs token_auth_method: client_secret_post, or "
        "RECONCILER_TOKEN_AUTH_METHOD=client_secret_post) (requestId r-1)"
    )


def test_a_404_without_an_oauth_body_points_at_the_token_path() -> None:
    error = token_failure(NotFound("no such endpoint", status=404), None, SETTINGS)
    assert error.message == (
        f"no token from {REQUEST}: no such endpoint; check token_path ('/oauth/token') and "
        "RECONCILER_BASE_URL"
    )


def test_a_server_fault_keeps_its_class_and_names_the_request() -> None:
    fault = ServerError("Bad Gateway (an HTML page, probably from a proxy or gateway)", status=502)
    error = token_failure(fault, None, SETTINGS)
    assert isinstance(error, ServerError) and error.request_id is None
    assert error.message == (
        f"no token from {REQUEST}: Bad Gateway (an HTML page, probably from a proxy or gateway)"
    )


def test_a_413_on_the_token_request_points_at_the_gateway_not_the_scope() -> None:
    refused = token_failure(InvalidRequest("too large", status=413), None, SETTINGS)
    assert refused.message == (
        f"no token from {REQUEST}: too large; a proxy or gateway in front of the token endpoint "
        "limits request bodies; ask its operators"
    )
