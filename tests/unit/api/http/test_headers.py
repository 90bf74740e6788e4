"""An answer's header block parsed here is what http.client's own parser makes of it,
field for field, whatever the block; only plain ones take the quick way."""

from __future__ import annotations

import email.message
import http.client
import io
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from reconciler.api.http import headers
from reconciler.api.http.headers import LeanHeadersResponse, parse_headers

PLAIN = (
    b"Server: BaseHTTP/0.6 Python/3.11.7\r\n"
    b"Date: Wed, 26 Nov 2026 02:40:00 GMT\r\n"
    b"Content-Type: application/json; charset=utf-8\r\n"
    b"Content-Length: 560\r\n"
    b"X-Request-Id: 123456\r\n"
    b"\r\n"
)


def shape(message: Any) -> Any:
    """Everything a message holds, comparable between two parses."""
    if not isinstance(message, email.message.Message):
        return message
    fields = dict(vars(message))
    fields["defects"] = [(type(d).__name__, str(d)) for d in message.defects]
    payload = fields.pop("_payload")
    fields["_payload"] = [shape(p) for p in payload] if isinstance(payload, list) else payload
    return fields


def both(block: bytes) -> tuple[Any, Any]:
    """(ours, http.client's) for ``block`` followed by a body, and where each stopped."""
    ours, theirs = io.BytesIO(block + b"BODY"), io.BytesIO(block + b"BODY")
    mine = shape(parse_headers(ours)), ours.tell()
    stdlib = shape(http.client.parse_headers(theirs)), theirs.tell()
    return mine, stdlib


def test_plain_headers_take_the_quick_way_to_the_same_message(monkeypatch: Any) -> None:
    monkeypatch.setattr(headers, "_email_parsed", None)  # the email parser is never asked

    message = parse_headers(io.BytesIO(PLAIN))

    assert message["content-length"] == "560"
    monkeypatch.undo()
    assert both(PLAIN)[0] == both(PLAIN)[1]


@pytest.mark.parametrize(
    "block",
    [
        b"Content-Type: multipart/mixed; boundary=x\r\n\r\n",
        b"Content-Type: message/rfc822\r\n\r\n",
        b"Content-Type: Multipart/Mixed\r\n\r\n",
        b"X-Folded: one\r\n  two\r\n\r\n",
        b"From nobody\r\nX-A: b\r\n\r\n",
        b"no colon here\r\nX-A: b\r\n\r\n",
        b": no name\r\n\r\n",
        b"X-A: b\r\n",  # the answer ends before its blank line
        b"X-A: b\n\n",
        b"X-A: b\r\rX-B: c\r\n\r\n",
        b"X-A: caf\xc3\xa9\r\n\r\n",
        b"X-A:\r\n\r\n",
        b"X-A: b \t \r\n\r\n",
        b"X-A:\t\tb\r\n\r\n",
        b"\r\n",
    ],
)
def test_any_block_gives_what_http_client_gives(block: bytes) -> None:
    mine, stdlib = both(block)
    assert mine == stdlib


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.text(
            alphabet=st.sampled_from(list("Ab-_:;., \t\r\n/=\x00\x7f\xe9From")), max_size=20
        ).map(lambda line: (line + "\r\n").encode("latin-1")),
        max_size=6,
    )
)
@example([b"Content-Type: multipart/x\r\n"])
def test_random_blocks_give_what_http_client_gives(lines: list[bytes]) -> None:
    block = b"".join(lines) + b"\r\n"
    mine, stdlib = both(block)
    assert mine == stdlib


def test_http_clients_limits_hold() -> None:
    too_long = b"X-A: " + b"a" * 70_000 + b"\r\n\r\n"
    with pytest.raises(http.client.LineTooLong):
        parse_headers(io.BytesIO(too_long))
    too_many = b"X-A: b\r\n" * 101 + b"\r\n"
    with pytest.raises(http.client.HTTPException, match="more than 100 headers"):
        parse_headers(io.BytesIO(too_many))


def test_the_response_begins_as_http_clients_own() -> None:
    # The same code, only with this module's parse_headers.
    ours, theirs = LeanHeadersResponse.begin, http.client.HTTPResponse.begin
    assert ours.__code__ is theirs.__code__
    assert ours.__globals__["parse_headers"] is parse_headers
    assert ours.__globals__["CONTINUE"] == http.client.CONTINUE


_TOKEN = st.text(alphabet=st.sampled_from(list("!#$%&'*+.^_`|~09AZaz-")), min_size=1, max_size=8)
_VALUE = st.text(alphabet=st.sampled_from(list(' \t!"(),/:;<=>?@[]\\{}~09AZaz')), max_size=20)
_TYPES = st.sampled_from(["text/html", "Multipart/Form-Data; boundary=b", "message/http", "a/b/c"])


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.tuples(_TOKEN, _VALUE),
            st.tuples(st.just("Content-Type"), _TYPES.map(lambda kind: " " + kind)),
        ),
        max_size=8,
    )
)
def test_random_plain_blocks_give_what_http_client_gives(fields: list[tuple[str, str]]) -> None:
    block = b"".join(f"{name}:{value}\r\n".encode() for name, value in fields) + b"\r\n"
    mine, stdlib = both(block)
    assert mine == stdlib
