"""ApiClient against a mocked platform API: tokens, addresses, errors, retries, secrets."""

from __future__ import annotations

import datetime
import email.utils
import gzip
import re
import shutil
from typing import Any
from urllib.parse import parse_qs, quote_plus, urlsplit

import certifi
import pytest
import requests
from support.api_answers import BASE, INVITE, INVITE_URL, INVITES, TOKEN, envelope, token_response
from support.values import typed
from urllib3 import HTTPConnectionPool
from urllib3.connection import HTTPConnection
from urllib3.exceptions import MaxRetryError, NewConnectionError

from reconciler.api import capacity as rate
from reconciler.api import exceptions as ex
from reconciler.api.capacity import RequestPacer
from reconciler.api.client import ApiClient, Receipt
from reconciler.errors import ConfigError, ReconcilerError
from reconciler.model.invite import CurrentInvite
from reconciler.settings.config import Settings
from reconciler.settings.contract import DEFAULT_SCOPE
from unit.api.conftest import CLIENT_ID, SECRET, TOKEN2, TOKEN_URL, Api, fails, failure, ok_invite

RESEND_URL = INVITE_URL + "/resend"
PATH = "/public-api/v1/kyb/invites/inv_8f2k1"
TOKENS = [token_response(TOKEN), token_response(TOKEN2)]


@pytest.fixture
def half_jitter(monkeypatch: pytest.MonkeyPatch) -> None:
    """Retry pauses without their randomness: the jitter is always 0.5."""
    monkeypatch.setattr("random.random", lambda: 0.5)


def operate(client: ApiClient, operation: str, invite_id: str = "inv_8f2k1") -> object:
    """One of the client's operations on ``invite_id``: get, update (a PATCH) or resend."""
    if operation in ("get", "GET"):
        return client.get_invite(invite_id)
    if operation in ("update", "PATCH"):
        return client.write_invite(invite_id, {"name": "X"})
    return client.resend_invite(invite_id)


ADDRESS = {"get": ("GET", INVITE_URL), "update": ("PATCH", INVITE_URL)}
ADDRESS |= {"resend": ("POST", RESEND_URL)}
ADDRESS |= {address[0]: address for address in ADDRESS.values()}  # "GET", "PATCH", "POST"


def answer_all(api: Api, *answers: Any) -> None:
    """GET, PATCH and the re-send of inv_8f2k1 all answered ``answers`` in turn."""
    for method, url in (("GET", INVITE_URL), ("PATCH", INVITE_URL), ("POST", RESEND_URL)):
        api.mock.register_uri(method, url, list(answers))


def run(api: Api, operation: str, *answers: Any, error: Any = None, **settings: Any) -> Any:
    """``operation`` (see ``operate``) by a new client (``settings``) whose token endpoint
    answers a token, its requests answered ``answers`` in turn: the ``error`` it raises,
    else what it returns."""
    api.mock.register_uri(*ADDRESS[operation], list(answers))
    client = api.client(token=True, **settings)
    return operate(client, operation) if error is None else fails(error, operate, client, operation)


# -- token ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("scope", "sent"),
    [
        (None, ["kyb:invites:read", "kyb:invites:write"]),
        ("kyb:invites:read kyb:invites:write accounts:read",
         ["kyb:invites:read", "kyb:invites:write", "accounts:read"]),
        # As a YAML block scalar or a pasted variable has it: sent one space apart.
        (" kyb:invites:read\tkyb:invites:write\n", ["kyb:invites:read", "kyb:invites:write"]),
    ],
    ids=["default-scope", "configured-scope", "laid-out-scope"],
)  # fmt: skip
def test_token_is_requested_with_client_credentials_form_and_reused(api: Api, scope, sent):
    client = api.client(token=True) if scope is None else api.client(token=True, scope=scope)
    api.mock.get(INVITE_URL, **ok_invite())
    api.mock.patch(INVITE_URL, json=envelope(INVITE))

    for _ in range(5):
        client.get_invite("inv_8f2k1")
    client.write_invite("inv_8f2k1", {"name": "Acme Ltd"})

    (token_request,) = api.tokens  # reused across calls
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
    assert len(api.calls) == 6
    assert [r.headers["Authorization"] for r in api.calls] == [f"Bearer {TOKEN}"] * 6


@pytest.mark.parametrize(
    ("expires_in", "renewed_after"),
    [
        (3600, 3540),  # a long-lived token: a minute early
        (100, 90),  # a short-lived one: when 90% of its life has gone
        # Below ten seconds (1, 1 ms, 0, negative), ten are used: not a token per
        # request (a token that truly dies sooner gets a 401, which renews it).
        (1, 9), (0.001, 9), (0, 9), (-5, 9),
        ("3600", 3540),  # a number sent as a string, as some servers do
        (10**400, 86340),  # a day at most, and no OverflowError
        ("9" * 400, 270),  # nonsense lifetimes count as five minutes
        (True, 270), (None, 270), (float("nan"), 270),
    ],
)  # fmt: skip
def test_when_a_token_is_renewed_depends_on_its_lifetime(api: Api, expires_in, renewed_after):
    client = api.client()
    first = {"access_token": TOKEN, "token_type": "Bearer", "expires_in": expires_in}
    api.token({"status_code": 201, "json": envelope(first)}, token_response(TOKEN2))
    api.mock.get(INVITE_URL, **ok_invite())
    start = api.time.now

    for moment in (0, renewed_after / 2, renewed_after - 0.5, renewed_after):
        api.time.now = start + moment
        client.get_invite("inv_8f2k1")

    auth = [r.headers["Authorization"] for r in api.calls]
    assert auth == [f"Bearer {TOKEN}"] * 3 + [f"Bearer {TOKEN2}"]
    assert len(api.tokens) == 2


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
    api: Api, failing: Exception, token_tries: int
) -> None:
    # The token request itself failed, perhaps after reaching the server; the re-send
    # never left, and must not be reported as of unknown outcome.
    client = api.client(max_attempts=2)
    api.mock.post(TOKEN_URL, exc=failing)
    api.mock.post(RESEND_URL, json=envelope({"id": "inv_8f2k1"}))

    error = fails(ex.TransportError, client.resend_invite, "inv_8f2k1")

    assert error.maybe_sent is False and not error.outcome_unknown
    assert error.permanent is (token_tries == 1)
    assert "(while getting a token; this request was not sent)" in str(error)
    assert api.calls == [] and len(api.tokens) == token_tries


@pytest.mark.parametrize(
    ("answer", "said"),
    [
        ({"json": {"access_token": TOKEN, "token_type": "Bearer", "expires_in": 3600}}, None),
        # ... with a `data` of nothing added (as a gateway may wrap it)
        ({"json": {"data": None, "access_token": TOKEN, "token_type": "Bearer",
                   "expires_in": 3600}}, None),
        ({"json": envelope({"token_type": "Bearer"})}, "no access_token"),
        ({"text": "<html><body>Sign in</body></html>", "reason": "OK"}, "no access_token"),
    ],
    ids=["bare", "empty-data", "no-token", "html"],
)  # fmt: skip
def test_a_bare_rfc6749_token_body_is_accepted_and_one_without_a_token_said(api: Api, answer, said):
    client = api.client()
    api.mock.post(TOKEN_URL, status_code=200, **answer)
    api.mock.get(INVITE_URL, **ok_invite())

    if said is None:
        client.get_invite("inv_8f2k1")
        assert api.calls[0].headers["Authorization"] == f"Bearer {TOKEN}"
        return
    error = fails(ex.AuthenticationFailed, client.get_invite, "inv_8f2k1")
    assert str(error) == "the token endpoint's answer has no access_token"
    assert api.calls == []


def test_api_401_renews_the_token_once_and_retries_once_with_its_time_limits_and_trust(
    api: Api, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    shutil.copy(certifi.where(), tmp_path / "private-ca.pem")
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(tmp_path / "private-ca.pem"))
    client = api.client(timeout=7)
    api.token(*TOKENS)
    api.mock.get(INVITE_URL, [failure(401, "token expired"), ok_invite()])

    assert client.get_invite("inv_8f2k1").fields["name"] == "Acme Holdings Ltd"

    assert len(api.tokens) == 2
    first, again = api.calls
    assert first.headers["Authorization"] == f"Bearer {TOKEN}"
    assert again.headers["Authorization"] == f"Bearer {TOKEN2}"
    assert (again.timeout, again.verify) == (first.timeout, first.verify)
    assert first.timeout[1] == 7 and first.verify == str(tmp_path / "private-ca.pem")


def test_second_401_fails_with_authentication_failed(api: Api) -> None:
    client, _ = api.client(), api.debug()
    api.token(*TOKENS)
    api.mock.get(INVITE_URL, **failure(401, "token revoked", request_id="555"))

    error = fails(ex.AuthenticationFailed, client.get_invite, "inv_8f2k1")

    assert len(api.tokens) == 2 and len(api.calls) == 2
    assert "401" in str(error) and "token revoked" in str(error) and "555" in str(error)
    api.assert_secrets_kept(error, client)


def test_token_endpoint_401_names_client_id_and_env_vars_but_not_secret(api: Api) -> None:
    client, _ = api.client(), api.debug()
    api.mock.post(TOKEN_URL, **failure(401, "invalid client credentials", "99"))
    get = api.mock.get(INVITE_URL, **ok_invite())

    error = fails(ex.AuthenticationFailed, client.get_invite, "inv_8f2k1")

    text = str(error)
    assert CLIENT_ID in text
    assert "RECONCILER_CLIENT_ID" in text and "RECONCILER_CLIENT_SECRET" in text
    assert "401" in text and "invalid client credentials" in text and "99" in text
    assert len(api.tokens) == 1  # bad credentials are not retried
    assert not get.called
    api.assert_secrets_kept(error, client)


# -- addresses and payloads -------------------------------------------------------


@pytest.mark.parametrize("status", ["pending", "accepted"])
def test_get_invite_returns_canonical_fields_and_status(api: Api, status: str) -> None:
    invite = run(api, "get", ok_invite({**INVITE, "status": status}))

    assert isinstance(invite, CurrentInvite)
    assert invite.id == "inv_8f2k1"
    assert invite.status == status and invite.is_pending is (status == "pending")
    expected = {k: v for k, v in INVITE.items() if k not in ("id", "status", "createdAt")}
    assert invite.fields == expected  # server-managed fields are ignored
    (request,) = api.calls
    assert (request.method, request.url) == ("GET", INVITE_URL)


def test_a_value_the_invite_cannot_hold_leaves_that_invite_alone_naming_the_field(api: Api):
    refused = run(api, "get", ok_invite({**INVITE, "groups": ["emea", 7]}), error=ex.BadInviteValue)

    assert refused.status == 200
    assert refused.message == (
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
def test_only_a_strong_etag_is_kept_for_if_match(api: Api, header: str, kept: str | None) -> None:
    api.mock.get(INVITE_URL, **ok_invite(), headers={"ETag": header})

    assert api.client(token=True).read_invite("inv_8f2k1").etag == kept


def test_update_and_resend_send_exactly_their_bodies_and_return_receipts(api: Api) -> None:
    client = api.client(token=True)
    api.mock.patch(INVITE_URL, json=envelope(INVITE, request_id="31337"))
    api.mock.post(RESEND_URL, json=envelope(None, request_id="4242"))
    patch = {"email": "new@acme.example", "groups": ["emea"], "primaryContact": {"name": "J"}}

    receipt = client.write_invite("inv_8f2k1", typed(patch), if_match='"v7"')
    client.write_invite("inv_8f2k1", {"email": "new@acme.example"})
    resent = client.resend_invite("inv_8f2k1")

    assert (receipt.status, receipt.request_id) == (200, "31337")
    assert (resent.status, resent.request_id) == (200, "4242")
    first, second, resend = api.calls
    assert (first.method, first.url, second.url) == ("PATCH", INVITE_URL, INVITE_URL)
    assert first.headers["Content-Type"] == "application/json"
    assert first.json() == patch
    # A write read with an ETag carries it as If-Match.
    assert first.headers["If-Match"] == '"v7"' and "If-Match" not in second.headers
    assert (resend.method, resend.url, resend.json()) == ("POST", RESEND_URL, {})


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
    api: Api, data: Any, unknown: bool
) -> None:
    # Issue 51, row 8: an answer about inv_2 was printed `re-sent inv_8f2k1`.
    answers = ({"json": envelope(data)}, {"json": envelope(None)})
    if not unknown:
        assert run(api, "resend", *answers).status == 200
        return
    raised = run(api, "resend", *answers, error=ex.WrongInvite)

    assert raised.outcome_unknown and not raised.refused_before_acting
    assert raised.message == (
        "invite inv_8f2k1: the answer to its re-send is about inv_2; which invitation went "
        "out is unknown"
    )
    assert len(api.calls) == 1


def test_custom_path_templates_and_base_url_prefix(api: Api) -> None:
    client = api.client(
        base_url="https://gw.example.test/platform/",
        token_path="/auth/v2/token",
        get_invite_path="/kyb/v2/invites/{inviteId}/details",
        update_invite_path="/kyb/v2/invites/{inviteId}",
        resend_invite_path="/kyb/v2/invites/{inviteId}/actions/resend",
    )
    prefix = "https://gw.example.test/platform"
    api.mock.post(prefix + "/auth/v2/token", [token_response()])
    api.mock.get(prefix + "/kyb/v2/invites/inv_1/details", **ok_invite({**INVITE, "id": "inv_1"}))
    api.mock.patch(prefix + "/kyb/v2/invites/inv_1", json=envelope({**INVITE, "id": "inv_1"}))
    api.mock.post(prefix + "/kyb/v2/invites/inv_1/actions/resend", json=envelope(None))

    for operation in ("get", "update", "resend"):
        operate(client, operation, "inv_1")

    assert [(r.method, r.url) for r in api.mock.request_history] == [
        ("POST", prefix + "/auth/v2/token"),
        ("GET", prefix + "/kyb/v2/invites/inv_1/details"),
        ("PATCH", prefix + "/kyb/v2/invites/inv_1"),
        ("POST", prefix + "/kyb/v2/invites/inv_1/actions/resend"),
    ]


@pytest.mark.parametrize(
    ("invite_id", "in_path"),
    [("inv_8f2k1", "inv_8f2k1"), ("Inv.v2-A_b", "Inv.v2-A_b"), ("a/b", "a%2Fb"), ("a b", "a%20b"),
     ("a?b#c", "a%3Fb%23c"), ("x%41", "x%2541"), ("ü", "%C3%BC")],
)  # fmt: skip
def test_invite_id_is_percent_encoded_in_path(api: Api, invite_id: str, in_path: str) -> None:
    client = api.client(token=True)
    answer = envelope({**INVITE, "id": invite_id})
    api.mock.get(re.compile(r"/public-api/v1/kyb/invites/"), json=answer)
    api.mock.patch(re.compile(r"/public-api/v1/kyb/invites/"), json=answer)
    api.mock.post(re.compile(r"/resend$"), json=envelope(None))

    for operation in ("get", "update", "resend"):
        operate(client, operation, invite_id)

    assert [r.url for r in api.calls] == [INVITES + in_path] * 2 + [INVITES + in_path + "/resend"]


@pytest.mark.parametrize("invite_id", [".", ".."])
@pytest.mark.parametrize("operation", ["get", "update", "resend"])
def test_dot_segment_invite_id_never_addresses_another_resource(api: Api, invite_id, operation):
    # "." and ".." match the contract's inviteId alphabet, but in a URL path they are
    # dot segments: sent as is, GET /invites/.. becomes GET /public-api/v1/kyb/.
    client = api.client(token=True)
    api.mock.register_uri("GET", re.compile("."), json={})
    api.mock.register_uri("PATCH", re.compile("."), json={})
    api.mock.register_uri("POST", re.compile("/kyb/"), json={})
    try:
        operate(client, operation, invite_id)
    except (ex.ApiError, ReconcilerError):
        refused = True  # refusing an id that no URL can address is fine
    else:
        refused = False

    assert refused or api.calls
    shape = r"/public-api/v1/kyb/invites/([^/]+)" + ("/resend" if operation == "resend" else "")
    for request in api.calls:
        path = urlsplit(request.url).path
        match = re.fullmatch(shape, path)
        assert match, f"{request.method} {path} is not the invite's own address"
        assert match.group(1) not in (".", "..")


def test_renamed_wire_fields_in_both_directions(api: Api) -> None:
    client = api.client(token=True, field_names={"phone": "phoneNumber", "addOns": "add_ons"})
    wire = {k: v for k, v in INVITE.items() if k not in ("phone", "addOns")}
    wire.update({"phoneNumber": "+15550100", "add_ons": ["kyc"], "phone": "not-this-one"})
    api.mock.get(INVITE_URL, **ok_invite(wire))
    api.mock.patch(INVITE_URL, json=envelope(wire))

    invite = client.get_invite("inv_8f2k1")
    client.write_invite("inv_8f2k1", typed({"phone": "+15550199", "addOns": ["edd"], "name": "N"}))

    assert invite.fields["phone"] == "+15550100" and invite.fields["addOns"] == ["kyc"]
    assert "phoneNumber" not in invite.fields and "add_ons" not in invite.fields
    assert api.calls[1].json() == {"phoneNumber": "+15550199", "add_ons": ["edd"], "name": "N"}


# -- errors -------------------------------------------------------------------------

STATUS_ERRORS = [
    (400, ex.InvalidRequest), (401, ex.AuthenticationFailed), (403, ex.PermissionDenied),
    (404, ex.NotFound), (409, ex.Conflict), (429, ex.RateLimited), (500, ex.ServerError),
    (502, ex.ServerError), (503, ex.ServerError), (504, ex.ServerError),
]  # fmt: skip


@pytest.mark.parametrize(("status", "error_class"), STATUS_ERRORS)
def test_status_maps_to_error_with_status_message_and_request_id(api: Api, status, error_class):
    client, _ = api.client(max_attempts=1), api.debug()
    api.token(*TOKENS)
    message = f"the server says no ({status})"
    api.mock.patch(INVITE_URL, **failure(status, message, request_id="8675309"))

    error = fails(error_class, client.write_invite, "inv_8f2k1", {"email": "x@acme.example"})

    assert (error.status, error.request_id) == (status, "8675309")
    assert str(status) in str(error) and message in str(error) and "8675309" in str(error)
    api.assert_secrets_kept(error, client)


INSUFFICIENT_SCOPE = {"status_code": 403, "json": {"error": "insufficient_scope",
                                                   "error_description": "needs more"}}  # fmt: skip


def scope_refused(api: Api, asked: str, granted: str | None, refusal: Any) -> str:
    """What a write refused with ``refusal`` says, the token asked for ``asked`` and granted
    ``granted`` (as the token answer names it)."""
    answer = token_response()
    if granted is not None:
        answer["json"]["data"]["scope"] = granted
    api.token(answer)
    client = api.client(scope=asked)
    api.mock.patch(INVITE_URL, **refusal)
    error = fails(ex.PermissionDenied, client.write_invite, "inv_8f2k1", {"name": "X"})
    assert refusal is not INSUFFICIENT_SCOPE or error.bearer_error == "insufficient_scope"
    return str(error)


@pytest.mark.parametrize("granted", [None, "kyb:invites:read"])
def test_a_403_naming_a_scope_never_asked_for_says_this_command_needs_it(api: Api, granted):
    # Asked for read only, granted it (named, or as asked): the platform's refusal names
    # the scope the write needs, so that scope is what to add, not "no scope is missing".
    refusal = failure(403, "token lacks scope kyb:invites:write")
    text = scope_refused(api, "kyb:invites:read", granted, refusal)

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
    api: Api, granted: str | None, refusal: dict[str, Any], blames_the_scope: bool
) -> None:
    # A token granted every scope asked for, refused all the same: the platform refused
    # for another reason, and changing RECONCILER_SCOPE would not help. A token answer
    # that names no scope granted what was asked (RFC 6749 5.1): no scope is blamed for
    # what, as far as the client can tell, it was granted (issue 55), and the note
    # points at the client's permissions on the platform.
    text = scope_refused(api, "kyb:invites:write", granted, refusal)

    if refusal is not INSUFFICIENT_SCOPE:
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
def test_malformed_failure_body_still_gives_clear_api_error(api: Api, body: str, status: int):
    answer = {"status_code": status, **MALFORMED_BODIES[body]}
    error = run(api, "get", answer, error=ex.ApiError, max_attempts=1)

    assert error.status == status
    assert isinstance(error, dict(STATUS_ERRORS)[status])
    text = str(error)
    assert f"HTTP {status}" in text
    assert error.message.strip()  # something is said about what came back
    assert "Traceback" not in text
    if body == "html":  # described, not dumped
        assert "HTML" in text and "<html>" not in text


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
    api: Api, failures, method
):
    run(api, method, *failures, ok_invite())

    assert len(api.calls) == len(failures) + 1
    assert len(api.time.sleeps) >= len(failures)  # it waited between attempts, not really
    if method == "PATCH":
        assert [r.json() for r in api.calls] == [{"name": "X"}] * len(api.calls)


def _timed(api: Api, sent_at: list[float], status: int) -> dict[str, Any]:
    """A response that records the (fake) time its request was sent."""

    def respond(request: Any, context: Any) -> Any:
        sent_at.append(api.time.now)
        if status == 200:
            return envelope(INVITE)
        return envelope(None, status=status, message="try later")

    return {"status_code": status, "json": respond}


@pytest.mark.parametrize(("status", "asked"), [(429, 3.0), (503, 7.0)])
def test_a_retry_waits_as_long_as_retry_after_asks(api: Api, status: int, asked: float) -> None:
    sent_at: list[float] = []
    refused = {**_timed(api, sent_at, status), "headers": {"Retry-After": f"{asked:g}"}}
    assert run(api, "get", refused, _timed(api, sent_at, 200)).is_pending

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
def test_retries_stop_at_max_attempts(api: Api, answer: dict[str, Any], said: list[str]) -> None:
    text = str(run(api, "get", answer, error=(ex.ServerError, ex.TransportError), max_attempts=3))

    assert len(api.calls) == 3
    assert "gave up after 3 attempts" in text
    assert all(part in text for part in said)


def test_retries_stop_at_retry_max_seconds(api: Api) -> None:
    start, busy = api.time.now, failure(503, "busy", headers={"Retry-After": "10"})

    error = run(api, "get", busy, error=ex.ServerError, max_attempts=10, retry_max_seconds=25)

    # Attempts at 0 s, 10 s and 20 s; a fourth at 30 s would pass the 25 s budget.
    assert len(api.calls) == 3
    assert api.time.now - start <= 25
    assert "gave up after 3 attempts" in str(error)


@pytest.mark.parametrize("status", [400, 403, 404, 409])
@pytest.mark.parametrize("method", ["GET", "PATCH"])
def test_client_errors_are_never_retried(api: Api, status: int, method: str) -> None:
    error = run(api, method, failure(status, "no"), error=ex.ApiError)

    assert error.status == status
    assert len(api.calls) == 1
    assert "gave up" not in str(error)


@pytest.mark.parametrize(
    ("response", "sent_again"),
    [
        # It may have reached the server: the re-send is not sent again.
        (failure(500, "internal"), False),
        (failure(502, "bad gateway"), False),
        (failure(504, "gateway timeout"), False),
        ({"exc": requests.exceptions.ReadTimeout}, False),
        ({"exc": requests.exceptions.ConnectionError("Connection aborted: reset by peer")}, False),
        # A 429 or a 503, any body: a gateway or the platform refused it; nothing was sent.
        (failure(429, "rate limit exceeded"), True),
        (failure(503, "unavailable"), True),
        ({"status_code": 503, "text": "<html>503 Service Unavailable</html>"}, True),
        ({"status_code": 429, "text": "<html>429 Too Many Requests</html>"}, True),
        ({"exc": requests.exceptions.ConnectTimeout}, True),  # the connection never opened
    ],
    ids=["500", "502", "504", "read-timeout", "connection-reset",
         "429", "503", "503-html", "429-html", "connect-timeout"],
)  # fmt: skip
def test_a_resend_is_sent_again_only_when_refused_before_it_was_acted_on(
    api: Api, response: dict[str, Any], sent_again: bool
) -> None:
    answers = (response, {"json": envelope(None, request_id="78")})
    if sent_again:
        assert run(api, "resend", *answers) == Receipt(200, "78")
    else:
        run(api, "resend", *answers, error=ex.ApiError)
    assert len(api.calls) == 1 + sent_again


def test_halted_client_does_not_retry(api: Api) -> None:
    client = api.client(token=True)
    api.mock.get(INVITE_URL, [failure(503, "busy"), ok_invite()])
    client.stop.set("interrupted")

    fails(ex.ServerError, client.get_invite, "inv_8f2k1")

    assert len(api.calls) == 1


# -- https ------------------------------------------------------------------------


def test_api_client_refuses_plain_http_before_sending_anything(api: Api) -> None:
    error = fails(ConfigError, api.client, base_url="http://api.example.com")
    assert "https://" in str(error) and SECRET not in str(error)
    assert not api.mock.request_history
    # On the loopback, plain HTTP is the sandbox's address.
    client = api.client(base_url="http://127.0.0.1:8765")
    api.mock.post("http://127.0.0.1:8765/oauth/token", [token_response()])
    api.mock.get("http://127.0.0.1:8765/public-api/v1/kyb/invites/inv_8f2k1", **ok_invite())
    assert client.get_invite("inv_8f2k1").is_pending


def test_missing_credentials_name_the_env_vars() -> None:
    error = fails(ConfigError, ApiClient, Settings(base_url=BASE, client_id=CLIENT_ID))
    assert "RECONCILER_CLIENT_SECRET" in str(error)


# -- secrets ------------------------------------------------------------------------

SECRET_SCENARIOS: dict[str, tuple[Any, Any]] = {
    "token-401": ([failure(401, "invalid_client")], ok_invite()),
    "token-400": ([failure(400, "invalid_request")], ok_invite()),
    "token-500": ([failure(500, "token service down")], ok_invite()),
    "token-html": ([{"status_code": 200, "text": "<html>login</html>"}], ok_invite()),
    "token-connection-error": (
        [{"exc": requests.exceptions.ConnectionError("Max retries exceeded")}], ok_invite()
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
}  # fmt: skip


@pytest.mark.parametrize("operation", ["get", "update", "resend"])
@pytest.mark.parametrize("scenario", list(SECRET_SCENARIOS))
def test_failures_never_reveal_secret_or_token(api: Api, scenario: str, operation: str) -> None:
    client, log = api.client(max_attempts=2), api.debug()
    tokens, answer = SECRET_SCENARIOS[scenario]
    api.token(*tokens)
    answer_all(api, answer)

    error = fails(ex.ApiError, operate, client, operation)

    assert log.records  # logging was on, so the check below can fail
    api.assert_secrets_kept(error, client)


def test_a_refused_connection_says_what_to_check(api: Api) -> None:
    # What requests raises: its ConnectionError around urllib3's, around the OS's.
    cause = NewConnectionError(HTTPConnection("127.0.0.1"), "Failed to establish a new connection")
    cause.__cause__ = ConnectionRefusedError(111, "Connection refused")
    refused = requests.exceptions.ConnectionError(
        MaxRetryError(HTTPConnectionPool("127.0.0.1"), TOKEN_URL, cause)
    )
    api.mock.post(TOKEN_URL, exc=refused)
    message = str(fails(ex.TransportError, api.client(max_attempts=1).get_invite, "inv_8f2k1"))
    assert "could not connect to api.example.test" in message
    assert "RECONCILER_BASE_URL" in message


# -- what the server says is not taken on trust -------------------------------------


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
def test_a_redirected_token_request_is_not_followed(api: Api, status: int) -> None:
    api.mock.post(TOKEN_URL, status_code=status, headers={"Location": "http://evil.example:8080/x"})
    trap = api.mock.post("http://evil.example:8080/x", json={})
    get = api.mock.get(INVITE_URL, **ok_invite())

    text = str(fails(ex.AuthenticationFailed, api.client().get_invite, "inv_8f2k1"))

    assert not trap.called and not get.called
    assert len(api.tokens) == 1  # a redirect is not retried either
    assert f"HTTP {status}" in text and "evil.example:8080" in text
    assert "not followed" in text


@pytest.mark.parametrize("method", ["GET", "PATCH", "POST"])
def test_a_redirected_invite_request_is_a_per_invite_error(api: Api, method: str) -> None:
    location = {"Location": "https://other.example/\x1b]0;pwned\x07"}
    error = run(api, method, {"status_code": 302, "headers": location}, error=ex.Redirected)

    assert len(api.calls) == 1
    assert "other.example" in str(error) and "\x1b" not in str(error)
    assert not error.outcome_unknown


LYING = {**envelope(INVITE, message="could not process", request_id="4711"), "success": False}
FIELD_PROBLEMS = envelope(
    {"phoneNumber": "unknown field"}, status=400, message="invalid invite update"
)


@pytest.mark.parametrize(
    ("operation", "answer", "error", "said", "sent"),
    [
        # A GET answered about another invite names both ids.
        ("get", ok_invite({**INVITE, "id": "inv_SOMEONE_ELSE"}), ex.WrongInvite,
         ["inv_8f2k1", "inv_SOMEONE_ELSE"], 1),
        ("get", ok_invite({k: v for k, v in INVITE.items() if k != "id"}), ex.WrongInvite,
         ["inv_8f2k1", "no id"], 1),
        # An unusable success body on a GET is an API error.
        ("get", {"status_code": 200, "text": "<html>maintenance</html>",
                 "headers": {"Content-Type": "text/html"}}, ex.ApiError, ["inv_8f2k1"], None),
        ("get", {"status_code": 200, "content": b""}, ex.ApiError, ["inv_8f2k1"], None),
        ("get", {"status_code": 200, "json": {"data": "not an invite"}}, ex.ApiError, ["inv_8f2k1"],
         None),
        ("get", {"status_code": 200, "json": ["a", "list"]}, ex.ApiError, ["inv_8f2k1"], None),
        # The server's per-field problems are part of the error.
        ("update", {"status_code": 400, "json": FIELD_PROBLEMS}, ex.InvalidRequest,
         ["invalid invite update [phoneNumber: unknown field]"], None),
        # success: false is a failure whatever the status.
        *((operation, {"json": LYING}, ex.EnvelopeFailure,
           ["success: false", "could not process", "4711"], 1)
          for operation in ("get", "update", "resend")),
    ],
    ids=["another-invite", "no-id", "html", "empty", "not-an-invite", "a-list", "field-problems",
         "success-false-get", "success-false-update", "success-false-resend"],
)  # fmt: skip
def test_an_answer_that_is_no_success_says_what_came_back(
    api, operation, answer, error, said, sent
):
    text = str(run(api, operation, answer, error=error))

    assert all(part in text for part in said)
    assert sent is None or len(api.calls) == sent


def test_retry_after_past_the_budget_gives_up_at_once_saying_so(api: Api) -> None:
    client = api.client(token=True)
    api.mock.get(INVITE_URL, **failure(429, "slow down", headers={"Retry-After": "100000"}))
    start = api.time.now

    error = fails(ex.RateLimited, client.get_invite, "inv_8f2k1")

    assert api.time.now - start < 0.5  # no wait beyond the first turns' spacing
    assert len(api.calls) == 1
    assert (
        "(gave up after 1 attempt: the server asked to wait 100000 s, more than the 60 s left "
        "of retry_max_seconds)"
    ) in str(error)
    # Every other request of the run is refused at once too, rather than wait.
    waited = api.time.now
    other = fails(ex.RateLimited, client.write_invite, "inv_8f2k1", {"name": "X"})
    assert str(other) == (
        "not sent: the server asked that no request start for another "
        "100000 s, more than the 60 s left of this request's retry budget "
        "(retry_max_seconds: 60)"
    )
    assert len(api.calls) == 1 and api.time.now == waited


def test_an_http_date_retry_after_is_understood(api: Api) -> None:
    when = email.utils.format_datetime(
        datetime.datetime.now(datetime.UTC) + datetime.timedelta(days=2), usegmt=True
    )
    answer = failure(503, "maintenance", headers={"Retry-After": when})
    error = run(api, "get", answer, error=ex.ServerError)

    assert error.retry_after is not None and error.retry_after > 86400
    assert "the server asked to wait" in str(error)
    assert len(api.calls) == 1


LARGE = b'{"data": "' + b"x" * 100_000 + b'"}'
# 20 MB of JSON squeezed into ~20 KB: the cap is on what it unpacks to.
BOMB = gzip.compress(b'{"data": "' + b"0" * 20_000_000 + b'"}', compresslevel=9)


@pytest.mark.parametrize(
    ("cap", "answer"),
    [
        (4096, {"content": LARGE}),
        (4096, {"content": LARGE, "headers": {"Content-Length": ""}}),
        (1024 * 1024, {"content": BOMB, "headers": {"Content-Encoding": "gzip"}}),
    ],
    ids=["content-length", "streamed", "compressed"],
)  # fmt: skip
def test_an_answer_past_the_size_cap_is_a_clear_error(api: Api, cap: int, answer) -> None:
    assert len(BOMB) < 1024 * 1024
    text = str(run(api, "get", answer, error=ex.AnswerTooLarge, max_response_bytes=cap))

    assert "max_response_bytes" in text and f"{cap:,} bytes" in text
    assert len(api.calls) == 1  # not retried: it would be as large again


@pytest.mark.parametrize(
    ("token", "why"),
    [
        ("", "it is empty"), ("tokABC\r\nX-Injected: 1", "it holds a line break"),
        ("tokABC\nDEF", "it holds a line break"), ("tokABC DEF", "it holds whitespace"),
        ("\ttokABCDEF", "it holds whitespace"), ("tokABC\x00DEF", "it holds a control character"),
        ("tökén-€ABC", "it holds U+00F6, a character outside ASCII"),
        ("tokABC\u20acDEF", "it holds U+20AC, a character outside ASCII"),
    ],
    ids=["empty", "crlf", "lf", "space", "tab", "nul", "latin-1", "non-latin-1"],
)  # fmt: skip
@pytest.mark.parametrize("operation", ["get", "resend"])
def test_a_token_http_cannot_carry_is_refused_at_the_token_step_saying_why(
    api: Api, token: str, why: str, operation: str
) -> None:
    client = api.client()
    api.token(token_response(token))
    get = api.mock.get(INVITE_URL, **ok_invite())
    resend = api.mock.post(RESEND_URL, json=envelope(None))

    for _ in range(2):  # a second call does not ask for another token
        error = fails(ex.AuthenticationFailed, operate, client, operation)
        assert not error.outcome_unknown  # the re-send surely never left
        assert (
            "the token endpoint issued an access token that cannot be sent in an HTTP header "
            f"({why}); it was not used, so no request was sent with it"
        ) in str(error)
        if token:
            assert "tokABC" not in str(error) and "tökén" not in str(error)

    assert not get.called and not resend.called
    assert len(api.tokens) == 1


def test_the_echoed_form_and_authorization_header_are_redacted(api: Api) -> None:
    secret = "cs+live/SECRET&value=42"  # changes when form-encoded
    client = api.client(client_secret=secret, max_attempts=1)
    echo_form = {
        "status_code": 401,
        "json": lambda request, context: envelope(
            None, status=401, message=f"invalid client: {request.text}"
        ),
    }
    api.token(token_response(TOKEN), echo_form)
    echo_header = lambda request, context: envelope(  # noqa: E731
        {"authorization": request.headers["Authorization"]},
        status=400,
        message=f"bad header Authorization: {request.headers['Authorization']}",
    )
    api.mock.get(INVITE_URL, status_code=400, json=echo_header)

    echoed = fails(ex.InvalidRequest, client.get_invite, "inv_8f2k1")
    tokens = client._tokens
    # The next token request is answered with the echo.
    refused = fails(ex.AuthenticationFailed, tokens.renew, tokens.current())

    for error in (echoed, refused):
        text = f"{error} {error.message} {error.details}"
        for leaked in (secret, quote_plus(secret), TOKEN, TOKEN.split(".")[1]):
            assert leaked not in text
        assert "[redacted]" in text


def test_the_observer_hears_of_every_attempt_of_an_invite_operation(api: Api) -> None:
    heard: list[tuple[float, int | None]] = []
    observer = {"observer": lambda seconds, status: heard.append((seconds, status))}
    client = api.client(token=True, kw=observer)
    failures = [failure(503, "busy"), {"exc": requests.exceptions.ReadTimeout}, ok_invite()]
    api.mock.get(INVITE_URL, failures)

    client.get_invite("inv_8f2k1")

    assert [status for _, status in heard] == [503, None, 200]  # the token request is not one
    assert all(seconds >= 0 for seconds, _ in heard)


def test_a_failing_request_observer_is_logged_and_the_request_still_succeeds(api: Api) -> None:
    def broken_observer(seconds: float, status: int | None) -> None:
        raise ValueError("the progress display broke")

    log = api.debug()
    api.mock.get(INVITE_URL, **ok_invite())
    client = api.client(token=True, kw={"observer": broken_observer})
    assert client.get_invite("inv_8f2k1").fields["name"] == "Acme Holdings Ltd"

    (record,) = [r for r in log.records if "observer" in r.getMessage()]
    assert record.getMessage() == "the request observer failed"
    assert record.exc_info and isinstance(record.exc_info[1], ValueError)


# -- the --verbose log ----------------------------------------------------------


def test_the_verbose_log_tells_each_attempt_its_outcome_and_each_retry_and_no_secret(
    api: Api, half_jitter
) -> None:
    # Unpaced: the renewal's own turn would count in the attempt's time (pacing has
    # its own tests, test_pacing.py).
    unpaced = RequestPacer(api.time.clock, api.time.sleep, start_rate=rate.MAX_RATE)
    client, log = api.client(kw={"pacer": unpaced}), api.debug()
    api.token(token_response(), token_response(TOKEN2, expires_in=600))
    api.mock.get(
        INVITE_URL,
        [failure(503, "Service Unavailable", request_id="5031"), failure(401, "expired"),
         ok_invite(request_id="2002")],
    )  # fmt: skip
    api.mock.patch(INVITE_URL, json=envelope(INVITE))
    api.mock.post(RESEND_URL, json=envelope(None))

    client.get_invite("inv_8f2k1")
    client.write_invite("inv_8f2k1", {"email": "a@b.example"})
    client.resend_invite("inv_8f2k1")

    assert [r.getMessage() for r in log.records] == [
        "POST /oauth/token -> 201 (0 ms, requestId 1001)",
        "obtained an access token, used for 86400s",
        f"GET {PATH} -> 503 (0 ms, requestId 5031)",
        f"GET {PATH} failed (HTTP 503: Service Unavailable (requestId 5031)); retry 1 in 0.25s",
        "GET -> 401, renewing the token and retrying once",
        "POST /oauth/token -> 201 (0 ms, requestId 1001)",
        "obtained an access token, used for 600s",
        f"GET {PATH} -> 200 (0 ms, requestId 2002)",
        f"PATCH {PATH} -> 200 (0 ms, requestId 1001)",
        f"POST {PATH}/resend -> 200 (0 ms, requestId 1001)",
    ]
    api.assert_no_secrets(log.text, repr(client), repr(client.settings))
    api.assert_no_secrets(*(request.url for request in api.mock.request_history))
    # The secret travels only in the token request's form body, never to the API.
    for request in api.calls:
        assert SECRET not in (request.text or "") and SECRET not in str(request.headers)


def test_the_verbose_log_names_a_failure_without_an_answer_by_its_kind_and_its_time(api: Api):
    client, log = api.client(token=True, max_attempts=1, max_response_bytes=1000), api.debug()
    api.mock.get(INVITE_URL, exc=requests.exceptions.ConnectionError("reset"))
    fails(ex.TransportError, client.get_invite, "inv_8f2k1")
    huge = {"status_code": 200, "content": b"x" * 5000, "headers": {"X-Request-Id": "big-1"}}
    api.mock.get(INVITE_URL, **huge)
    fails(ex.AnswerTooLarge, client.get_invite, "inv_8f2k1")

    def slow_answer(request: Any, context: Any) -> dict[str, Any]:
        api.time.now += 1.25  # the server took a second and a quarter
        return envelope(INVITE, request_id="2502")

    api.mock.get(INVITE_URL, json=slow_answer)
    client.get_invite("inv_8f2k1")

    assert [r.getMessage() for r in log.records if r.getMessage().startswith("GET")] == [
        f"GET {PATH} -> TransportError (0 ms, requestId -)",
        f"GET {PATH} -> 200 (0 ms, requestId -)",  # cut off before its requestId was read
        f"GET {PATH} -> 200 (1250 ms, requestId 2502)",
    ]


# -- the retry loop's edges -----------------------------------------------------


@pytest.mark.parametrize("retried", ["invite", "token"])
def test_a_retry_is_given_only_what_is_left_of_the_retry_budget(api: Api, half_jitter, retried):
    client = api.client(timeout=30, retry_max_seconds=10)
    busy = failure(503, "busy")
    api.token(*[busy] * (retried == "token"), token_response())
    api.mock.get(INVITE_URL, [busy] * 2 * (retried == "invite") + [ok_invite()])

    client.get_invite("inv_8f2k1")

    timeouts = [call.timeout for call in (api.tokens if retried == "token" else api.calls)]
    assert timeouts[0][1] == 30  # the first attempt: the whole timeout
    assert timeouts[1][1] == pytest.approx(10 - 0.25)  # then what the budget has left
    if retried == "invite":
        assert timeouts[2][1] == pytest.approx(10 - 0.25 - 0.5)
    assert all(connect <= read for connect, read in timeouts)


@pytest.mark.parametrize("token_fetched", [False, True])
def test_a_request_waiting_for_its_turn_when_the_run_stops_is_not_sent(api: Api, token_fetched):
    api.mock.get(INVITE_URL, **ok_invite())
    client = api.client(token=True)
    if token_fetched:
        client.get_invite("inv_8f2k1")
    # The server's 429 asked for a pause.
    client.pacer.on_answer(client.pacer.wait_turn(), 0.0, refused=True, retry_after=30.0)
    client.stop.set("interrupted")

    error = fails(ex.NotSent, client.get_invite, "inv_8f2k1")

    assert str(error) == "not sent: the run is stopping"
    assert not error.outcome_unknown
    # Not even a token request when none was fetched before.
    assert len(api.mock.request_history) == (2 if token_fetched else 0)


def test_every_request_says_who_sends_it_and_asks_for_uncompressed_json(api: Api) -> None:
    run(api, "get", ok_invite())

    for request in api.mock.request_history:  # the token request too
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
SCOPE_403 = envelope({"scope": "not granted"}, status=403, message="scope not granted",
                     request_id="403-1")  # fmt: skip


@pytest.mark.parametrize(
    ("answer", "said", "details"),
    [
        # The envelope's per-field problems, kept.
        ({"status_code": 403, "json": SCOPE_403}, TOKEN_403, {"scope": "not granted"}),
        ({"status_code": 307, "headers": {"Location": "https://login.example/"}}, TOKEN_307, None),
    ],
    ids=["refused", "redirected"],
)
def test_a_token_endpoint_that_gives_no_token_says_what_to_check(api: Api, answer, said, details):
    client = api.client(scope="invites:write")
    api.mock.post(TOKEN_URL, **answer)

    error = fails(ex.AuthenticationFailed, client.get_invite, "inv_8f2k1")

    assert (str(error), error.details) == (said, details)
    assert api.calls == []
