"""ApiClient against a mocked platform API: tokens, addresses, errors, retries, secrets."""

from __future__ import annotations

import datetime
import email.utils
import gzip
import logging
import re
import shutil
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import parse_qs, quote_plus, urlsplit

import certifi
import pytest
import requests
from support.api_answers import (
    BASE,
    INVITE,
    INVITE_URL,
    INVITES,
    TOKEN,
    envelope,
    token_response,
)
from support.limits import FakeTime
from support.values import typed
from urllib3 import HTTPConnectionPool
from urllib3.connection import HTTPConnection
from urllib3.exceptions import MaxRetryError, NewConnectionError

from reconciler.api import capacity as rate
from reconciler.api.capacity import RequestPacer
from reconciler.api.client import ApiClient, Receipt
from reconciler.api.exceptions import (
    AnswerTooLarge,
    ApiError,
    AuthenticationFailed,
    BadInviteValue,
    Conflict,
    EnvelopeFailure,
    InvalidRequest,
    NotFound,
    NotSent,
    PermissionDenied,
    RateLimited,
    Redirected,
    ServerError,
    TransportError,
    WrongInvite,
)
from reconciler.errors import ConfigError, ReconcilerError
from reconciler.model.invite import CurrentInvite
from reconciler.settings.config import Settings
from reconciler.settings.contract import DEFAULT_SCOPE

CLIENT_ID = "reconciler-ci"
SECRET = "cs_live_Zq9xSECRETvalue"
TOKEN2 = "eyJhbGciOiJSUzI1NiJ9.tokSECONDpayload.sig2"
TOKEN_URL = BASE + "/oauth/token"
RESEND_URL = INVITE_URL + "/resend"
SECRETS = (SECRET, TOKEN, TOKEN2)


def failure(status: int, message: str, request_id: str = "7781", **extra: Any) -> dict[str, Any]:
    return {
        "status_code": status,
        "json": envelope(None, status=status, message=message, request_id=request_id),
        **extra,
    }


def ok_invite(invite: dict[str, Any] | None = None, request_id: str = "2002") -> dict[str, Any]:
    return {"status_code": 200, "json": envelope(invite or INVITE, request_id=request_id)}


@pytest.fixture
def fake_time() -> FakeTime:
    return FakeTime(1000.0)


@pytest.fixture
def make_client(fake_time: FakeTime) -> Iterator[Callable[..., ApiClient]]:
    clients: list[ApiClient] = []

    def make(**overrides: Any) -> ApiClient:
        values: dict[str, Any] = {
            "base_url": BASE,
            "client_id": CLIENT_ID,
            "client_secret": SECRET,
            **overrides,
        }
        settings = Settings().with_values(values)
        client = ApiClient(settings, clock=fake_time.clock, sleep=fake_time.sleep)
        clients.append(client)
        return client

    yield make
    for client in clients:
        client.close()


@pytest.fixture
def client(make_client: Callable[..., ApiClient]) -> ApiClient:
    return make_client()


@pytest.fixture
def token_endpoint(requests_mock: Any) -> Any:
    return requests_mock.post(TOKEN_URL, [token_response()])


@pytest.fixture
def debug_log(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    caplog.set_level(logging.DEBUG, logger="reconciler")
    return caplog


@pytest.fixture
def half_jitter(monkeypatch: pytest.MonkeyPatch) -> None:
    """Retry pauses without their randomness: the jitter is always 0.5."""
    monkeypatch.setattr("random.random", lambda: 0.5)


def api_calls(requests_mock: Any) -> list[Any]:
    return [r for r in requests_mock.request_history if r.url != TOKEN_URL]


def token_calls(requests_mock: Any) -> list[Any]:
    return [r for r in requests_mock.request_history if r.url == TOKEN_URL]


def operate(client: ApiClient, operation: str, invite_id: str = "inv_8f2k1") -> object:
    """One of the client's operations on ``invite_id``: get, update (a PATCH) or resend."""
    if operation in ("get", "GET"):
        return client.get_invite(invite_id)
    if operation in ("update", "PATCH"):
        return client.write_invite(invite_id, {"name": "X"})
    return client.resend_invite(invite_id)


def assert_no_secrets(*texts: str) -> None:
    for text in texts:
        for secret in SECRETS:
            assert secret not in text


def assert_secrets_kept(
    error: BaseException, client: ApiClient, caplog: pytest.LogCaptureFixture, mock: Any
) -> None:
    assert_no_secrets(
        str(error),
        repr(error),
        repr(client),
        repr(client.settings),
        caplog.text,
        *(record.getMessage() for record in caplog.records),
    )
    for request in mock.request_history:
        assert_no_secrets(request.url)
        assert not urlsplit(request.url).query


# -- token ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("scope", "sent"),
    [
        (None, ["kyb:invites:read", "kyb:invites:write"]),
        (
            "kyb:invites:read kyb:invites:write accounts:read",
            ["kyb:invites:read", "kyb:invites:write", "accounts:read"],
        ),
        # As a YAML block scalar or a pasted variable has it: sent one space apart.
        (" kyb:invites:read\tkyb:invites:write\n", ["kyb:invites:read", "kyb:invites:write"]),
    ],
    ids=["default-scope", "configured-scope", "laid-out-scope"],
)
def test_token_is_requested_with_client_credentials_form(
    make_client: Callable[..., ApiClient],
    requests_mock: Any,
    token_endpoint: Any,
    scope: str | None,
    sent: list[str],
) -> None:
    client = make_client() if scope is None else make_client(scope=scope)
    requests_mock.get(INVITE_URL, **ok_invite())

    client.get_invite("inv_8f2k1")

    (token_request,) = token_calls(requests_mock)
    assert token_request.method == "POST"
    assert token_request.headers["Content-Type"] == "application/x-www-form-urlencoded"
    form = parse_qs(token_request.text, strict_parsing=True)
    assert form == {
        "grant_type": ["client_credentials"],
        "client_id": [CLIENT_ID],
        "client_secret": [SECRET],
        "scope": [" ".join(sent)],
    }
    # RFC 6749 §3.3: scope names are space-delimited.
    assert form["scope"][0].split(" ") == sent
    assert scope is not None or form["scope"][0] == DEFAULT_SCOPE
    (get,) = api_calls(requests_mock)
    assert get.headers["Authorization"] == f"Bearer {TOKEN}"


def test_token_is_reused_across_calls(
    client: ApiClient, requests_mock: Any, token_endpoint: Any
) -> None:
    requests_mock.get(INVITE_URL, **ok_invite())
    requests_mock.patch(INVITE_URL, json=envelope(INVITE))

    for _ in range(5):
        client.get_invite("inv_8f2k1")
    client.write_invite("inv_8f2k1", {"name": "Acme Ltd"})

    assert len(token_calls(requests_mock)) == 1
    assert len(api_calls(requests_mock)) == 6
    assert {r.headers["Authorization"] for r in api_calls(requests_mock)} == {f"Bearer {TOKEN}"}


@pytest.mark.parametrize(
    ("expires_in", "renewed_after"),
    [
        (3600, 3540),  # a long-lived token: a minute early
        (100, 90),  # a short-lived one: when 90% of its life has gone
        # Below ten seconds (1, 1 ms, 0, negative), ten are used: not a token per
        # request (a token that truly dies sooner gets a 401, which renews it).
        (1, 9),
        (0.001, 9),
        (0, 9),
        (-5, 9),
        ("3600", 3540),  # a number sent as a string, as some servers do
        (10**400, 86340),  # a day at most, and no OverflowError
        ("9" * 400, 270),  # nonsense lifetimes count as five minutes
        (True, 270),
        (None, 270),
        (float("nan"), 270),
    ],
)
def test_when_a_token_is_renewed_depends_on_its_lifetime(
    client: ApiClient, requests_mock: Any, fake_time: FakeTime, expires_in: Any, renewed_after: int
) -> None:
    first = {"access_token": TOKEN, "token_type": "Bearer", "expires_in": expires_in}
    requests_mock.post(
        TOKEN_URL, [{"status_code": 201, "json": envelope(first)}, token_response(TOKEN2)]
    )
    requests_mock.get(INVITE_URL, **ok_invite())
    start = fake_time.now

    for moment in (0, renewed_after / 2, renewed_after - 0.5, renewed_after):
        fake_time.now = start + moment
        client.get_invite("inv_8f2k1")

    auth = [r.headers["Authorization"] for r in api_calls(requests_mock)]
    assert auth == [f"Bearer {TOKEN}"] * 3 + [f"Bearer {TOKEN2}"]
    assert len(token_calls(requests_mock)) == 2


@pytest.mark.parametrize(
    ("failing", "token_tries"),
    [
        # It may have reached the server: the token step retries it on its own.
        (requests.exceptions.ReadTimeout("slow"), 2),
        # A certificate that fails verification: nobody retries it.
        (requests.exceptions.SSLError("certificate verify failed"), 1),
    ],
    ids=["read-timeout", "tls"],
)
def test_a_resend_kept_back_by_a_failing_token_request_was_certainly_not_sent(
    make_client: Callable[..., ApiClient], requests_mock: Any, failing: Exception, token_tries: int
) -> None:
    # The token request itself failed, perhaps after reaching the server; the re-send
    # never left, and must not be reported as of unknown outcome.
    client = make_client(max_attempts=2)
    requests_mock.post(TOKEN_URL, exc=failing)
    requests_mock.post(RESEND_URL, json=envelope({"id": "inv_8f2k1"}))

    with pytest.raises(TransportError) as caught:
        client.resend_invite("inv_8f2k1")

    assert caught.value.maybe_sent is False and not caught.value.outcome_unknown
    assert caught.value.permanent is (token_tries == 1)
    assert "(while getting a token; this request was not sent)" in str(caught.value)
    assert api_calls(requests_mock) == []
    assert len(token_calls(requests_mock)) == token_tries


@pytest.mark.parametrize(
    "body",
    [
        {"access_token": TOKEN, "token_type": "Bearer", "expires_in": 3600},  # RFC 6749's
        # ... with a `data` of nothing added (as a gateway may wrap it)
        {"data": None, "access_token": TOKEN, "token_type": "Bearer", "expires_in": 3600},
    ],
    ids=["bare", "empty-data"],
)
def test_a_bare_rfc6749_token_body_is_accepted(
    client: ApiClient, requests_mock: Any, body: dict[str, Any]
) -> None:
    requests_mock.post(TOKEN_URL, status_code=200, json=body)
    requests_mock.get(INVITE_URL, **ok_invite())

    client.get_invite("inv_8f2k1")

    assert api_calls(requests_mock)[0].headers["Authorization"] == f"Bearer {TOKEN}"


@pytest.mark.parametrize(
    "answer",
    [
        {"json": envelope({"token_type": "Bearer"})},
        {"text": "<html><body>Sign in</body></html>", "reason": "OK"},
    ],
    ids=["no-token", "html"],
)
def test_a_token_answer_without_a_token_says_so(
    client: ApiClient, requests_mock: Any, answer: dict[str, Any]
) -> None:
    requests_mock.post(TOKEN_URL, status_code=200, **answer)

    with pytest.raises(AuthenticationFailed) as caught:
        client.get_invite("inv_8f2k1")

    assert str(caught.value) == "the token endpoint's answer has no access_token"
    assert api_calls(requests_mock) == []


def test_api_401_renews_the_token_once_and_retries_once_with_its_time_limits_and_trust(
    make_client: Callable[..., ApiClient],
    requests_mock: Any,
    tmp_path: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    shutil.copy(certifi.where(), tmp_path / "private-ca.pem")
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(tmp_path / "private-ca.pem"))
    client = make_client(timeout=7)
    requests_mock.post(TOKEN_URL, [token_response(TOKEN), token_response(TOKEN2)])
    requests_mock.get(INVITE_URL, [failure(401, "token expired"), ok_invite()])

    invite = client.get_invite("inv_8f2k1")

    assert invite.fields["name"] == "Acme Holdings Ltd"
    assert len(token_calls(requests_mock)) == 2
    first, again = api_calls(requests_mock)
    assert first.headers["Authorization"] == f"Bearer {TOKEN}"
    assert again.headers["Authorization"] == f"Bearer {TOKEN2}"
    assert (again.timeout, again.verify) == (first.timeout, first.verify)
    assert first.timeout[1] == 7 and first.verify == str(tmp_path / "private-ca.pem")


def test_second_401_fails_with_authentication_failed(
    client: ApiClient, requests_mock: Any, debug_log: pytest.LogCaptureFixture
) -> None:
    requests_mock.post(TOKEN_URL, [token_response(TOKEN), token_response(TOKEN2)])
    requests_mock.get(INVITE_URL, **failure(401, "token revoked", request_id="555"))

    with pytest.raises(AuthenticationFailed) as caught:
        client.get_invite("inv_8f2k1")

    assert len(token_calls(requests_mock)) == 2
    assert len(api_calls(requests_mock)) == 2
    text = str(caught.value)
    assert "401" in text and "token revoked" in text and "555" in text
    assert_secrets_kept(caught.value, client, debug_log, requests_mock)


def test_token_endpoint_401_names_client_id_and_env_vars_but_not_secret(
    client: ApiClient, requests_mock: Any, debug_log: pytest.LogCaptureFixture
) -> None:
    requests_mock.post(TOKEN_URL, **failure(401, "invalid client credentials", "99"))
    get = requests_mock.get(INVITE_URL, **ok_invite())

    with pytest.raises(AuthenticationFailed) as caught:
        client.get_invite("inv_8f2k1")

    text = str(caught.value)
    assert CLIENT_ID in text
    assert "RECONCILER_CLIENT_ID" in text and "RECONCILER_CLIENT_SECRET" in text
    assert "401" in text and "invalid client credentials" in text and "99" in text
    assert len(token_calls(requests_mock)) == 1  # bad credentials are not retried
    assert not get.called
    assert_secrets_kept(caught.value, client, debug_log, requests_mock)


# -- addresses and payloads -------------------------------------------------------


@pytest.mark.parametrize("status", ["pending", "accepted"])
def test_get_invite_returns_canonical_fields_and_status(
    client: ApiClient, requests_mock: Any, token_endpoint: Any, status: str
) -> None:
    requests_mock.get(INVITE_URL, **ok_invite({**INVITE, "status": status}))

    invite = client.get_invite("inv_8f2k1")

    assert isinstance(invite, CurrentInvite)
    assert invite.id == "inv_8f2k1"
    assert invite.status == status and invite.is_pending is (status == "pending")
    expected = {k: v for k, v in INVITE.items() if k not in ("id", "status", "createdAt")}
    assert invite.fields == expected  # server-managed fields are ignored
    (request,) = api_calls(requests_mock)
    assert request.method == "GET"
    assert request.url == INVITE_URL


def test_a_value_the_invite_cannot_hold_leaves_that_invite_alone_naming_the_field(
    client: ApiClient, requests_mock: Any, token_endpoint: Any
) -> None:
    requests_mock.get(INVITE_URL, **ok_invite({**INVITE, "groups": ["emea", 7]}))

    with pytest.raises(BadInviteValue) as refused:
        client.get_invite("inv_8f2k1")

    assert refused.value.status == 200
    assert refused.value.message == (
        "invite inv_8f2k1: the server's `groups` item 1 is a number (7), not a string; "
        "this invite is left alone"
    )


@pytest.mark.parametrize(
    ("header", "kept"),
    [
        ('"v7"', '"v7"'),
        ('W/"v7"', None),  # If-Match compares strongly: a weak tag is always refused (412)
        ('"' + "a" * 10_000 + '"', None),
        ("v7", None),  # not quoted: not an entity tag
        ('"v7", "v8"', None),
    ],
    ids=["strong", "weak", "10-kb", "unquoted", "a-list"],
)
def test_only_a_strong_etag_is_kept_for_if_match(
    client: ApiClient, requests_mock: Any, token_endpoint: Any, header: str, kept: str | None
) -> None:
    requests_mock.get(INVITE_URL, **ok_invite(), headers={"ETag": header})

    assert client.read_invite("inv_8f2k1").etag == kept


def test_update_sends_exactly_the_patch_and_returns_receipt(
    client: ApiClient, requests_mock: Any, token_endpoint: Any
) -> None:
    requests_mock.patch(INVITE_URL, json=envelope(INVITE, request_id="31337"))
    patch = {"email": "new@acme.example", "groups": ["emea"], "primaryContact": {"name": "J"}}

    receipt = client.write_invite("inv_8f2k1", typed(patch))

    assert (receipt.status, receipt.request_id) == (200, "31337")
    (request,) = api_calls(requests_mock)
    assert request.method == "PATCH"
    assert request.url == INVITE_URL
    assert request.headers["Content-Type"] == "application/json"
    assert request.json() == patch


def test_a_write_read_with_an_etag_carries_it_as_if_match(
    client: ApiClient, requests_mock: Any, token_endpoint: Any
) -> None:
    requests_mock.patch(INVITE_URL, json=envelope(INVITE, request_id="31338"))

    client.write_invite("inv_8f2k1", {"email": "new@acme.example"}, if_match='"v7"')
    client.write_invite("inv_8f2k1", {"email": "new@acme.example"})

    first, second = api_calls(requests_mock)
    assert first.headers["If-Match"] == '"v7"'
    assert "If-Match" not in second.headers


def test_resend_posts_to_resend_path_and_returns_receipt(
    client: ApiClient, requests_mock: Any, token_endpoint: Any
) -> None:
    requests_mock.post(RESEND_URL, json=envelope(None, request_id="4242"))

    receipt = client.resend_invite("inv_8f2k1")

    assert receipt.status == 200
    assert receipt.request_id == "4242"
    (request,) = api_calls(requests_mock)
    assert request.method == "POST"
    assert request.url == RESEND_URL
    assert request.json() == {}


@pytest.mark.parametrize(
    ("data", "unknown"),
    [
        ({"id": "inv_2", "status": "pending"}, True),
        ({"id": "inv_8f2k1", "status": "pending"}, False),
        ({"status": "pending"}, False),  # no id: nothing said about another invite
        ([], False),
    ],
    ids=["another-invite", "this-invite", "no-id", "not-an-object"],
)
def test_a_resend_answered_about_another_invite_is_unknown_and_never_sent_again(
    client: ApiClient, requests_mock: Any, token_endpoint: Any, data: Any, unknown: bool
) -> None:
    # Issue 51, row 8: an answer about inv_2 was printed `re-sent inv_8f2k1`.
    requests_mock.post(RESEND_URL, [{"json": envelope(data)}, {"json": envelope(None)}])

    if not unknown:
        assert client.resend_invite("inv_8f2k1").status == 200
        return
    with pytest.raises(WrongInvite) as raised:
        client.resend_invite("inv_8f2k1")

    assert raised.value.outcome_unknown and not raised.value.refused_before_acting
    assert raised.value.message == (
        "invite inv_8f2k1: the answer to its re-send is about inv_2; which invitation went "
        "out is unknown"
    )
    assert len(api_calls(requests_mock)) == 1


def test_custom_path_templates_and_base_url_prefix(
    make_client: Callable[..., ApiClient], requests_mock: Any
) -> None:
    base = "https://gw.example.test/platform/"
    client = make_client(
        base_url=base,
        token_path="/auth/v2/token",
        get_invite_path="/kyb/v2/invites/{inviteId}/details",
        update_invite_path="/kyb/v2/invites/{inviteId}",
        resend_invite_path="/kyb/v2/invites/{inviteId}/actions/resend",
    )
    prefix = "https://gw.example.test/platform"
    requests_mock.post(prefix + "/auth/v2/token", [token_response()])
    requests_mock.get(
        prefix + "/kyb/v2/invites/inv_1/details", **ok_invite({**INVITE, "id": "inv_1"})
    )
    requests_mock.patch(prefix + "/kyb/v2/invites/inv_1", json=envelope({**INVITE, "id": "inv_1"}))
    requests_mock.post(prefix + "/kyb/v2/invites/inv_1/actions/resend", json=envelope(None))

    client.get_invite("inv_1")
    client.write_invite("inv_1", {"name": "X"})
    client.resend_invite("inv_1")

    assert [(r.method, r.url) for r in requests_mock.request_history] == [
        ("POST", prefix + "/auth/v2/token"),
        ("GET", prefix + "/kyb/v2/invites/inv_1/details"),
        ("PATCH", prefix + "/kyb/v2/invites/inv_1"),
        ("POST", prefix + "/kyb/v2/invites/inv_1/actions/resend"),
    ]


@pytest.mark.parametrize(
    ("invite_id", "in_path"),
    [
        ("inv_8f2k1", "inv_8f2k1"),
        ("Inv.v2-A_b", "Inv.v2-A_b"),
        ("a/b", "a%2Fb"),
        ("a b", "a%20b"),
        ("a?b#c", "a%3Fb%23c"),
        ("x%41", "x%2541"),
        ("ü", "%C3%BC"),
    ],
)
def test_invite_id_is_percent_encoded_in_path(
    client: ApiClient, requests_mock: Any, token_endpoint: Any, invite_id: str, in_path: str
) -> None:
    answer = envelope({**INVITE, "id": invite_id})
    requests_mock.get(re.compile(r"/public-api/v1/kyb/invites/"), json=answer)
    requests_mock.patch(re.compile(r"/public-api/v1/kyb/invites/"), json=answer)
    requests_mock.post(re.compile(r"/resend$"), json=envelope(None))

    client.get_invite(invite_id)
    client.write_invite(invite_id, {"name": "X"})
    client.resend_invite(invite_id)

    assert [r.url for r in api_calls(requests_mock)] == [
        INVITES + in_path,
        INVITES + in_path,
        INVITES + in_path + "/resend",
    ]


@pytest.mark.parametrize("invite_id", [".", ".."])
@pytest.mark.parametrize("operation", ["get", "update", "resend"])
def test_dot_segment_invite_id_never_addresses_another_resource(
    client: ApiClient, requests_mock: Any, token_endpoint: Any, invite_id: str, operation: str
) -> None:
    # "." and ".." match the contract's inviteId alphabet, but in a URL path they are
    # dot segments: sent as is, GET /invites/.. becomes GET /public-api/v1/kyb/.
    requests_mock.register_uri("GET", re.compile("."), json={})
    requests_mock.register_uri("PATCH", re.compile("."), json={})
    requests_mock.register_uri("POST", re.compile("/kyb/"), json={})
    try:
        operate(client, operation, invite_id)
    except (ApiError, ReconcilerError):
        refused = True  # refusing an id that no URL can address is fine
    else:
        refused = False

    sent = api_calls(requests_mock)
    assert refused or sent
    shape = r"/public-api/v1/kyb/invites/([^/]+)" + ("/resend" if operation == "resend" else "")
    for request in sent:
        path = urlsplit(request.url).path
        match = re.fullmatch(shape, path)
        assert match, f"{request.method} {path} is not the invite's own address"
        assert match.group(1) not in (".", "..")


def test_renamed_wire_fields_in_both_directions(
    make_client: Callable[..., ApiClient], requests_mock: Any, token_endpoint: Any
) -> None:
    client = make_client(field_names={"phone": "phoneNumber", "addOns": "add_ons"})
    wire = {k: v for k, v in INVITE.items() if k not in ("phone", "addOns")}
    wire.update({"phoneNumber": "+15550100", "add_ons": ["kyc"], "phone": "not-this-one"})
    requests_mock.get(INVITE_URL, **ok_invite(wire))
    requests_mock.patch(INVITE_URL, json=envelope(wire))

    invite = client.get_invite("inv_8f2k1")
    client.write_invite("inv_8f2k1", typed({"phone": "+15550199", "addOns": ["edd"], "name": "N"}))

    assert invite.fields["phone"] == "+15550100"
    assert invite.fields["addOns"] == ["kyc"]
    assert "phoneNumber" not in invite.fields and "add_ons" not in invite.fields
    patch = api_calls(requests_mock)[1]
    assert patch.json() == {"phoneNumber": "+15550199", "add_ons": ["edd"], "name": "N"}


# -- errors -------------------------------------------------------------------------

STATUS_ERRORS = [
    (400, InvalidRequest),
    (401, AuthenticationFailed),
    (403, PermissionDenied),
    (404, NotFound),
    (409, Conflict),
    (429, RateLimited),
    (500, ServerError),
    (502, ServerError),
    (503, ServerError),
    (504, ServerError),
]


@pytest.mark.parametrize(("status", "error_class"), STATUS_ERRORS)
def test_status_maps_to_error_with_status_message_and_request_id(
    make_client: Callable[..., ApiClient],
    requests_mock: Any,
    status: int,
    error_class: type[ApiError],
    debug_log: pytest.LogCaptureFixture,
) -> None:
    client = make_client(max_attempts=1)
    requests_mock.post(TOKEN_URL, [token_response(TOKEN), token_response(TOKEN2)])
    message = f"the server says no ({status})"
    requests_mock.patch(INVITE_URL, **failure(status, message, request_id="8675309"))

    with pytest.raises(error_class) as caught:
        client.write_invite("inv_8f2k1", {"email": "x@acme.example"})

    error = caught.value
    assert error.status == status
    assert error.request_id == "8675309"
    text = str(error)
    assert str(status) in text
    assert message in text
    assert "8675309" in text
    assert_secrets_kept(error, client, debug_log, requests_mock)


INSUFFICIENT_SCOPE = {
    "status_code": 403,
    "json": {"error": "insufficient_scope", "error_description": "needs more"},
}


@pytest.mark.parametrize("granted", [None, "kyb:invites:read"])
def test_a_403_naming_a_scope_never_asked_for_says_this_command_needs_it(
    make_client: Callable[..., ApiClient], requests_mock: Any, granted: str | None
) -> None:
    # Asked for read only, granted it (named, or as asked): the platform's refusal names
    # the scope the write needs, so that scope is what to add, not "no scope is missing".
    answer = token_response()
    if granted is not None:
        answer["json"]["data"]["scope"] = granted
    requests_mock.post(TOKEN_URL, [answer])
    client = make_client(scope="kyb:invites:read")
    requests_mock.patch(INVITE_URL, **failure(403, "token lacks scope kyb:invites:write"))

    with pytest.raises(PermissionDenied) as caught:
        client.write_invite("inv_8f2k1", {"name": "X"})

    text = str(caught.value)
    assert text.startswith(
        "HTTP 403: token lacks scope kyb:invites:write; this command needs scope "
        "'kyb:invites:write', which the platform names and the client did not ask for: only "
        "'kyb:invites:read' was requested (set with RECONCILER_SCOPE); add that scope to it"
    )
    assert "no scope is missing" not in text and "another reason" not in text


@pytest.mark.parametrize(
    ("granted", "refusal", "blames_the_scope"),
    [
        (None, failure(403, "not allowed for this invite"), False),
        ("kyb:invites:write", failure(403, "not allowed for this invite"), False),
        ("kyb:invites:read", failure(403, "not allowed for this invite"), True),
        # The resource server says the token lacks a scope (RFC 6750): the scope is the
        # thing to look at, whatever the token answer said.
        ("kyb:invites:write", INSUFFICIENT_SCOPE, True),
    ],
    ids=["no scope named", "granted as asked", "granted less", "insufficient_scope"],
)
def test_a_403_names_the_scope_and_blames_it_only_when_the_token_may_lack_it(
    make_client: Callable[..., ApiClient],
    requests_mock: Any,
    granted: str | None,
    refusal: dict[str, Any],
    blames_the_scope: bool,
) -> None:
    # A token granted every scope asked for, refused all the same: the platform refused
    # for another reason, and changing RECONCILER_SCOPE would not help. A token answer
    # that names no scope granted what was asked (RFC 6749 5.1): no scope is blamed for
    # what, as far as the client can tell, it was granted (issue 55), and the note
    # points at the client's permissions on the platform.
    answer = token_response()
    if granted is not None:
        answer["json"]["data"]["scope"] = granted
    requests_mock.post(TOKEN_URL, [answer])
    client = make_client(scope="kyb:invites:write")
    requests_mock.patch(INVITE_URL, **refusal)

    with pytest.raises(PermissionDenied) as caught:
        client.write_invite("inv_8f2k1", {"name": "X"})

    text = str(caught.value)
    if refusal is INSUFFICIENT_SCOPE:
        assert caught.value.bearer_error == "insufficient_scope"
    else:
        assert "not allowed for this invite" in text
        assert "'kyb:invites:write'" in text and "RECONCILER_SCOPE" in text
    assert ("does not carry the scope this needs" in text) is blames_the_scope
    if not blames_the_scope and granted is not None:
        assert (
            "; the token was granted every scope asked for ('kyb:invites:write' (so the token "
            "answer said), asked for with RECONCILER_SCOPE): the platform refused this for "
            "another reason (what the client may do there, or this invite)" in text
        )
    if not blames_the_scope:
        assert "permissions on the platform" in text


MALFORMED_BODIES: dict[str, dict[str, Any]] = {
    "empty": {"content": b""},
    "html": {
        "text": "<html><body><h1>502 Bad Gateway</h1>" + "x" * 5000 + "</body></html>",
        "headers": {"Content-Type": "text/html; charset=utf-8"},
    },
    "plain text": {"text": "upstream connect error", "headers": {"Content-Type": "text/plain"}},
    "truncated json": {
        "text": '{"status": 500, "success": false, "mess',
        "headers": {"Content-Type": "application/json"},
    },
    "json list": {"json": ["not", "an", "envelope"]},
    "json without message": {"json": {"error": "boom", "metadata": "n/a"}},
    "json with non-text message": {"json": {"message": {"nested": True}, "data": None}},
    "binary": {"content": b"\xff\xfe\x00garbage\x81", "headers": {"Content-Type": "text/plain"}},
}


@pytest.mark.parametrize("status", [400, 404, 500, 502, 503])
@pytest.mark.parametrize("body", list(MALFORMED_BODIES))
def test_malformed_failure_body_still_gives_clear_api_error(
    make_client: Callable[..., ApiClient],
    requests_mock: Any,
    token_endpoint: Any,
    body: str,
    status: int,
) -> None:
    client = make_client(max_attempts=1)
    requests_mock.get(INVITE_URL, status_code=status, **MALFORMED_BODIES[body])

    with pytest.raises(ApiError) as caught:
        client.get_invite("inv_8f2k1")

    error = caught.value
    assert error.status == status
    expected = dict(STATUS_ERRORS)[status]
    assert isinstance(error, expected)
    text = str(error)
    assert f"HTTP {status}" in text
    assert error.message.strip()  # something is said about what came back
    assert "Traceback" not in text
    if body == "html":  # described, not dumped
        assert "HTML" in text and "<html>" not in text


@pytest.mark.parametrize(
    "response",
    [
        {"text": "<html>maintenance</html>", "headers": {"Content-Type": "text/html"}},
        {"content": b""},
        {"json": {"data": "not an invite"}},
        {"json": ["a", "list"]},
    ],
)
def test_unusable_success_body_on_get_is_an_api_error(
    client: ApiClient, requests_mock: Any, token_endpoint: Any, response: dict[str, Any]
) -> None:
    requests_mock.get(INVITE_URL, status_code=200, **response)

    with pytest.raises(ApiError) as caught:
        client.get_invite("inv_8f2k1")

    assert "inv_8f2k1" in str(caught.value)


# -- retries ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "failures",
    [
        [failure(503, "busy"), failure(500, "oops"), failure(502, "gw"), failure(504, "timeout")],
        [{"exc": requests.exceptions.ConnectionError}] * 2,
        [{"exc": requests.exceptions.ConnectTimeout}] * 2,
        [{"exc": requests.exceptions.ReadTimeout}] * 2,
    ],
    ids=["5xx", "connection-error", "connect-timeout", "read-timeout"],
)
@pytest.mark.parametrize("method", ["GET", "PATCH"])
def test_get_and_patch_are_retried_with_the_same_body_until_they_succeed(
    client: ApiClient,
    requests_mock: Any,
    token_endpoint: Any,
    fake_time: FakeTime,
    failures: list[dict[str, Any]],
    method: str,
) -> None:
    requests_mock.register_uri(method, INVITE_URL, [*failures, ok_invite()])

    operate(client, method)

    calls = api_calls(requests_mock)
    assert len(calls) == len(failures) + 1
    assert len(fake_time.sleeps) >= len(failures)  # it waited between attempts, not really
    if method == "PATCH":
        assert [r.json() for r in calls] == [{"name": "X"}] * len(calls)


def _timed(fake_time: FakeTime, sent_at: list[float], status: int) -> dict[str, Any]:
    """A response that records the (fake) time its request was sent."""

    def respond(request: Any, context: Any) -> Any:
        sent_at.append(fake_time.now)
        if status == 200:
            return envelope(INVITE)
        return envelope(None, status=status, message="try later")

    return {"status_code": status, "json": respond}


@pytest.mark.parametrize(("status", "asked"), [(429, 3.0), (503, 7.0)])
def test_a_retry_waits_as_long_as_retry_after_asks(
    client: ApiClient,
    requests_mock: Any,
    token_endpoint: Any,
    fake_time: FakeTime,
    status: int,
    asked: float,
) -> None:
    sent_at: list[float] = []
    refused = {**_timed(fake_time, sent_at, status), "headers": {"Retry-After": f"{asked:g}"}}
    requests_mock.get(INVITE_URL, [refused, _timed(fake_time, sent_at, 200)])

    assert client.get_invite("inv_8f2k1").is_pending

    assert len(sent_at) == 2
    assert sent_at[1] - sent_at[0] >= asked
    if status == 503:  # no rate signal: the pause is the server's alone
        assert sent_at[1] - sent_at[0] == pytest.approx(asked)


@pytest.mark.parametrize(
    ("answer", "said"),
    [
        (failure(503, "down for maintenance", request_id="61"), ["503", "down for maint", "61"]),
        ({"exc": requests.exceptions.ReadTimeout}, []),
    ],
    ids=["503", "read-timeout"],
)
def test_retries_stop_at_max_attempts(
    make_client: Callable[..., ApiClient],
    requests_mock: Any,
    token_endpoint: Any,
    answer: dict[str, Any],
    said: list[str],
) -> None:
    client = make_client(max_attempts=3)
    requests_mock.get(INVITE_URL, **answer)

    with pytest.raises((ServerError, TransportError)) as caught:
        client.get_invite("inv_8f2k1")

    assert len(api_calls(requests_mock)) == 3
    text = str(caught.value)
    assert "gave up after 3 attempts" in text
    assert all(part in text for part in said)


def test_retries_stop_at_retry_max_seconds(
    make_client: Callable[..., ApiClient],
    requests_mock: Any,
    token_endpoint: Any,
    fake_time: FakeTime,
) -> None:
    client = make_client(max_attempts=10, retry_max_seconds=25)
    requests_mock.get(INVITE_URL, **failure(503, "busy", headers={"Retry-After": "10"}))
    start = fake_time.now

    with pytest.raises(ServerError) as caught:
        client.get_invite("inv_8f2k1")

    # Attempts at 0 s, 10 s and 20 s; a fourth at 30 s would pass the 25 s budget.
    assert len(api_calls(requests_mock)) == 3
    assert fake_time.now - start <= 25
    assert "gave up after 3 attempts" in str(caught.value)


@pytest.mark.parametrize("status", [400, 403, 404, 409])
@pytest.mark.parametrize("method", ["GET", "PATCH"])
def test_client_errors_are_never_retried(
    client: ApiClient, requests_mock: Any, token_endpoint: Any, status: int, method: str
) -> None:
    requests_mock.register_uri(method, INVITE_URL, **failure(status, "no"))

    with pytest.raises(ApiError) as caught:
        operate(client, method)

    assert caught.value.status == status
    assert len(api_calls(requests_mock)) == 1
    assert "gave up" not in str(caught.value)


@pytest.mark.parametrize(
    "response",
    [
        failure(500, "internal"),
        failure(502, "bad gateway"),
        failure(504, "gateway timeout"),
        {"exc": requests.exceptions.ReadTimeout},
        {"exc": requests.exceptions.ConnectionError("Connection aborted: reset by peer")},
    ],
    ids=["500", "502", "504", "read-timeout", "connection-reset"],
)
def test_resend_is_not_retried_once_the_server_may_have_it(
    client: ApiClient, requests_mock: Any, token_endpoint: Any, response: dict[str, Any]
) -> None:
    requests_mock.post(RESEND_URL, [response, {"json": envelope(None)}])

    with pytest.raises(ApiError):
        client.resend_invite("inv_8f2k1")

    assert len(api_calls(requests_mock)) == 1


@pytest.mark.parametrize(
    "refusal",
    [
        failure(429, "rate limit exceeded"),
        failure(503, "unavailable"),
        {"status_code": 503, "text": "<html>503 Service Unavailable</html>"},
        {"status_code": 429, "text": "<html>429 Too Many Requests</html>"},
        {"exc": requests.exceptions.ConnectTimeout},  # the connection never opened
    ],
    ids=["429", "503", "503-html", "429-html", "connect-timeout"],
)
def test_a_resend_refused_before_it_was_acted_on_is_sent_again(
    client: ApiClient, requests_mock: Any, token_endpoint: Any, refusal: dict[str, Any]
) -> None:
    # A 429 or a 503, any body: a gateway or the platform refused it; nothing was sent.
    requests_mock.post(RESEND_URL, [refusal, {"json": envelope(None, request_id="78")}])

    receipt = client.resend_invite("inv_8f2k1")

    assert receipt == Receipt(200, "78")
    assert len(api_calls(requests_mock)) == 2


def test_halted_client_does_not_retry(
    client: ApiClient, requests_mock: Any, token_endpoint: Any
) -> None:
    requests_mock.get(INVITE_URL, [failure(503, "busy"), ok_invite()])
    client.stop.set("interrupted")

    with pytest.raises(ServerError):
        client.get_invite("inv_8f2k1")

    assert len(api_calls(requests_mock)) == 1


# -- https ------------------------------------------------------------------------


def test_api_client_refuses_plain_http_before_sending_anything(requests_mock: Any) -> None:
    settings = Settings(
        base_url="http://api.example.com", client_id=CLIENT_ID, client_secret=SECRET
    )

    with pytest.raises(ConfigError) as caught:
        ApiClient(settings)

    assert "https://" in str(caught.value)
    assert SECRET not in str(caught.value)
    assert not requests_mock.request_history


def test_loopback_http_client_talks_to_the_sandbox_address(
    make_client: Callable[..., ApiClient], requests_mock: Any
) -> None:
    client = make_client(base_url="http://127.0.0.1:8765")
    requests_mock.post("http://127.0.0.1:8765/oauth/token", [token_response()])
    requests_mock.get("http://127.0.0.1:8765/public-api/v1/kyb/invites/inv_8f2k1", **ok_invite())

    assert client.get_invite("inv_8f2k1").is_pending


def test_missing_credentials_name_the_env_vars() -> None:
    with pytest.raises(ConfigError) as caught:
        ApiClient(Settings(base_url=BASE, client_id=CLIENT_ID))

    assert "RECONCILER_CLIENT_SECRET" in str(caught.value)


# -- secrets ------------------------------------------------------------------------


def _set_up(requests_mock: Any, token: Any, api: Any) -> None:
    requests_mock.post(TOKEN_URL, token if isinstance(token, list) else [token])
    responses = api if isinstance(api, list) else [api]
    requests_mock.get(INVITE_URL, responses)
    requests_mock.patch(INVITE_URL, responses)
    requests_mock.post(RESEND_URL, responses)


TOKENS = [token_response(TOKEN), token_response(TOKEN2)]
SECRET_SCENARIOS: dict[str, tuple[Any, Any]] = {
    "token-401": (failure(401, "invalid_client"), ok_invite()),
    "token-400": (failure(400, "invalid_request"), ok_invite()),
    "token-500": (failure(500, "token service down"), ok_invite()),
    "token-html": ({"status_code": 200, "text": "<html>login</html>"}, ok_invite()),
    "token-connection-error": (
        {"exc": requests.exceptions.ConnectionError("Max retries exceeded")},
        ok_invite(),
    ),
    "api-401-twice": (TOKENS, failure(401, "token revoked")),
    "api-403": (TOKENS, failure(403, "insufficient scope")),
    "api-404": (TOKENS, failure(404, "no such invite")),
    "api-409": (TOKENS, failure(409, "invite accepted")),
    "api-400": (TOKENS, failure(400, "bad email")),
    "api-429": (TOKENS, failure(429, "slow down", headers={"Retry-After": "1"})),
    "api-503": (TOKENS, failure(503, "unavailable")),
    "api-html": (TOKENS, {"status_code": 502, "text": "<html>bad gateway</html>"}),
    "api-truncated": (TOKENS, {"status_code": 500, "text": '{"message": "x'}),
    "api-read-timeout": (TOKENS, {"exc": requests.exceptions.ReadTimeout}),
    "api-connect-timeout": (TOKENS, {"exc": requests.exceptions.ConnectTimeout}),
}


@pytest.mark.parametrize("operation", ["get", "update", "resend"])
@pytest.mark.parametrize("scenario", list(SECRET_SCENARIOS))
def test_failures_never_reveal_secret_or_token(
    make_client: Callable[..., ApiClient],
    requests_mock: Any,
    debug_log: pytest.LogCaptureFixture,
    scenario: str,
    operation: str,
) -> None:
    client = make_client(max_attempts=2)
    token, api = SECRET_SCENARIOS[scenario]
    _set_up(requests_mock, token, api)

    with pytest.raises(ApiError) as caught:
        operate(client, operation)

    assert debug_log.records  # logging was on, so the check below can fail
    assert_secrets_kept(caught.value, client, debug_log, requests_mock)


def test_successful_run_with_debug_logging_never_logs_secret_or_token(
    client: ApiClient, requests_mock: Any, debug_log: pytest.LogCaptureFixture
) -> None:
    requests_mock.post(TOKEN_URL, TOKENS)
    requests_mock.get(INVITE_URL, [failure(401, "expired"), failure(503, "busy"), ok_invite()])
    requests_mock.patch(INVITE_URL, json=envelope(INVITE))
    requests_mock.post(RESEND_URL, json=envelope(None))

    client.get_invite("inv_8f2k1")
    client.write_invite("inv_8f2k1", {"email": "a@b.example"})
    client.resend_invite("inv_8f2k1")

    assert any("token" in r.getMessage() for r in debug_log.records)
    assert_no_secrets(debug_log.text, repr(client), repr(client.settings))
    for request in requests_mock.request_history:
        assert_no_secrets(request.url)
    # The secret travels only in the token request's form body, never to the API.
    for request in api_calls(requests_mock):
        assert SECRET not in (request.text or "")
        assert SECRET not in str(request.headers)


def test_the_servers_per_field_problems_are_part_of_the_error(
    requests_mock: Any, token_endpoint: Any, client: ApiClient
) -> None:
    body = envelope({"phoneNumber": "unknown field"}, status=400, message="invalid invite update")
    requests_mock.patch(INVITE_URL, status_code=400, json=body)
    with pytest.raises(InvalidRequest) as info:
        client.write_invite("inv_8f2k1", {"phone": "+442079460000"})
    assert "invalid invite update [phoneNumber: unknown field]" in str(info.value)


def test_a_refused_connection_says_what_to_check(
    requests_mock: Any, make_client: Callable[..., ApiClient]
) -> None:
    # What requests raises: its ConnectionError around urllib3's, around the OS's.
    cause = NewConnectionError(HTTPConnection("127.0.0.1"), "Failed to establish a new connection")
    cause.__cause__ = ConnectionRefusedError(111, "Connection refused")
    refused = requests.exceptions.ConnectionError(
        MaxRetryError(HTTPConnectionPool("127.0.0.1"), TOKEN_URL, cause)
    )
    requests_mock.post(TOKEN_URL, exc=refused)
    with pytest.raises(TransportError) as info:
        make_client(max_attempts=1).get_invite("inv_8f2k1")
    message = str(info.value)
    assert "could not connect to api.example.test" in message
    assert "RECONCILER_BASE_URL" in message


# -- what the server says is not taken on trust -------------------------------------


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
def test_a_redirected_token_request_is_not_followed(
    client: ApiClient, requests_mock: Any, status: int
) -> None:
    requests_mock.post(
        TOKEN_URL, status_code=status, headers={"Location": "http://evil.example:8080/steal"}
    )
    trap = requests_mock.post("http://evil.example:8080/steal", json={})
    get = requests_mock.get(INVITE_URL, **ok_invite())

    with pytest.raises(AuthenticationFailed) as caught:
        client.get_invite("inv_8f2k1")

    assert not trap.called and not get.called
    assert len(token_calls(requests_mock)) == 1  # a redirect is not retried either
    text = str(caught.value)
    assert f"HTTP {status}" in text and "evil.example:8080" in text
    assert "not followed" in text


@pytest.mark.parametrize("method", ["GET", "PATCH", "POST"])
def test_a_redirected_invite_request_is_a_per_invite_error(
    client: ApiClient, requests_mock: Any, token_endpoint: Any, method: str
) -> None:
    location = "https://other.example/\x1b]0;pwned\x07"
    requests_mock.register_uri(
        method, re.compile("/kyb/"), status_code=302, headers={"Location": location}
    )
    with pytest.raises(Redirected) as caught:
        operate(client, method)

    assert len(api_calls(requests_mock)) == 1
    assert "other.example" in str(caught.value) and "\x1b" not in str(caught.value)
    assert not caught.value.outcome_unknown


@pytest.mark.parametrize(
    ("answered", "said"),
    [
        ({**INVITE, "id": "inv_SOMEONE_ELSE"}, "inv_SOMEONE_ELSE"),
        ({k: v for k, v in INVITE.items() if k != "id"}, "no id"),
    ],
    ids=["another-invite", "no-id"],
)
def test_a_get_answered_about_another_invite_names_both_ids(
    client: ApiClient, requests_mock: Any, token_endpoint: Any, answered: Any, said: str
) -> None:
    requests_mock.get(INVITE_URL, **ok_invite(answered))

    with pytest.raises(WrongInvite) as caught:
        client.get_invite("inv_8f2k1")

    text = str(caught.value)
    assert "inv_8f2k1" in text and said in text
    assert len(api_calls(requests_mock)) == 1


@pytest.mark.parametrize("operation", ["get", "update", "resend"])
def test_success_false_is_a_failure_whatever_the_status(
    client: ApiClient, requests_mock: Any, token_endpoint: Any, operation: str
) -> None:
    lying = {**envelope(INVITE, message="could not process", request_id="4711"), "success": False}
    requests_mock.get(INVITE_URL, json=lying)
    requests_mock.patch(INVITE_URL, json=lying)
    requests_mock.post(RESEND_URL, json=lying)
    with pytest.raises(EnvelopeFailure) as caught:
        operate(client, operation)

    text = str(caught.value)
    assert "success: false" in text and "could not process" in text and "4711" in text
    assert len(api_calls(requests_mock)) == 1


def test_retry_after_past_the_budget_gives_up_at_once_saying_so(
    client: ApiClient, requests_mock: Any, token_endpoint: Any, fake_time: FakeTime
) -> None:
    requests_mock.get(INVITE_URL, **failure(429, "slow down", headers={"Retry-After": "100000"}))
    start = fake_time.now

    with pytest.raises(RateLimited) as caught:
        client.get_invite("inv_8f2k1")

    assert fake_time.now - start < 0.5  # no wait beyond the first turns' spacing
    assert len(api_calls(requests_mock)) == 1
    assert (
        "(gave up after 1 attempt: the server asked to wait 100000 s, more than the 60 s left "
        "of retry_max_seconds)"
    ) in str(caught.value)
    # Every other request of the run is refused at once too, rather than wait.
    waited = fake_time.now
    with pytest.raises(RateLimited) as other:
        client.write_invite("inv_8f2k1", {"name": "X"})
    assert str(other.value) == (
        "not sent: the server asked that no request start for another "
        "100000 s, more than the 60 s left of this request's retry budget "
        "(retry_max_seconds: 60)"
    )
    assert len(api_calls(requests_mock)) == 1 and fake_time.now == waited


def test_an_http_date_retry_after_is_understood(
    client: ApiClient, requests_mock: Any, token_endpoint: Any, fake_time: FakeTime
) -> None:
    when = email.utils.format_datetime(
        datetime.datetime.now(datetime.UTC) + datetime.timedelta(days=2), usegmt=True
    )
    requests_mock.get(INVITE_URL, **failure(503, "maintenance", headers={"Retry-After": when}))

    with pytest.raises(ServerError) as caught:
        client.get_invite("inv_8f2k1")

    assert caught.value.retry_after is not None and caught.value.retry_after > 86400
    assert "the server asked to wait" in str(caught.value)
    assert len(api_calls(requests_mock)) == 1


@pytest.mark.parametrize("announced", [True, False], ids=["content-length", "streamed"])
def test_an_answer_past_the_size_cap_is_a_clear_error(
    make_client: Callable[..., ApiClient], requests_mock: Any, token_endpoint: Any, announced: bool
) -> None:
    client = make_client(max_response_bytes=4096)
    body = b'{"data": "' + b"x" * 100_000 + b'"}'
    headers = {} if announced else {"Content-Length": ""}
    requests_mock.get(INVITE_URL, content=body, headers=headers)

    with pytest.raises(AnswerTooLarge) as caught:
        client.get_invite("inv_8f2k1")

    assert "max_response_bytes" in str(caught.value) and "4,096" in str(caught.value)
    assert len(api_calls(requests_mock)) == 1  # not retried: it would be as large again


@pytest.mark.parametrize(
    ("token", "why"),
    [
        ("", "it is empty"),
        ("tokABC\r\nX-Injected: 1", "it holds a line break"),
        ("tokABC\nDEF", "it holds a line break"),
        ("tokABC DEF", "it holds whitespace"),
        ("\ttokABCDEF", "it holds whitespace"),
        ("tokABC\x00DEF", "it holds a control character"),
        ("tökén-€ABC", "it holds U+00F6, a character outside ASCII"),
        ("tokABC\u20acDEF", "it holds U+20AC, a character outside ASCII"),
    ],
    ids=["empty", "crlf", "lf", "space", "tab", "nul", "latin-1", "non-latin-1"],
)
@pytest.mark.parametrize("operation", ["get", "resend"])
def test_a_token_http_cannot_carry_is_refused_at_the_token_step_saying_why(
    client: ApiClient, requests_mock: Any, token: str, why: str, operation: str
) -> None:
    requests_mock.post(TOKEN_URL, [token_response(token)])
    get = requests_mock.get(INVITE_URL, **ok_invite())
    resend = requests_mock.post(RESEND_URL, json=envelope(None))

    for _ in range(2):  # a second call does not ask for another token
        with pytest.raises(AuthenticationFailed) as caught:
            operate(client, operation)
        error = caught.value
        assert not error.outcome_unknown  # the re-send surely never left
        assert (
            "the token endpoint issued an access token that cannot be sent in an HTTP header "
            f"({why}); it was not used, so no request was sent with it"
        ) in str(error)
        if token:
            assert "tokABC" not in str(error) and "tökén" not in str(error)

    assert not get.called and not resend.called
    assert len(token_calls(requests_mock)) == 1


def test_the_echoed_form_and_authorization_header_are_redacted(
    make_client: Callable[..., ApiClient], requests_mock: Any
) -> None:
    secret = "cs+live/SECRET&value=42"  # changes when form-encoded
    client = make_client(client_secret=secret, max_attempts=1)
    echo_form = {
        "status_code": 401,
        "json": lambda request, context: envelope(
            None, status=401, message=f"invalid client: {request.text}"
        ),
    }
    requests_mock.post(TOKEN_URL, [token_response(TOKEN), echo_form])
    echo_header = lambda request, context: envelope(  # noqa: E731
        {"authorization": request.headers["Authorization"]},
        status=400,
        message=f"bad header Authorization: {request.headers['Authorization']}",
    )
    requests_mock.get(INVITE_URL, status_code=400, json=echo_header)

    with pytest.raises(InvalidRequest) as echoed:
        client.get_invite("inv_8f2k1")
    tokens = client._tokens
    with pytest.raises(AuthenticationFailed) as refused:
        tokens.renew(tokens.current())  # the next token request is answered with the echo

    for error in (echoed.value, refused.value):
        text = f"{error} {error.message} {error.details}"
        for leaked in (secret, quote_plus(secret), TOKEN, TOKEN.split(".")[1]):
            assert leaked not in text
        assert "[redacted]" in text


def test_the_observer_hears_of_every_attempt_of_an_invite_operation(
    make_client: Callable[..., ApiClient],
    requests_mock: Any,
    token_endpoint: Any,
    fake_time: FakeTime,
) -> None:
    heard: list[tuple[float, int | None]] = []
    client = ApiClient(
        Settings(base_url=BASE, client_id=CLIENT_ID, client_secret=SECRET),
        clock=fake_time.clock,
        sleep=fake_time.sleep,
        observer=lambda seconds, status: heard.append((seconds, status)),
    )
    requests_mock.get(
        INVITE_URL,
        [failure(503, "busy"), {"exc": requests.exceptions.ReadTimeout}, ok_invite()],
    )

    client.get_invite("inv_8f2k1")

    assert [status for _, status in heard] == [503, None, 200]  # the token request is not one
    assert all(seconds >= 0 for seconds, _ in heard)


def test_a_compressed_answer_is_capped_after_decompression(
    make_client: Callable[..., ApiClient], requests_mock: Any, token_endpoint: Any
) -> None:
    # 20 MB of JSON squeezed into ~20 KB: the cap is on what it unpacks to.
    client = make_client(max_response_bytes=1024 * 1024)
    bomb = gzip.compress(b'{"data": "' + b"0" * 20_000_000 + b'"}', compresslevel=9)
    assert len(bomb) < 1024 * 1024
    requests_mock.get(INVITE_URL, content=bomb, headers={"Content-Encoding": "gzip"})

    with pytest.raises(AnswerTooLarge) as caught:
        client.get_invite("inv_8f2k1")

    assert "1,048,576 bytes" in str(caught.value)


# -- the --verbose log ----------------------------------------------------------


def test_the_verbose_log_tells_each_attempt_its_outcome_and_each_retry(
    make_client: Callable[..., ApiClient],
    requests_mock: Any,
    debug_log: pytest.LogCaptureFixture,
    half_jitter: None,
    fake_time: FakeTime,
) -> None:
    # Unpaced: the renewal's own turn would count in the attempt's time (pacing has
    # its own tests, test_pacing.py).
    settings = Settings(base_url=BASE, client_id=CLIENT_ID, client_secret=SECRET)
    unpaced = RequestPacer(fake_time.clock, fake_time.sleep, start_rate=rate.MAX_RATE)
    client = ApiClient(settings, pacer=unpaced, clock=fake_time.clock, sleep=fake_time.sleep)
    requests_mock.post(TOKEN_URL, [token_response(), token_response(TOKEN2, expires_in=600)])
    requests_mock.get(
        INVITE_URL,
        [failure(503, "Service Unavailable", request_id="5031"), failure(401, "expired"),
         ok_invite(request_id="2002")],
    )  # fmt: skip

    client.get_invite("inv_8f2k1")

    path = "/public-api/v1/kyb/invites/inv_8f2k1"
    assert [r.getMessage() for r in debug_log.records] == [
        "POST /oauth/token -> 201 (0 ms, requestId 1001)",
        "obtained an access token, used for 86400s",
        f"GET {path} -> 503 (0 ms, requestId 5031)",
        f"GET {path} failed (HTTP 503: Service Unavailable (requestId 5031)); retry 1 in 0.25s",
        "GET -> 401, renewing the token and retrying once",
        "POST /oauth/token -> 201 (0 ms, requestId 1001)",
        "obtained an access token, used for 600s",
        f"GET {path} -> 200 (0 ms, requestId 2002)",
    ]


def test_a_failing_request_observer_is_logged_and_the_request_still_succeeds(
    fake_time: FakeTime, requests_mock: Any, debug_log: pytest.LogCaptureFixture
) -> None:
    def broken_observer(seconds: float, status: int | None) -> None:
        raise ValueError("the progress display broke")

    settings = Settings(base_url=BASE, client_id=CLIENT_ID, client_secret=SECRET)
    requests_mock.post(TOKEN_URL, [token_response()])
    requests_mock.get(INVITE_URL, **ok_invite())
    with ApiClient(
        settings, clock=fake_time.clock, sleep=fake_time.sleep, observer=broken_observer
    ) as client:
        assert client.get_invite("inv_8f2k1").fields["name"] == "Acme Holdings Ltd"

    (record,) = [r for r in debug_log.records if "observer" in r.getMessage()]
    assert record.getMessage() == "the request observer failed"
    assert record.exc_info and isinstance(record.exc_info[1], ValueError)


# -- the retry loop's edges -----------------------------------------------------


@pytest.mark.parametrize("retried", ["invite", "token"])
def test_a_retry_is_given_only_what_is_left_of_the_retry_budget(
    make_client: Callable[..., ApiClient], requests_mock: Any, half_jitter: None, retried: str
) -> None:
    client = make_client(timeout=30, retry_max_seconds=10)
    busy = failure(503, "busy")
    requests_mock.post(TOKEN_URL, [busy] * (retried == "token") + [token_response()])
    requests_mock.get(INVITE_URL, [busy] * 2 * (retried == "invite") + [ok_invite()])

    client.get_invite("inv_8f2k1")

    calls = token_calls(requests_mock) if retried == "token" else api_calls(requests_mock)
    timeouts = [call.timeout for call in calls]
    assert timeouts[0][1] == 30  # the first attempt: the whole timeout
    assert timeouts[1][1] == pytest.approx(10 - 0.25)  # then what the budget has left
    if retried == "invite":
        assert timeouts[2][1] == pytest.approx(10 - 0.25 - 0.5)
    assert all(connect <= read for connect, read in timeouts)


@pytest.mark.parametrize("token_fetched", [False, True])
def test_a_request_waiting_for_its_turn_when_the_run_stops_is_not_sent(
    fake_time: FakeTime, requests_mock: Any, token_endpoint: Any, token_fetched: bool
) -> None:
    requests_mock.get(INVITE_URL, **ok_invite())
    settings = Settings(base_url=BASE, client_id=CLIENT_ID, client_secret=SECRET)
    with ApiClient(settings, clock=fake_time.clock, sleep=fake_time.sleep) as client:
        if token_fetched:
            client.get_invite("inv_8f2k1")
        # The server's 429 asked for a pause.
        client.pacer.on_answer(client.pacer.wait_turn(), 0.0, refused=True, retry_after=30.0)
        client.stop.set("interrupted")
        with pytest.raises(NotSent) as caught:
            client.get_invite("inv_8f2k1")

    assert str(caught.value) == "not sent: the run is stopping"
    assert not caught.value.outcome_unknown
    # Not even a token request when none was fetched before.
    assert len(requests_mock.request_history) == (2 if token_fetched else 0)


def test_every_request_says_who_sends_it_and_asks_for_uncompressed_json(
    client: ApiClient, requests_mock: Any, token_endpoint: Any
) -> None:
    requests_mock.get(INVITE_URL, **ok_invite())

    client.get_invite("inv_8f2k1")

    for request in requests_mock.request_history:  # the token request too
        assert request.headers["User-Agent"].startswith("invite-reconciler/")
        assert request.headers["Accept"] == "application/json"
        assert request.headers["Accept-Encoding"] == "identity"


TOKEN_403 = (
    # No "token does not carry the scope" note: there is no token yet, and the advice
    # names RECONCILER_SCOPE once.
    "HTTP 403: no token from the token request (POST /oauth/token): scope not granted; "
    "check RECONCILER_SCOPE ('invites:write'), RECONCILER_CLIENT_ID and token_path "
    "[scope: not granted] (requestId 403-1)"
)
TOKEN_307 = (
    "HTTP 307: no token from the token request (POST /oauth/token): the server answered "
    "with a redirect to "
    "login.example; the API never redirects, so it was not followed and nothing was re-sent "
    "there; check RECONCILER_BASE_URL and token_path"
)


@pytest.mark.parametrize(
    ("answer", "said", "details"),
    [
        (
            {
                "status_code": 403,
                "json": envelope(
                    {"scope": "not granted"},
                    status=403,
                    message="scope not granted",
                    request_id="403-1",
                ),
            },
            TOKEN_403,
            {"scope": "not granted"},  # the envelope's per-field problems, kept
        ),
        (
            {"status_code": 307, "headers": {"Location": "https://login.example/"}},
            TOKEN_307,
            None,
        ),
    ],
    ids=["refused", "redirected"],
)
def test_a_token_endpoint_that_gives_no_token_says_what_to_check(
    make_client: Callable[..., ApiClient],
    requests_mock: Any,
    answer: dict[str, Any],
    said: str,
    details: Any,
) -> None:
    client = make_client(scope="invites:write")
    requests_mock.post(TOKEN_URL, **answer)

    with pytest.raises(AuthenticationFailed) as caught:
        client.get_invite("inv_8f2k1")

    assert str(caught.value) == said
    assert caught.value.details == details
    assert api_calls(requests_mock) == []


def test_the_verbose_log_names_a_failure_without_an_answer_by_its_kind(
    make_client: Callable[..., ApiClient],
    requests_mock: Any,
    token_endpoint: Any,
    debug_log: pytest.LogCaptureFixture,
) -> None:
    client = make_client(max_attempts=1, max_response_bytes=1000)
    requests_mock.get(INVITE_URL, exc=requests.exceptions.ConnectionError("reset"))
    with pytest.raises(TransportError):
        client.get_invite("inv_8f2k1")
    huge = {"status_code": 200, "content": b"x" * 5000, "headers": {"X-Request-Id": "big-1"}}
    requests_mock.get(INVITE_URL, **huge)
    with pytest.raises(AnswerTooLarge):
        client.get_invite("inv_8f2k1")

    path = "/public-api/v1/kyb/invites/inv_8f2k1"
    logged = [r.getMessage() for r in debug_log.records if r.getMessage().startswith("GET")]
    assert logged == [
        f"GET {path} -> TransportError (0 ms, requestId -)",
        f"GET {path} -> 200 (0 ms, requestId -)",  # cut off before its requestId was read
    ]


def test_the_verbose_log_gives_how_long_each_attempt_took(
    make_client: Callable[..., ApiClient],
    requests_mock: Any,
    token_endpoint: Any,
    fake_time: FakeTime,
    debug_log: pytest.LogCaptureFixture,
) -> None:
    client = make_client()

    def slow_answer(request: Any, context: Any) -> dict[str, Any]:
        fake_time.now += 1.25  # the server took a second and a quarter
        return envelope(INVITE, request_id="2502")

    requests_mock.get(INVITE_URL, json=slow_answer)

    client.get_invite("inv_8f2k1")

    logged = [r.getMessage() for r in debug_log.records if r.getMessage().startswith("GET")]
    assert logged == ["GET /public-api/v1/kyb/invites/inv_8f2k1 -> 200 (1250 ms, requestId 2502)"]
