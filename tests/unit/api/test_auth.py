"""A secret is redacted in every form the tool shows it, not only as the server got it.

The words a failed token request ends in: the request named, the server's RFC 6749
§5.2 code and description, advice for that code about settings that exist.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from urllib.parse import quote, quote_plus, unquote, unquote_plus

import pytest
import requests

from reconciler import safetext
from reconciler.api.auth import (
    ClientBasicAuth,
    IssuedTokens,
    OAuthError,
    Token,
    register_secret_forms,
    token_failure,
    token_from_payload,
)
from reconciler.api.exceptions import (
    AuthenticationFailed,
    InvalidRequest,
    NotFound,
    ServerError,
    TokenRefused,
)
from reconciler.model.invite import kind_of
from reconciler.safetext import REDACTED, json_text, redact, register_secret
from reconciler.settings.config import Settings
from unit.api.conftest import fails

SPLIT_SECRET = "cs_live_Zq9xSECRETvalue_0123456789"


@pytest.fixture(autouse=True)
def no_secrets_left_behind() -> Iterator[None]:
    kept = safetext._REDACTOR._secrets
    yield
    safetext._REDACTOR._secrets = kept


@pytest.mark.parametrize("secret", ['Sécret"value-123', "tök\\en-ab12cd34", "plain-secret-9"])
def test_a_value_echoing_the_secret_is_shown_redacted(secret: str) -> None:
    register_secret_forms(secret)
    # A server's value is redacted as it is held; then `show` prints it as JSON with its
    # quote and backslash escaped: neither form shows the secret.
    shown = json_text(kind_of("name").redacted(f"echo {secret}"))
    assert REDACTED in shown
    assert "value-123" not in shown and "ab12cd34" not in shown and "plain-secret" not in shown
    # And a server message quoting the JSON body it was sent is redacted too.
    message = redact(f'bad body {{"client_secret": {json.dumps(secret)}}}')
    assert "value-123" not in message and "ab12cd34" not in message


def test_a_company_called_bearer_is_not_a_token() -> None:
    assert redact("Standard Bearer Holdings Ltd") == "Standard Bearer Holdings Ltd"
    assert redact("Flag Bearer Ltd.") == "Flag Bearer Ltd."
    # Only the tokens this run was issued are secrets (test_redaction_is_never_a_pattern...).
    register_secret_forms("abc123-issued-token")
    assert (
        redact("Authorization: Bearer abc123-issued-token") == f"Authorization: Bearer {REDACTED}"
    )


def test_a_token_shown_in_a_log_or_traceback_shows_nothing_of_itself():
    token = Token("eyJhbGciOiJIUzI1NiJ9.payload.sig", 3600, now=0)
    assert repr(token) == str(token) == "<token hidden>"
    assert f"{[token]}" == "[<token hidden>]"


@pytest.mark.parametrize(
    ("secret", "echoed"),
    [
        ("s3cr et/42+x", "s3cr et/42+x"),  # as set
        ("s3cr et/42+x", "s3cr+et%2F42%2Bx"),  # form-encoded, as the token request sends it
        ("s3cr et/42+x", "s3cr%20et%2F42%2Bx"),  # percent-encoded, slash too, as in a URL
        ('Sécret"value-123', 'Sécret\\"value-123'),  # JSON, non-ASCII kept (as shown)
        ('Sécret"value-123', 'S\\u00e9cret\\"value-123'),  # JSON, ASCII only
        ("tök\\en-ab12cd34", "tök\\\\en-ab12cd34"),  # JSON
    ],
)
def test_the_secret_in_each_encoding_a_server_may_echo_is_redacted_whole(secret, echoed) -> None:
    register_secret_forms(secret)
    assert redact(f'{{"message": "bad secret {echoed}!"}}') == (
        f'{{"message": "bad secret {REDACTED}!"}}'
    )


# -- token types, lifetimes, redaction of the tokens a run is issued ------------------


@pytest.mark.parametrize(
    ("kind", "shown"),
    [
        *((kind, None) for kind in ("Bearer", "bearer", "BEARER", None)),  # used
        ("DPoP", "'DPoP'"), ("mac", "'mac'"), (["Bearer"], "\"['Bearer']\""),
    ],
)  # fmt: skip
def test_a_bearer_token_of_any_case_is_used_and_one_of_another_type_refused_naming_it(kind, shown):
    payload = {"access_token": "tok-123456789", "expires_in": 60}
    if kind is not None:
        payload["token_type"] = kind
    if shown is None:
        assert token_from_payload(payload, payload, 0, IssuedTokens()).value == "tok-123456789"
        return
    assert str(fails(TokenRefused, token_from_payload, payload, payload, 0, IssuedTokens())) == (
        f"the token endpoint issued a token of type {shown}, not Bearer; this tool sends only "
        "bearer tokens (RFC 6750), so it was not used and no request was sent with it; ask "
        "the platform for Bearer tokens for this client"
    )


def test_a_token_type_from_a_server_is_escaped_bounded_and_never_starts_a_secret() -> None:
    payload = {"access_token": "tok-123456789", "token_type": "\x1b]0;x\x07" + "A" * 500}
    said = str(fails(TokenRefused, token_from_payload, payload, payload, 0, IssuedTokens()))
    assert "\x1b" not in said and "A" * 41 not in said
    # Cut short, it never shows the start of a secret it splits.
    register_secret_forms(SPLIT_SECRET)
    payload = {"access_token": "eyJ.a-token", "token_type": "x" * 20 + SPLIT_SECRET}
    said = str(fails(TokenRefused, token_from_payload, payload, None, 0, IssuedTokens()))
    assert "cs_live" not in said


def test_only_the_current_and_the_previous_token_stay_redacted() -> None:
    issued = IssuedTokens()
    tokens = [f"eyJtoken-{n:04d}-abcdef" for n in range(50)]
    for token in tokens:
        issued.add(token)
    assert redact(" ".join(tokens[-2:])) == f"{REDACTED} {REDACTED}"
    # Dropped from the list (their requests are long answered): the list stays short.
    assert tokens[0] in redact(tokens[0])
    assert sum(t.startswith("eyJtoken-") for t in safetext._REDACTOR._secrets) <= 2 * 3
    # A dropped token that is also a registered secret stays redacted.
    register_secret("same-as-the-secret-42")
    for token in ("same-as-the-secret-42", "eyJsecond-0001", "eyJthird-00002"):
        issued.add(token)
    assert redact("same-as-the-secret-42") == REDACTED


def test_client_secret_basic_percent_encodes_id_and_secret_before_base64() -> None:
    # RFC 6749 §2.3.1: each part encoded, then "id:secret" in Base64. A space as %20, which
    # unquote_plus (strict) and unquote (lenient: Authlib) both read as a space; "+" only
    # the strict ones do.
    request = requests.Request("POST", "https://api.example/oauth/token").prepare()
    ClientBasicAuth("ci client:1", "s3cr et/42+x&é")(request)
    kind, encoded = request.headers["Authorization"].split(" ")
    assert kind == "Basic"
    pair = base64.b64decode(encoded).decode()
    assert pair == "ci%20client%3A1:s3cr%20et%2F42%2Bx%26%C3%A9"
    user, _, password = pair.partition(":")
    for decode in (unquote, unquote_plus):
        assert (decode(user), decode(password)) == ("ci client:1", "s3cr et/42+x&é")
    assert redact(f"you sent Basic {encoded}") == f"you sent Basic {REDACTED}"
    assert repr(ClientBasicAuth("a", "b")) == "<client credentials hidden>"


@pytest.mark.parametrize(
    ("body", "shown"),
    [
        ({"error": "invalid_scope"}, "invalid_scope"),
        ({"error": "invalid_client", "error_description": "Client authentication failed."},
         "invalid_client (Client authentication failed.)"),
        ({"error": "x\x1b[31m", "error_description": "d" * 1000},
         "x\\x1b[31m (" + "d" * 300 + "…)"),
        ({"error": {"code": 1}}, None), ({"message": "an envelope"}, None), (None, None),
    ],
)  # fmt: skip
def test_an_rfc6749_error_body_is_read_cleaned_and_bounded(body: object, shown: str | None) -> None:
    said = OAuthError.of(body)
    assert (str(said) if said else None) == shown


@pytest.mark.parametrize(
    ("token", "why"),
    [
        ("a", "shorter than 6 characters"), ("ab12", "shorter than 6 characters"),
        ("x-y-z", "shorter than 6 characters"),
        # A hostile token server's 3 MB token would be searched for in every text shown.
        ("tok" + "x" * (3 * 1024 * 1024), "longer than 64 KiB"),
    ],
    ids=["a", "ab12", "x-y-z", "3-mb"],
)  # fmt: skip
def test_a_token_too_short_or_too_long_to_keep_out_of_output_is_refused(token, why) -> None:
    payload = {"access_token": token, "expires_in": 60}
    said = str(fails(TokenRefused, token_from_payload, payload, None, now=0, issued=IssuedTokens()))
    assert why in said and "no request was sent with it" in said
    assert len(said) < 300
    shown = f"the {token[:100]} word"
    assert redact(shown) == shown  # never made a redaction


@pytest.mark.parametrize(
    "body",
    [
        {"error": "x" * 50 + SPLIT_SECRET},  # the code's cut at 80 splits the secret
        # 17 copies redact to 170 characters, leaving the 22 the cut at 600 kept of the
        # 18th within the 300 shown.
        {"error": "invalid_client", "error_description": SPLIT_SECRET * 18},
        {"error": "invalid_client", "error_description": SPLIT_SECRET.upper() * 18},
    ],
)
def test_an_error_cut_short_never_shows_the_start_of_a_secret_it_splits(body: object) -> None:
    register_secret_forms(SPLIT_SECRET)
    said = str(OAuthError.of(body))
    assert "cs_live" not in said.lower() and "secret" not in said.lower(), said


ECHOED = "s3cr3t value!+/=xyzQ"


@pytest.mark.parametrize(
    "echo",
    [
        base64.b64encode(ECHOED.encode()).decode(),  # the secret alone
        # the form body as the server got it, Base64-encoded whole: the secret at each offset
        *(
            base64.b64encode(f"{'x' * n}client_secret={quote_plus(ECHOED)}&a=b".encode()).decode()
            for n in range(3)
        ),
        base64.urlsafe_b64encode(f"id:{ECHOED}".encode()).decode(),
        quote(ECHOED),  # `/` kept, as quote() does by default
        quote(quote_plus(ECHOED), safe=""),  # the form body percent-encoded again
        quote(quote(ECHOED, safe=""), safe=""),
    ],
)
def test_a_secret_echoed_encoded_once_more_is_redacted(echo: str) -> None:
    register_secret_forms(ECHOED)
    shown = redact(f"invalid_client: {echo}")
    assert REDACTED in shown
    # What is left of the encoded secret is at most the two characters at its ends,
    # which hold bits of the bytes beside it.
    left = shown.split("[redacted]")
    assert all(len(part) < 40 for part in left), shown


SETTINGS = Settings(client_id="ci", client_secret="s3cret-value")
BASIC = SETTINGS.with_values({"token_auth_method": "client_secret_basic"})
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


GATEWAY_PAGE = "Bad Gateway (an HTML page, probably from a proxy or gateway)"


@pytest.mark.parametrize(
    ("failed", "becomes", "said"),
    [
        # No OAuth body: the token path is the thing to check.
        (NotFound("no such endpoint", status=404), AuthenticationFailed,
         "no such endpoint; check token_path ('/oauth/token') and RECONCILER_BASE_URL"),
        (ServerError(GATEWAY_PAGE, status=502), ServerError, GATEWAY_PAGE),  # keeps its class
        # The gateway, not the scope.
        (InvalidRequest("too large", status=413), AuthenticationFailed,
         "too large; a proxy or gateway in front of the token endpoint limits request "
         "bodies; ask its operators"),
    ],
    ids=["404", "server-fault", "413"],
)  # fmt: skip
def test_a_token_failure_without_an_oauth_body_names_the_request_and_what_to_check(
    failed, becomes, said
):
    error = token_failure(failed, None, SETTINGS)
    assert type(error) is becomes and error.request_id is None
    assert error.message == f"no token from {REQUEST}: {said}"
