"""The one place that reads an answer: bounded in size and time, parsed once,
checked against the envelope, and turned into an error chosen by status.

Every string taken from the server (message, per-field problems, requestId,
a redirect's host) is redacted and escaped
(``safetext.redact_and_escape``) before it is kept.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any, NamedTuple

import requests
from urllib3.exceptions import ReadTimeoutError

from reconciler.api.exceptions import (
    AnswerTooLarge,
    ApiError,
    TransportError,
)
from reconciler.api.http.answer_error import error_for
from reconciler.safetext import redact_and_escape

_CHUNK = 64 * 1024
_MAX_REQUEST_ID = 100
# A strong entity tag as RFC 9110 writes one, bounded: sent back as it came. A weak one
# (W/"...", what nginx makes of an ETag when it compresses) is left out: If-Match compares
# strongly (RFC 9110 §13.1.1), so a server refuses every PATCH carrying one with 412.
_ETAG = re.compile(r'"[\x21\x23-\x7e\x80-\xff]{0,200}"')


class Answer(NamedTuple):
    """A complete answer: its status, JSON body (None if not JSON) and requestId."""

    status: int
    body: Any
    request_id: str | None
    error: ApiError | None  # None when the answer says the operation succeeded
    # The answer's ETag header, strong and bounded: sent back as If-Match by a PATCH after
    # this GET.
    etag: str | None = None

    @property
    def data(self) -> Any:
        """The envelope's ``data``, or the whole body when it is not an envelope."""
        if isinstance(self.body, dict) and "data" in self.body:
            return self.body["data"]
        return self.body


class Limits(NamedTuple):
    deadline: float  # clock time by which the whole answer must have arrived
    max_bytes: int
    clock: Callable[[], float]
    host: str
    timeout: float  # the attempt's time allowance, for messages


def read_answer(response: requests.Response, limits: Limits) -> Answer:
    """Read ``response`` (sent with stream=True) whole, within ``limits``."""
    raw = read_body(response, limits)
    body = _parse_json(raw)
    request_id = _request_id(body, response)
    error = error_for(response, body, raw, request_id)
    etag = response.headers.get("ETag")
    if etag is not None and not _ETAG.fullmatch(etag):
        etag = None  # weak, or not a header value we could send back as it is
    return Answer(response.status_code, body, request_id, error, etag)


def read_body(response: requests.Response, limits: Limits) -> bytearray:
    """The body, or an error once it passes ``max_bytes`` or the deadline."""
    declared = response.headers.get("Content-Length", "")
    if declared.isdigit() and int(declared) > limits.max_bytes:
        raise _too_large(response, limits, f"it announced {int(declared):,} bytes")
    received = bytearray()
    raw = response.raw
    # Without a content coding there is nothing to decode (urllib3's decoding would
    # hand the bytes through), and the body is whole once the length it declared has
    # come: urllib3 gives the connection back with the last bytes, and one more read
    # would only say so. With one, the decoder may still hold some of it until then.
    coded = "Content-Encoding" in response.headers
    while True:
        left = limits.deadline - limits.clock()
        if left <= 0:
            raise _incomplete(response, limits, received)
        _shorten_socket_timeout(raw, left)
        # read1 returns what has arrived instead of waiting for a full chunk,
        # so a body dripped a byte at a time still meets the deadline check.
        try:
            chunk = raw.read1(_CHUNK, decode_content=coded)
        except ReadTimeoutError:  # the socket waited for all the time that was left
            raise _incomplete(response, limits, received) from None
        if not chunk:
            return received
        received += chunk
        if len(received) > limits.max_bytes:
            raise _too_large(response, limits, "stopped reading there")
        if not coded and getattr(raw, "length_remaining", None) == 0:
            return received


def _incomplete(response: requests.Response, limits: Limits, received: bytearray) -> TransportError:
    return TransportError(
        f"no complete answer from {limits.host} within {limits.timeout:g}s "
        f"(HTTP {response.status_code}, {len(received):,} bytes so far)",
        maybe_sent=True,
    )


def _shorten_socket_timeout(raw: Any, left: float) -> None:
    """No single read may wait past the attempt's deadline."""
    sock = getattr(getattr(raw, "connection", None), "sock", None)
    if sock is not None:
        sock.settimeout(max(left, 0.001))


def _too_large(response: requests.Response, limits: Limits, detail: str) -> AnswerTooLarge:
    return AnswerTooLarge(
        f"the answer from {limits.host} is larger than max_response_bytes "
        f"({limits.max_bytes:,} bytes; {detail}); API answers are a few KiB",
        status=response.status_code,
        request_id=redact_and_escape(response.headers.get("X-Request-Id", ""))[:_MAX_REQUEST_ID]
        or None,
    )


def _parse_json(raw: bytearray) -> Any:
    if not raw:
        return None
    try:
        return json.loads(raw)
    except (ValueError, RecursionError):  # not JSON, not UTF-8, or nested past all reason
        return None


def _request_id(body: Any, response: requests.Response) -> str | None:
    value: Any = None
    if isinstance(body, dict) and isinstance(body.get("metadata"), dict):
        value = body["metadata"].get("requestId")
    if value is None:
        value = response.headers.get("X-Request-Id")
    if value is None or isinstance(value, dict | list):
        return None
    return redact_and_escape(str(value))[:_MAX_REQUEST_ID] or None
