"""Which error an answer that is no success is: the class its status calls for (github3.py's
way), with what the server said in words (its message, an error page's title, an RFC 6750
challenge), its requestId, Retry-After and details, each bounded and escaped."""

from __future__ import annotations

import html
import json
import re
from typing import Any

import requests
from urllib3.util.retry import Retry

from reconciler.api.exceptions import (
    ApiError,
    EnvelopeFailure,
    GatewayRefused,
    Redirected,
    error_class_for,
)
from reconciler.api.http.token_answer import OAuthError
from reconciler.api.http.urls import host_of
from reconciler.safetext import cut, redact_and_escape

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
        location = response.headers.get("Location")
        target = (
            redact_and_escape(host_of(location)) if location else "nowhere (no Location header)"
        )
        return Redirected(
            f"the server answered with a redirect to {target}; the API never redirects, "
            "so it was not followed and nothing was re-sent there",
            status=status,
            request_id=request_id,
        )
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
