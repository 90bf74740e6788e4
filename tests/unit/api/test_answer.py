"""Reading an answer's body never waits past the attempt's deadline: not when the
server drips it a byte at a time, not when it stops sending part way. Real
sockets on 127.0.0.1; the read timeout is far longer than the deadline, so only
the deadline can end these reads in time."""

from __future__ import annotations

import gzip
import json
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from support.api_answers import INVITE, INVITE_URL, envelope
from support.loopback import serving

from reconciler.api.client import ApiClient
from reconciler.api.exceptions import (
    AnswerTooLarge,
    ApiError,
    EnvelopeFailure,
    InvalidRequest,
    RateLimited,
    Redirected,
    ServerError,
    TransportError,
    UnexpectedResponse,
)
from reconciler.api.exchange import GuardedAdapter, Limits, read_body
from reconciler.api.network import make_session
from unit.api.conftest import SECRET, Api, fails

HEADERS = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n"
READ_TIMEOUT = 8.0
BODY = json.dumps({"data": {"id": "inv_1"}}).encode()


def body_read(session: Any, url: str, seconds: float) -> tuple[Any, bytearray]:
    """A GET of ``url`` and its body, read within ``seconds``."""
    response = session.get(url, stream=True, timeout=(5, READ_TIMEOUT))
    limits = Limits(time.monotonic() + seconds, 10**6, time.monotonic, "127.0.0.1", seconds)
    return response, read_body(response, limits)


def test_a_body_that_stops_arriving_fails_at_the_deadline_not_the_read_timeout() -> None:
    def stop_after_ten_bytes(conn: socket.socket, done: threading.Event) -> None:
        with conn:
            conn.recv(65536)
            conn.sendall(HEADERS + b'{"data": {')
            done.wait(READ_TIMEOUT + 2)

    with serving(stop_after_ten_bytes) as address:
        url = f"http://{address}/v1/invites/inv_1"
        started = time.monotonic()
        error = fails(TransportError, body_read, make_session(url, GuardedAdapter()), url, 0.2)
        took = time.monotonic() - started
    assert 0.2 <= took < 2.5, f"waited {took:.1f}s for a 0.2s deadline"
    assert str(error) == "no complete answer from 127.0.0.1 within 0.2s (HTTP 200, 10 bytes so far)"
    assert error.maybe_sent


@pytest.mark.parametrize("coding", [None, "gzip"])
def test_a_body_of_its_declared_length_is_whole_and_its_connection_kept(coding) -> None:
    # With a content coding, it is read to its end too.
    sent = gzip.compress(BODY) if coding else BODY
    head = f"Content-Encoding: {coding}\r\n" if coding else ""
    answer = f"HTTP/1.1 200 OK\r\n{head}Content-Length: {len(sent)}\r\n\r\n".encode() + sent
    connections: list[socket.socket] = []

    def keep_alive(conn: socket.socket, done: threading.Event) -> None:
        connections.append(conn)
        with conn:
            for _ in range(2):
                conn.recv(65536)
                conn.sendall(answer)
            done.wait(5)

    with serving(keep_alive) as address:
        url = f"http://{address}/v1/invites/inv_1"
        session = make_session(url, GuardedAdapter())
        for _ in range(2):
            response, body = body_read(session, url, 5)
            assert body == BODY
            assert response.raw.connection is None  # back in the pool, not closed
            response.close()

    assert len(connections) == 1


# What a user is told about a server's failure answer: the server's words where it
# gave some, a description of the body where it did not, always bounded in length,
# with the status and requestId that support will ask for.
@pytest.fixture
def client(api: Api) -> ApiClient:
    # A 429 is not counted against max_attempts: retry_max_seconds ends it.
    return api.client(True, None, max_attempts=1, retry_max_seconds=1, max_response_bytes=65536)


@pytest.fixture
def shown(api: Api, client: ApiClient) -> Callable[..., ApiError]:
    """The error a GET answered with ``answer`` (requests-mock's words) ends in."""

    def failure_shown(**answer: Any) -> ApiError:
        api.mock.get(INVITE_URL, **answer)
        return fails(ApiError, client.get_invite, "inv_8f2k1")

    return failure_shown


@pytest.mark.parametrize(
    ("answer", "kept"),
    [
        ({"status_code": 502, "content": b"x" * 100_000, "headers": {"X-Request-Id": "r\x1b-7"}},
         ("AnswerTooLarge", 502, "r\\x1b-7")),
        ({"status_code": 200, "content": b"x" * 100_000}, ("AnswerTooLarge", 200, None)),
        ({"status_code": 403, "text": "denied", "headers": {"X-Request-Id": "edge-1"}},
         ("PermissionDenied", 403, "edge-1")),  # from the header when the body has none
        # A requestId that is not a value is none.
        ({"status_code": 400, "json": {**envelope(None), "metadata": {"requestId": {"x": 1}}}},
         ("InvalidRequest", 400, None)),
        # A 300 is a redirect too.
        ({"status_code": 300, "headers": {"Location": "https://b.example/", "X-Request-Id": "r-3"}},
         ("Redirected", 300, "r-3")),
        ({"status_code": 200, "json": {**envelope(None, request_id="r-env"), "success": False}},
         ("EnvelopeFailure", 200, "r-env")),
    ],
    ids=["oversized", "oversized-no-id", "id-header", "id-not-a-value", "300", "success-false"],
)  # fmt: skip
def test_an_error_keeps_its_status_and_request_id_escaped_or_none(shown, answer, kept) -> None:
    error = shown(**answer)
    assert (type(error).__name__, error.status, error.request_id) == kept
    if kept[2] is None:
        assert "requestId" not in str(error)
    if kept[0] == "AnswerTooLarge":
        assert str(error).startswith(f"HTTP {kept[1]}: the answer from api.example.test is larger")


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        # success: false shows the server's message when it gave one
        ({"status_code": 200, "json": {**envelope(None), "success": False,
                                       "message": "invite is locked"}},
         "the envelope says success: false (invite is locked); treated as a failure"),
        ({"status_code": 200, "json": {**envelope(None), "success": False, "message": ""}},
         "the envelope says success: false; treated as a failure"),
        ({"status_code": 200, "json": {**envelope(None), "success": "no-no-no-no-no-no-no-no",
                                       "message": ""}},
         'the envelope says success: "no-no-no-no-no-no-n; treated as a failure'),
        # A long server message is cut at 500 characters.
        ({"status_code": 400, "json": envelope(None, message="x" * 500)}, "x" * 500),
        ({"status_code": 400, "json": envelope(None, message="y" * 501)}, "y" * 500 + "…"),
        # A failure without the envelope describes the body.
        ({"status_code": 400, "content": b"", "reason": "Bad Gateway"}, "Bad Gateway (empty body)"),
        ({"status_code": 400, "content": b"", "reason": ""}, "error (empty body)"),
        ({"status_code": 400, "text": "<html>down</html>", "reason": "OK",
          "headers": {"Content-Type": "text/html; charset=utf-8"}},
         "OK (an HTML page, probably from a proxy or gateway)"),
        ({"status_code": 400, "text": "upstream timed out", "reason": "OK",
          "headers": {"Content-Type": "text/plain; charset=utf-8"}},
         "OK (body is not the API's JSON envelope: text/plain)"),
        ({"status_code": 400, "content": b"\x00\x01", "reason": "OK",
          "headers": {"Content-Type": ""}},
         "OK (body is not the API's JSON envelope: unknown type)"),
        ({"status_code": 400, "content": b"\x00\x01", "reason": "OK"},  # no Content-Type at all
         "OK (body is not the API's JSON envelope: unknown type)"),
        ({"status_code": 400, "text": "x", "headers": {"Content-Type": "a" * 100},
          "reason": "R" * 100},
         "R" * 80 + " (body is not the API's JSON envelope: " + "a" * 80 + ")"),
    ],
    ids=["success-false-said", "success-false", "success-not-a-bool", "500-characters",
         "501-characters", "empty", "empty-no-reason", "html", "plain-text", "empty-type",
         "no-type", "long-type-and-reason"],
)  # fmt: skip
def test_the_message_shown_is_the_servers_bounded_or_describes_the_body(shown, answer, message):
    assert shown(**answer).message == message


def test_per_field_problems_are_kept_bounded(shown) -> None:
    data = {f"field{i:02d}" + "k" * 120: "v" * 300 for i in range(25)}
    error = shown(status_code=400, json=envelope(data, status=400, message="validation failed"))
    assert len(error.details) == 20
    key, value = next(iter(error.details.items()))
    assert (key, value) == (("field00" + "k" * 120)[:100], "v" * 200)


@pytest.mark.parametrize(("header", "wait"), [("0", 0.0), ("7", 7.0), ("-5", None), ("soon", None)])
def test_retry_after_is_read_as_a_wait_or_ignored_when_unreadable(shown, header, wait) -> None:
    refused = envelope(None, status=429, message="slow down")
    assert shown(status_code=429, headers={"Retry-After": header}, json=refused).retry_after == wait


@pytest.mark.parametrize(
    ("location", "where"),
    [
        ("https://user:pw@evil.example:8443/x?token=abc", "evil.example:8443"),
        ("https://evil.example/x", "evil.example"),
        ("/public-api/v2/kyb/invites/inv_8f2k1", "the same host"),
        ("http://[::1/x", "an unreadable address"),
        (None, "nowhere (no Location header)"),
    ],
)
def test_a_redirect_names_only_the_host_it_points_to(api: Api, shown, location, where) -> None:
    headers = {"Location": location} if location is not None else {}
    assert shown(status_code=307, headers=headers, text="").message == (
        f"the server answered with a redirect to {where}; the API never redirects, "
        "so it was not followed and nothing was re-sent there"
    )
    assert len(api.mock.request_history) == 2  # the token, the one request


def padded_to(size: int) -> bytes:
    body = json.dumps(envelope(INVITE)).encode()
    return body + b" " * (size - len(body))


@pytest.mark.parametrize(
    ("headers", "detail"),
    [({"Content-Length": "65537"}, "it announced 65,537 bytes"),
     ({"Content-Length": ""}, "stopped reading there")],
    ids=["content-length", "streamed"],
)  # fmt: skip
def test_an_answer_of_exactly_the_cap_is_read_and_one_byte_more_says_how_it_was_found(
    api: Api, client: ApiClient, shown, headers: dict[str, str], detail: str
) -> None:
    exactly = {"Content-Length": "65536" if headers["Content-Length"] else ""}
    api.mock.get(INVITE_URL, content=padded_to(65536), headers=exactly)
    assert client.get_invite("inv_8f2k1").fields["name"] == INVITE["name"]
    assert shown(status_code=200, content=padded_to(65537), headers=headers).message == (
        "the answer from api.example.test is larger than max_response_bytes "
        f"(65,536 bytes; {detail}); API answers are a few KiB"
    )


HTML = {"Content-Type": "text/html"}


@pytest.mark.parametrize(
    ("page", "title"),
    [
        ("<html><head><title>400 No required SSL certificate was sent</title></head>"
         "<body><center><h1>400 Bad Request</h1></center><hr><center>nginx</center>",
         "No required SSL certificate was sent"),  # its status is said already
        ("<TITLE lang=en>\n  Access\tDenied &amp; logged \n</TITLE>", "Access Denied & logged"),
        ("<title>\x1b]0;owned\x07" + "T" * 500 + "</title>",
         "\\x1b]0;owned\\x07" + "T" * 104 + "…"),
        ("<title></title><h1>no title</h1>", "Bad Request"),
        ("<p>" + "x" * 20000 + "<title>too far down</title>", "Bad Request"),
        ("<title>" + "a" * 40000, "Bad Request"),  # never closed
        ("<title" * 9000, "Bad Request"),  # no pattern to backtrack over
    ],
    ids=["nginx-mtls", "entities-whitespace", "controls-bounded", "empty-title", "too-far-down",
         "unterminated", "title-repeated"],
)  # fmt: skip
def test_an_html_error_page_is_shown_by_its_title(shown, page: str, title: str) -> None:
    error = shown(status_code=400, reason="Bad Request", text=page, headers=HTML)
    assert error.message.startswith(title)
    assert error.message.endswith(" (an HTML page, probably from a proxy or gateway)")
    assert error.request_id is None


def test_a_413_says_the_body_was_too_large_and_is_not_retried(api: Api) -> None:
    page = "<html><head><title>413 Request Entity Too Large</title></head></html>"
    patch = api.mock.patch(
        INVITE_URL, status_code=413, reason="Request Entity Too Large", text=page, headers=HTML
    )
    client = api.client(True, None, client_id="ci", client_secret="cs_live_Zq9xSECRET")
    error = fails(ApiError, client.write_invite, "inv_8f2k1", {"name": "Acme"})
    assert str(error) == (
        "HTTP 413: the request body (16 bytes) was refused as too large, by the server or a "
        "proxy or gateway in front of it: Request Entity Too Large (an HTML page, "
        "probably from a proxy or gateway)"
    )
    assert patch.call_count == 1  # the same body is as large the next time


# Whether a write answered this way may have been carried out (docs/api-contract.md).
@pytest.mark.parametrize(
    ("error", "unknown"),
    [
        (ServerError("bad gateway", status=502, enveloped=True), True),
        (ServerError("gateway timeout", status=504), True),
        (ServerError("an HTML page", status=500), True),
        (ServerError("platform fault", status=500, enveloped=True), False),
        (ServerError("unavailable", status=503, enveloped=True), False),
        (UnexpectedResponse("unreadable", status=200), True),
        (UnexpectedResponse("teapot", status=418), False),
        (EnvelopeFailure("success: false", status=200, enveloped=True), False),
        (EnvelopeFailure('success: "true"', status=200), True),
        (Redirected("moved", status=307), False),
        (AnswerTooLarge("too large", status=200), True),
        (AnswerTooLarge("too large", status=502), True),
        (AnswerTooLarge("too large", status=404), False),
        (InvalidRequest("bad body", status=400, enveloped=True), False),
        # A failure status whose envelope says success: it contradicts itself.
        (ServerError("ok", status=503, enveloped=True, said_success=True), True),
        (RateLimited("ok", status=429, enveloped=True, said_success=True), True),
    ],
    ids=lambda v: (
        repr(v)
        if isinstance(v, bool)
        else f"{type(v).__name__}-{v.status}{'-said-success' if v.said_success else ''}"
    ),
)
def test_a_write_is_unknown_when_the_platform_may_have_done_it(error: ApiError, unknown: bool):
    assert error.outcome_unknown is unknown


def test_a_gateway_title_cut_short_never_shows_the_start_of_the_secret(shown) -> None:
    # Spaces collapse after the cut: 1,000 of them and the secret made its first 24
    # characters the whole title, which redaction (whole secrets only) let through.
    page = "<html><title>" + " " * 1010 + SECRET + "</title></html>"
    message = shown(status_code=502, text=page, headers={"Content-Type": "text/html"}).message
    assert SECRET[:6] not in message and "SECRET" not in message


@pytest.mark.parametrize("status", [429, 503])
def test_a_refusal_whose_envelope_says_success_is_not_a_refusal(api: Api, client, status) -> None:
    # A re-send refused before acting is sent again; one whose answer also says it
    # succeeded may have gone out, so it is never sent again.
    api.mock.post(INVITE_URL + "/resend", status_code=status, json=envelope(None))
    error = fails(ApiError, client.resend_invite, "inv_8f2k1")
    assert error.outcome_unknown
    assert not error.refused_before_acting
    assert "yet its envelope says success: true" in error.message
    assert api.mock.call_count == 2  # the token, then the one re-send
