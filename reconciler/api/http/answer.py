"""The one place that reads an answer: bounded in size and time, parsed once,
checked against the envelope, and turned into the error its status calls for
(github3.py's way), with what the server said in words (its message, an error page's
title, an RFC 6750 challenge), its requestId, Retry-After and details.

Every string taken from the server (message, per-field problems, requestId,
a redirect's host) is redacted and escaped
(``safetext.redact_and_escape``) before it is kept, and bounded.
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Callable
from typing import Any, NamedTuple

import requests
from urllib3.exceptions import ReadTimeoutError
from urllib3.util.retry import Retry

from reconciler.api.exceptions import (
    AnswerTooLarge,
    ApiError,
    EnvelopeFailure,
    GatewayRefused,
    Redirected,
    TransportError,
    error_class_for,
)
from reconciler.api.http.auth import OAuthError
from reconciler.api.http.network import host_of
from reconciler.safetext import cut, redact_and_escape

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
    while True:
        left = limits.deadline - limits.clock()
        if left <= 0:
            raise _incomplete(response, limits, received)
        _shorten_socket_timeout(raw, left)
        # read1 returns what has arrived instead of waiting for a full chunk,
        # so a body dripped a byte at a time still meets the deadline check.
        try:
            chunk = raw.read1(_CHUNK, decode_content=True)
        except ReadTimeoutError:  # the socket waited for all the time that was left
            raise _incomplete(response, limits, received) from None
        if not chunk:
            return received
        received += chunk
        if len(received) > limits.max_bytes:
            raise _too_large(response, limits, "stopped reading there")


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


_MAX_MESSAGE = 500  # characters of a server's message worth showing


# urllib3 caps Retry-After at six hours by default; the real figure is what a user
# must see ("asked to wait 100000 s"), bounded only so it stays a number.
_RETRY_AFTER = Retry(retry_after_max=10**9)


def error_for(
    response: requests.Response, body: Any, raw: bytearray, request_id: str | None
) -> ApiError | None:
    """None for a success; otherwise the error class the status calls for."""
    status = response.status_code
    envelope = body if isinstance(body, dict) else {}
    if 300 <= status < 400:
        return _redirected(response, request_id)
    if 200 <= status < 300:
        if "success" not in envelope or envelope["success"] is True:
            return None
        return EnvelopeFailure(
            f"the envelope says success: {redact_and_escape(json.dumps(envelope['success']))[:20]}"
            f"{_said(envelope)}; treated as a failure",
            status=status,
            request_id=request_id,
            # Only `false` is the platform saying it failed; any other value is no envelope.
            enveloped=envelope["success"] is False,
        )
    return _refusal(response, envelope, raw, request_id)


def _redirected(response: requests.Response, request_id: str | None) -> Redirected:
    location = response.headers.get("Location")
    target = redact_and_escape(host_of(location)) if location else "nowhere (no Location header)"
    return Redirected(
        f"the server answered with a redirect to {target}; the API never redirects, "
        "so it was not followed and nothing was re-sent there",
        status=response.status_code,
        request_id=request_id,
    )


def _refusal(
    response: requests.Response, envelope: dict[str, Any], raw: bytearray, request_id: str | None
) -> ApiError:
    """A 4xx or 5xx (or a status the contract does not describe) as its error class."""
    status = response.status_code
    retry_after = _retry_after(response)
    kind = error_class_for(status)
    if status == 503 and retry_after is None and "success" not in envelope:
        kind = GatewayRefused  # not the API's own answer: a gateway in front refusing
    # RFC 6750 §3: a resource server's refusal says why in its own words, in the body
    # (`{"error": "insufficient_scope", ...}`) or the WWW-Authenticate challenge.
    oauth = OAuthError.of(envelope) or _challenge(response.headers.get("WWW-Authenticate"))
    message = _message(response, envelope, raw, oauth)
    if status == 413:  # not retried: the same body is as large the next time
        message = f"{_too_large_body(response)}: {message}"
    # A refusal (429, 503) is sent again even when it is a re-send: not one whose envelope
    # says it succeeded, which may have been done.
    said_success = status in (429, 503) and envelope.get("success") is True
    if said_success:
        message += (
            " (yet its envelope says success: true; an answer that contradicts itself "
            "says nothing of whether it was done)"
        )
    return kind(
        message,
        status=status,
        request_id=request_id,
        retry_after=retry_after,
        details=_details(envelope.get("data")),
        enveloped=isinstance(envelope.get("success"), bool),
        said_success=said_success,
        bearer_error=oauth.code if oauth is not None else None,
    )


def _said(envelope: dict[str, Any]) -> str:
    message = envelope.get("message")
    return f" ({_short(message)})" if isinstance(message, str) and message else ""


def _short(text: str) -> str:
    text = redact_and_escape(text)
    return text if len(text) <= _MAX_MESSAGE else text[:_MAX_MESSAGE] + "…"


def _message(
    response: requests.Response, envelope: dict[str, Any], raw: bytearray, oauth: OAuthError | None
) -> str:
    message = envelope.get("message")
    if isinstance(message, str) and message.strip():
        return _short(message)
    reason = redact_and_escape(response.reason or "error")[:80]
    if oauth is not None:
        return f"{reason}: {oauth} (an OAuth 2.0 bearer token error, RFC 6750)"
    if not raw:
        return f"{reason} (empty body)"
    kind = (
        redact_and_escape(response.headers.get("Content-Type", "").split(";")[0])[:80]
        or "unknown type"
    )
    if "html" in kind:
        # A proxy's or gateway's error page: its <title> says what it refused
        # ("400 No required SSL certificate was sent").
        said = _html_title(raw) or reason
        # nginx titles its pages "413 Request Entity Too Large": the status is said already.
        said = said.removeprefix(f"{response.status_code} ") or reason
        return f"{said} (an HTML page, probably from a proxy or gateway)"
    return f"{reason} (body is not the API's JSON envelope: {kind})"


_CHALLENGE_PARAM = re.compile(r'(error|error_description)\s*=\s*"((?:[^"\\]|\\.){0,600})"')


def _challenge(header: str | None) -> OAuthError | None:
    """The ``error`` and ``error_description`` of a Bearer challenge (RFC 6750 §3)."""
    if not header or not header[:2000].lstrip().lower().startswith("bearer"):
        return None
    params = {k: re.sub(r"\\(.)", r"\1", v) for k, v in _CHALLENGE_PARAM.findall(header[:2000])}
    return OAuthError.of(params)


_TITLE_SEARCHED = 16 * 1024  # an error page's title is near its top


_MAX_TITLE = 120


def _html_title(raw: bytearray) -> str | None:
    """The page's first <title>, entities decoded, whitespace collapsed, redacted,
    escaped and bounded; found in one pass (no pattern a crafted page could make backtrack)."""
    page = bytes(raw[:_TITLE_SEARCHED]).lower()
    start = page.find(b"<title")
    opened = page.find(b">", start) + 1 if start >= 0 else 0
    end = page.find(b"</title", opened) if opened else -1
    if end < 0:
        return None
    # Decoded and collapsed whole (within the 16 KiB searched), then cut: a secret
    # the cut splits loses its start too, which redaction alone would show.
    inside = bytes(raw[opened:end])
    text = " ".join(html.unescape(inside.decode("utf-8", "replace")).split())
    text = redact_and_escape(cut(text, 1024))
    if len(text) > _MAX_TITLE:
        text = text[:_MAX_TITLE] + "…"
    return text or None


def _too_large_body(response: requests.Response) -> str:
    body = response.request.body if response.request is not None else None
    size = len(body) if isinstance(body, bytes | str) else 0
    return (
        f"the request body ({size:,} bytes) was refused as too large, by the server or a "
        "proxy or gateway in front of it"
    )


def _details(data: Any) -> dict[str, str] | None:
    """The envelope's per-field problems, redacted, escaped and bounded."""
    if not isinstance(data, dict) or not data:
        return None
    return {_short(str(k))[:100]: _short(str(v))[:200] for k, v in list(data.items())[:20]}


def _retry_after(response: requests.Response) -> float | None:
    raw = response.headers.get("Retry-After")
    if raw is None:
        return None
    try:
        # Seconds or an HTTP date; urllib3 knows both forms.
        return max(0.0, float(_RETRY_AFTER.parse_retry_after(raw.strip())))
    except Exception:  # an unreadable header is as good as none
        return None
