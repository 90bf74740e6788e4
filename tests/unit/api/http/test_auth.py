"""A secret is redacted in every form the tool shows it, not only as the server got it."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from reconciler import safetext
from reconciler.api.http.auth import Token, register_secret_forms
from reconciler.output.common import show
from reconciler.safetext import REDACTED, redact, redact_strings


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
    shown = show(redact_strings({"name": f"echo {secret}"}))
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
    "form",
    [
        "s3cr et/42+x",  # as set
        "s3cr+et%2F42%2Bx",  # form-encoded, as the token request sends it
        "s3cr%20et%2F42%2Bx",  # percent-encoded, slash included, as a URL would carry it
    ],
)
def test_the_secret_in_each_encoding_a_server_may_echo_is_redacted_whole(form: str) -> None:
    register_secret_forms("s3cr et/42+x")
    assert redact(f"invalid client: {form}!") == f"invalid client: {REDACTED}!"


@pytest.mark.parametrize(
    ("secret", "echoed"),
    [
        ('Sécret"value-123', 'Sécret\\"value-123'),  # JSON, non-ASCII kept (as shown)
        ('Sécret"value-123', 'S\\u00e9cret\\"value-123'),  # JSON, ASCII only
        ("tök\\en-ab12cd34", "tök\\\\en-ab12cd34"),
    ],
)
def test_the_secret_as_json_writes_it_is_redacted_whole(secret: str, echoed: str) -> None:
    register_secret_forms(secret)
    assert redact(f'{{"message": "bad secret {echoed}"}}') == (
        f'{{"message": "bad secret {REDACTED}"}}'
    )


@pytest.mark.parametrize("token", ["a", "ab12", "x-y-z"])
def test_a_token_too_short_to_keep_out_of_output_is_refused(token: str) -> None:
    from reconciler.api.exceptions import TokenRefused
    from reconciler.api.http.auth import token_from_payload

    with pytest.raises(TokenRefused) as refused:
        token_from_payload({"access_token": token, "expires_in": 60}, None, now=0)
    said = str(refused.value)
    assert "shorter than 6 characters" in said and "no request was sent with it" in said
    assert redact(f"the {token} word") == f"the {token} word"  # never made a redaction
