"""One request, start to finish: a turn from the pacer, attempts bounded in time and
size, retries as ``decide_retry`` says, and the token fetched on the way.

An attempt is prepared against the base URL, sent without redirects, and cut at its
deadline (which a retry shortens to what is left of its budget). No socket timeout
bounds the start of an answer (a server may send its headers a byte at a time), so
while an attempt waits for one, one shared watchdog thread stands ready to shut the
socket down at the deadline; the body is read in ``read_body``, which checks the
deadline itself.

The answer is read once, bounded, checked against the envelope and turned into the
error its status calls for (github3.py's way), with what the server said in words (its
message, an error page's title, an RFC 6750 challenge), its requestId, Retry-After and
details. Every string taken from the server is redacted, escaped and bounded before it
is kept.

Whether to try a failed request again, and after how long, is a pure function
(``decide_retry``): it sees only the error, how many attempts were made and how much
of the retry budget is left, so every rule is tested without HTTP or clocks.
"""

from __future__ import annotations

import contextvars
import html
import http.client
import itertools
import json
import logging
import math
import os
import random
import re
import socket
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol, Self

import requests
import urllib3.exceptions
from requests.adapters import HTTPAdapter
from requests.auth import AuthBase
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool
from urllib3.exceptions import ReadTimeoutError
from urllib3.util.retry import Retry

from reconciler.api.auth import (
    BearerAuth,
    ClientBasicAuth,
    Grant,
    IssuedTokens,
    OAuthError,
    Token,
    refusal_note,
    register_secret_forms,
    token_failure,
    token_from_payload,
)
from reconciler.api.capacity import MAX_RATE, SLEEP_SLICE, NoTurn, Refusal, RequestPacer, Turn
from reconciler.api.concurrency import Stop
from reconciler.api.exceptions import (
    GATEWAY_PAGE,
    AnswerTooLarge,
    ApiError,
    EnvelopeFailure,
    GatewayForbidden,
    GatewayRefused,
    NotSent,
    PermissionDenied,
    RateLimited,
    Redirected,
    ServerError,
    TransportError,
    error_class_for,
)
from reconciler.api.network import (
    CONNECT_TIMEOUT,
    host_of,
    make_session,
    parse_base_url,
    transport_error,
)
from reconciler.safetext import cut, redact_and_escape, seconds
from reconciler.settings.config import Settings

# -- answer --------------------------------------------------------------------

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
        request_id=_request_id(None, response),
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


# -- attempt -------------------------------------------------------------------

_MIN_ATTEMPT = 1.0  # seconds a retry is given even when the budget is nearly spent
READ_FAILURES = (
    requests.RequestException,
    urllib3.exceptions.HTTPError,
    http.client.HTTPException,
    OSError,
)


# -- the deadline --------------------------------------------------------------------


class AttemptDeadline:
    def __init__(self, seconds: float) -> None:
        self.at = time.monotonic() + seconds
        self.expired = False  # the watchdog cut an answer off

    def shut_down(self, sock: socket.socket) -> None:
        """End the attempt: the blocked read returns and the answer counts as cut off."""
        self.expired = True
        with suppress(OSError):  # already closed: nothing left to cut
            sock.shutdown(socket.SHUT_RDWR)


_CURRENT: contextvars.ContextVar[AttemptDeadline | None] = contextvars.ContextVar(
    "attempt_deadline", default=None
)


@contextmanager
def attempt_deadline(seconds: float) -> Iterator[AttemptDeadline]:
    """Requests sent in this block by this thread must begin answering in ``seconds``."""
    deadline = AttemptDeadline(seconds)
    token = _CURRENT.set(deadline)
    try:
        yield deadline
    finally:
        _CURRENT.reset(token)


class _Watchdog:
    """One thread running each armed action at its time, unless it was disarmed first.

    The thread is woken only by an action due before the one it sleeps until: attempts
    share one allowance, so a new deadline is almost always the latest, and waking the
    thread for each would cost every request a thread switch. A timer thread per attempt
    (threading.Timer) instead made a plan of 3,000 invites at no latency cost 0.98 ms of
    CPU an invite against 0.69 (benchmarks c), near the 1.0 ms it must stay under.
    """

    def __init__(self) -> None:
        self.start_afresh()

    def start_afresh(self) -> None:
        """Forget every action and the thread: for a new watchdog, or in a forked child."""
        self._wake = threading.Condition()
        self._armed: dict[int, tuple[float, Callable[[], None]]] = {}  # at most one a worker
        self._keys = itertools.count()
        self._thread: threading.Thread | None = None
        self._sleeps_until = math.inf

    def arm(self, at: float, action: Callable[[], None]) -> int:
        with self._wake:
            key = next(self._keys)
            self._armed[key] = (at, action)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="deadline", daemon=True)
                self._thread.start()
            elif at < self._sleeps_until:
                self._wake.notify()
        return key

    def disarm(self, key: int) -> None:
        with self._wake:
            self._armed.pop(key, None)

    def _run(self) -> None:
        with self._wake:
            while True:
                due = min(self._armed.items(), key=lambda item: item[1][0], default=None)
                self._sleeps_until = due[1][0] if due else math.inf
                wait = self._sleeps_until - time.monotonic()
                if due is None or wait > 0:
                    self._wake.wait(None if due is None else wait)
                    continue
                del self._armed[due[0]]
                due[1][1]()


_WATCHDOG = _Watchdog()
# A forked child has the watchdog's state but not its thread, so no deadline would
# ever fire there; and the parent's pending cuts are not the child's to make.
if hasattr(os, "register_at_fork"):  # not on Windows, which cannot fork
    os.register_at_fork(after_in_child=_WATCHDOG.start_afresh)


class _Guarded:
    """Mixed into urllib3's connections: the wait for an answer has a deadline."""

    sock: socket.socket | None

    def getresponse(self) -> Any:
        deadline = _CURRENT.get()
        sock = self.sock
        if deadline is None or sock is None:
            return super().getresponse()  # type: ignore[misc]
        key = _WATCHDOG.arm(deadline.at, lambda: deadline.shut_down(sock))
        try:
            return super().getresponse()  # type: ignore[misc]
        finally:
            _WATCHDOG.disarm(key)


def _guarded_pool(name: str, pool: type[Any], connection: type[Any]) -> type[Any]:
    """``pool`` whose connections are ``connection`` with a deadline (``_Guarded``)."""
    guarded = type(f"_Guarded{connection.__name__}", (_Guarded, connection), {})
    return type(name, (pool,), {"ConnectionCls": guarded})


_POOLS = {
    "http": _guarded_pool("_HTTPPool", HTTPConnectionPool, HTTPConnection),
    "https": _guarded_pool("_HTTPSPool", HTTPSConnectionPool, HTTPSConnection),
}


class GuardedAdapter(HTTPAdapter):
    """requests' adapter, with connections whose wait for an answer has a deadline."""

    def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
        super().init_poolmanager(*args, **kwargs)
        self.poolmanager.pool_classes_by_scheme = dict(_POOLS)

    def proxy_manager_for(self, proxy: str, **proxy_kwargs: Any) -> Any:
        manager = super().proxy_manager_for(proxy, **proxy_kwargs)
        if not proxy.lower().startswith("socks"):  # SOCKS brings pools of its own
            manager.pool_classes_by_scheme = dict(_POOLS)
        return manager


# -- exchange ------------------------------------------------------------------

log = logging.getLogger("reconciler.api")

# (seconds an attempt took, its HTTP status or None when no answer came)
Observer = Callable[[float, "int | None"], None]
Send = Callable[["float | None"], Answer]


class AttemptWatch(Protocol):
    """Told of each attempt of one request (the audit log's write-ahead rule, per attempt).

    ``before`` is called right before an attempt leaves: if it raises, the attempt is not
    sent and the exception goes to the caller. ``failed`` is told each attempt that
    failed, retried or not; a successful attempt is the caller's to record, once it has
    looked at the answer.
    """

    def before(self) -> None: ...

    def failed(self, error: ApiError) -> None: ...


@dataclass
class _Request:
    """One request and what its attempts came to so far."""

    method: str
    path: str
    send: Send
    idempotent: bool
    pacer: RequestPacer
    watch: AttemptWatch | None = None
    observed: bool = False  # told to the observer: the invite operations, not the token's
    attempts: int = 0
    give_up_at: float | None = None  # the retry budget's end, once the first attempt left
    error: ApiError | None = None  # the last attempt's
    refusal: Refusal | None = None  # what the pacer made of this request's last refusal
    own: bool = False  # the last refusal is the request's own, not a limit on all


class Exchange:
    """The HTTP side of the client: the session, the token, and each request's turns,
    attempts and retries (``ApiClient`` adds the invite operations)."""

    def __init__(
        self,
        settings: Settings,
        *,
        pacer: RequestPacer | None = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
        observer: Observer | None = None,
        jitter: Callable[[], float] | None = None,
    ) -> None:
        self.settings = settings
        self._credentials = credentials = settings.credentials()
        # Parsed and normalised once: every later decision reads the parsed form.
        base = parse_base_url(credentials.base_url)
        self.base_url, self._host = base.text, base.netloc
        # From here on the secret is redacted from anything shown, even if echoed.
        register_secret_forms(credentials.client_secret)
        self.pacer = pacer or RequestPacer(clock=clock, sleep=sleep, max_rate=settings.max_rate)
        # The re-send's own turns: a gateway may limit the endpoint that sends e-mail
        # alone (1 a second, say). Its refusals slow the re-sends, not the whole run,
        # and the run's pace does not hold them back.
        self.resend_pacer = RequestPacer(clock=clock, sleep=sleep, max_rate=settings.max_rate)
        if settings.max_rate is not None:  # -v: the pace the user set, said up front
            log.debug("paced at %g requests per second at most (max_rate)", settings.max_rate)
        # Set on an interrupt or a run-fatal error: attempts in flight finish,
        # none is retried, no worker waits for a turn, and no new call starts.
        self.stop = Stop()
        self._clock, self._sleep, self._observer = clock, sleep, observer
        self._jitter = jitter or random.random
        in_flight = settings.parallelism or settings.max_parallelism
        adapter = GuardedAdapter(pool_maxsize=max(in_flight, 4))
        self._session = make_session(base, adapter, settings.ca_path, settings.validate_certs)
        self._tokens = BearerAuth(self._fetch_token, clock)
        self._issued = IssuedTokens()  # what redaction keeps of the tokens issued
        self._client_basic = (
            ClientBasicAuth(credentials.client_id, credentials.client_secret)
            if settings.token_auth_method == "client_secret_basic"
            else None
        )
        # A token fetched inside another request's attempt (it expired while that one
        # waited for its turn, or a 401 renewed it) is part of that request's turn: it
        # waits for no turn of the run's pacer, where the probe after a block's quiet
        # would be that very request, still out: it would wait for itself for ever.
        self._in_turn = threading.local()
        self._turn_pacer = RequestPacer(clock=clock, sleep=sleep, start_rate=MAX_RATE)
        # Whether an answer of the platform accepted a token of this run (any: one renewed
        # after a 401 and refused by a block right away is still this client's).
        self._accepted = False
        # Whether the last answer to an invite operation was a gateway's block (its 403):
        # a write that leaves while it is on and meets a 403 met the block.
        self._block_on = False

    def close(self) -> None:
        if self.pacer.answers:
            log.debug("the pacer: %s", self.pacer.describe())
        self._session.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def grant(self) -> Grant | None:
        """What the token answer granted, once a token was issued in this run."""
        token = self._tokens.last
        if token is None:
            return None
        return Grant(tuple(self.settings.contract.scope.split()), token.granted)

    def call(
        self,
        method: str,
        path: str,
        *,
        json_body: Any = None,
        idempotent: bool,
        headers: Mapping[str, str] | None = None,
        watch: AttemptWatch | None = None,
        pacer: RequestPacer | None = None,
        confirm: str | None = None,
    ) -> Answer:
        """An invite operation: authenticated, observed, retried when safe; ``watch`` is
        told of each attempt. ``pacer``: the turns of an endpoint a limit may cover alone
        (the re-send), instead of the run's: not once a gateway refused the client with
        its own 403 (it blocks the client, every endpoint alike), nor with ``max_rate``
        (the user's limit is on every request together). ``confirm``: for a write, the
        path of a harmless read of the same invite, sent right after a gateway's 403 to
        tell a block on the client (refused too) from a refusal of this write alone
        (``_confirmed``)."""

        def send(give_up_at: float | None) -> Answer:
            block_on = self._block_on  # as the attempt leaves
            answer = self.attempt(
                method,
                path,
                self._tokens,
                json_body=json_body,
                give_up_at=give_up_at,
                headers=headers,
            )
            if answer.error is None:
                self._accepted, self._block_on = True, False
                return answer
            answer = self._gateway_forbidden(answer)
            error = answer.error
            if isinstance(error, GatewayForbidden) and method != "GET" and not block_on:
                why = self._unconfirmed(confirm)
                if why is not None:
                    answer = answer._replace(error=error.unconfirmed(why))
            self._block_on = isinstance(answer.error, GatewayForbidden) and (answer.error.confirmed)
            if answer.error is not None:
                # Here, not in the retry loop: a 403 from the token endpoint is no token
                # lacking a scope (there is no token yet); token_failure explains it.
                self._take_note(answer.error)
            return answer

        own = pacer if pacer is not None and self._own_pacer_kept() else None
        request = _Request(method, path, send, idempotent, own or self.pacer, watch, True)
        return self._with_retries(request, ready=self._tokens.current)

    def _own_pacer_kept(self) -> bool:
        """Whether an endpoint's own pacer still paces it (see ``call``)."""
        return self.settings.max_rate is None and not self.pacer.blocked

    def _gateway_forbidden(self, answer: Answer) -> Answer:
        """``answer`` with its 403 told for what it is: a gateway's refusal when it is not
        the platform's (``GatewayForbidden.of``) and a token of this run was accepted."""
        gateway = GatewayForbidden.of(answer.error) if self._accepted and answer.error else None
        return answer if gateway is None else answer._replace(error=gateway)

    def _unconfirmed(self, confirm: str | None) -> str | None:
        """Why a gateway's 403 to a write is not shown to be a block on the whole client
        (None: it is). The evidence is a harmless read of the same invite sent at once,
        before the quiet period (a block that covers the client refuses it too); a write
        is never sent again on the strength of a 403 alone: a gateway that refuses in the
        answer phase (a WAF's response rule, a proxy rewriting the platform's 200) would
        have the platform send the e-mail each time."""
        if confirm is None:
            return "no read could confirm a block on the client"
        try:
            answer = self.attempt("GET", confirm, self._tokens)
        except ApiError as failed:
            log.debug("GET %s (to confirm a block) -> %s", confirm, type(failed).__name__)
            return f"the read sent right after it to confirm a block got no answer ({failed})"
        answer = self._gateway_forbidden(answer)
        log.debug("GET %s (to confirm a block) -> %s", confirm, answer.status)
        if isinstance(answer.error, GatewayForbidden):
            return None
        got = "was answered" if answer.error is None else f"got HTTP {answer.status}"
        return f"a read of the same invite sent right after it {got}: no block on the client"

    # -- one attempt ------------------------------------------------------------

    def attempt(
        self,
        method: str,
        path: str,
        auth: AuthBase | None,
        *,
        json_body: Any = None,
        form: dict[str, str] | None = None,
        give_up_at: float | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> Answer:
        """One HTTP exchange, whole answer included, within the attempt's time."""
        now = self._clock()
        allowance = self.settings.timeout
        if give_up_at is not None:  # a retry ends with the retry budget
            allowance = min(allowance, max(give_up_at - now, _MIN_ATTEMPT))
        # Request.prepare, not the session's: the session holds no state a request needs
        # but its headers (no cookies kept, no auth of its own, the environment read once).
        prepared = requests.Request(
            method,
            self.base_url + path,
            headers={**self._session.headers, **(headers or {})},
            json=json_body,
            data=form,
            auth=auth,
        ).prepare()
        with attempt_deadline(allowance) as deadline:
            try:
                response = self._session.send(
                    prepared,
                    stream=True,
                    timeout=(min(CONNECT_TIMEOUT, allowance), allowance),
                    allow_redirects=False,
                )
            except OSError as exc:  # requests' errors are OSErrors, as is a CA bundle gone
                # The deadline's cut before the answer began is no network failure.
                raise self._failed(None if deadline.expired else exc, allowance) from None
        limits = Limits(
            now + allowance, self.settings.max_response_bytes, self._clock, self._host, allowance
        )
        try:
            if deadline.expired:  # cut mid-headers: what http.client parsed is not an answer
                raise self._failed(None, allowance)
            return read_answer(response, limits)
        except READ_FAILURES as exc:
            raise self._failed(exc, allowance) from None
        finally:
            response.close()

    def _failed(self, exc: BaseException | None, allowance: float) -> TransportError:
        """The attempt's network failure (None: cut at its deadline)."""
        if exc is None:
            return TransportError(
                f"no complete answer from {self._host} within {allowance:g}s", maybe_sent=True
            )
        return transport_error(
            exc, self._host, allowance, self._session.proxy_source, self.settings.base_url_source
        )

    # -- the retry loop ---------------------------------------------------------

    def _with_retries(self, request: _Request, ready: Callable[[], object] | None = None) -> Answer:
        while True:
            if ready is not None:
                # The token first, on its own turn: fetched inside this request's turn,
                # it would leave just before it, and a gateway allowing no burst
                # refuses the second of two requests sent together.
                try:
                    ready()
                except ApiError as no_token:
                    raise _unsent(no_token) from None
            answer = self._attempt(request)
            if answer is not None:
                return answer
            self._retry_or_raise(request)

    def _attempt(self, request: _Request) -> Answer | None:
        """One attempt, on its turn, told to the pacer; None when it failed (``error``)."""
        turn = self._take_turn(request)
        started = self._clock()
        request.attempts += 1
        if request.give_up_at is None:
            # The retry budget starts with the first attempt: time queued for a turn before
            # it, or behind other requests later, is ours, not the server's refusing.
            request.give_up_at = started + self.settings.retry_max_seconds
        else:
            request.give_up_at += turn.queued
        try:
            answer, error = self._send(request)
        except BaseException:
            request.pacer.on_no_answer(turn)
            raise
        elapsed = self._clock() - started
        status = answer.status if answer is not None else error.status if error else None
        log.debug(
            "%s %s -> %s (%.0f ms, requestId %s)",
            request.method,
            request.path,
            status or type(error).__name__,
            elapsed * 1000,
            (answer.request_id if answer else None) or "-",
        )
        if request.observed and self._observer is not None:  # invite operations only
            try:
                self._observer(elapsed, status)
            except Exception:  # a watcher's fault must not fail a request
                log.debug("the request observer failed", exc_info=True)
        request.error, request.own = error, False
        if status is None:
            request.pacer.on_no_answer(turn)
        else:  # an answer came: it says something about the rate
            self._paced(request, turn, error, elapsed)
        return answer if error is None else None

    def _paced(self, request: _Request, turn: Turn, error: ApiError | None, elapsed: float) -> None:
        """An answer told to the request's pacer: a refusal of the rate, a block, or none."""
        refused = error is not None and is_rate_signal(error)
        blocked = isinstance(error, GatewayForbidden) and error.confirmed
        request.refusal = request.pacer.on_answer(
            turn,
            elapsed,
            refused=refused,
            retry_after=error.retry_after if refused and error else None,
            again=request.refusal,
            blocked=blocked,
        )
        request.own = request.refusal is not None and request.refusal.own
        if blocked and request.pacer is not self.pacer:
            # A block is on the client, not on this endpoint: the run's pacer keeps
            # quiet too, and this request waits for its turn there with every other.
            self.pacer.block_seen()
            request.pacer, request.refusal = self.pacer, None

    def _send(self, request: _Request) -> tuple[Answer | None, ApiError | None]:
        watch = request.watch
        if watch is not None:
            watch.before()  # its record first: raising, it keeps this attempt unsent
        answer: Answer | None = None
        outer, self._in_turn.on = getattr(self._in_turn, "on", False), True
        try:
            answer = request.send(request.give_up_at if request.attempts > 1 else None)
            error = answer.error
        except ApiError as failure:
            error = failure
        finally:
            self._in_turn.on = outer
        if error is not None and error is self._tokens.failure:
            # The token request already had its retries; this one never left (or its
            # resend after a 401 did not). Its record names no HTTP status or requestId:
            # those the token endpoint answered are in the message, and are not this
            # request's.
            unsent = _unsent(error)
            if watch is not None:
                watch.failed(NotSent(str(unsent)))
            raise unsent
        if error is not None and watch is not None:
            watch.failed(error)
        return answer, error

    def _retry_or_raise(self, request: _Request) -> None:
        error = request.error
        assert error is not None and request.give_up_at is not None
        decision = decide_retry(
            error,
            request.attempts,
            request.give_up_at - self._clock(),
            idempotent=request.idempotent,
            max_attempts=self.settings.max_attempts,
            jitter=self._jitter(),
            own=request.own,
        )
        if not decision.retry or self.stop.is_set():
            error.message += decision.note + self._behind_gateway(error)
            raise error
        log.debug(
            "%s %s failed (%s); retry %d in %.2fs",
            request.method,
            request.path,
            error,
            request.attempts,
            decision.delay,
        )
        self._pause(decision.delay, error)

    def _take_turn(self, request: _Request) -> Turn:
        # A pause the server asks for is its refusing, charged to the budget: one
        # longer than a whole budget is refused even before a request's first try.
        end = request.give_up_at
        left = self.settings.retry_max_seconds if end is None else end - self._clock()
        try:
            return request.pacer.wait_turn(stop=self.stop, budget_left=left)
        except NoTurn as no:
            raise self._no_turn(no, request.error, end is None, max(left, 0.0)) from None

    def _no_turn(self, no: NoTurn, last: ApiError | None, first: bool, left: float) -> ApiError:
        if no.stopped:
            return NotSent("not sent: the run is stopping")
        if not no.asked and last is not None:
            # Held after refusals: the server's window would not move in time.
            last.message += (
                f" (refused for all of retry_max_seconds: no request may start for "
                f"another {seconds(no.wait)} after the server's refusals, more than the "
                f"{seconds(left)} left)"
            ) + self._behind_gateway(last)
            return last
        what = "not sent" if first else "not retried"
        wait = (
            f"the server asked that no request start for another {seconds(no.wait)}"
            if no.asked  # its Retry-After; else the hold after its refusals is ours
            else f"no request may start for another {seconds(no.wait)} after the server's refusals"
        )
        return RateLimited(
            f"{what}: {wait}, more than the {seconds(left)} left of this request's "
            f"retry budget (retry_max_seconds: {self.settings.retry_max_seconds:g})"
        )

    def _behind_gateway(self, error: ApiError) -> str:
        """What a run that gives up behind a gateway's 403 tells: who refused, what got
        through first, and what to do."""
        if not isinstance(error, GatewayForbidden) or not error.confirmed:
            return ""
        return (
            f". A gateway in front of the platform (not the platform) refused this client "
            f"and kept refusing: {self.pacer.describe_block()}: a block for sending too "
            "fast, or a rule that refuses this client whatever its pace. Run again once "
            "a block would be over with --parallelism 1, or with --max-rate "
            "(RECONCILER_MAX_RATE, setting max_rate) below the gateway's limit; if it "
            "still refuses, ask its operator what it refuses (a limit it can name or "
            "raise, or a rule)"
        )

    def _take_note(self, error: ApiError) -> None:
        if isinstance(error, PermissionDenied):  # the server's words only name a scope
            if not error.enveloped and error.bearer_error is None:
                # Not the platform's answer, and no token it accepted yet: a gateway's page.
                error.message += f"; {GATEWAY_PAGE}"
                return
            scope_said = error.bearer_error == "insufficient_scope"
            scope = self.settings.contract.scope
            error.message += refusal_note(self.grant(), error.message, scope_said, scope)

    def _pause(self, seconds: float, error: ApiError) -> None:
        """Wait before a retry, in short slices so a stopped run does not wait."""
        end = self._clock() + seconds
        while True:
            if self.stop.is_set():  # also after the last slice: a stopped run sends no retry
                raise error
            left = end - self._clock()
            if left <= 0:
                return
            self._sleep(min(left, SLEEP_SLICE))

    # -- the token --------------------------------------------------------------

    def _fetch_token(self) -> Token:
        """A token, or one error that names the token request and says what to check."""
        contract = self.settings.contract
        path = contract.token_path
        form = {"grant_type": "client_credentials", "scope": " ".join(contract.scope.split())}
        auth = self._client_basic
        if auth is None:  # client_secret_post: the credentials go in the form
            form["client_id"] = self._credentials.client_id
            form["client_secret"] = self._credentials.client_secret
        said: list[OAuthError | None] = [None]  # the last answer's RFC 6749 §5.2 error

        def send(give_up_at: float | None) -> Answer:
            answer = self.attempt("POST", path, auth, form=form, give_up_at=give_up_at)
            said[0] = OAuthError.of(answer.body) if answer.error is not None else None
            if answer.error is not None and said[0] is None:
                # A token renewed inside a gateway's block: refused like any request.
                answer = self._gateway_forbidden(answer)
            return answer

        try:
            inside = getattr(self._in_turn, "on", False)
            pacer = self._turn_pacer if inside else self.pacer
            answer = self._with_retries(_Request("POST", path, send, True, pacer))
        except (TransportError, NotSent):
            # No answer (the network's words name the host; _unsent adds the rest), or
            # none sent (the run stopping, a wait past the budget): the token's own words.
            raise
        except ApiError as exc:
            raise token_failure(exc, said[0], self.settings) from None
        return token_from_payload(answer.data, answer.body, self._clock(), self._issued)


def _unsent(error: ApiError) -> ApiError:
    """The token step's failure, as seen by a request it kept from leaving."""
    if isinstance(error, TransportError):  # its maybe_sent was about the token request
        return TransportError(
            f"{error.message} (while getting a token; this request was not sent)",
            maybe_sent=False,
            permanent=error.permanent,
        )
    return error


BACKOFF_BASE = 0.5
BACKOFF_CAP = 8.0


class RetryDecision(NamedTuple):
    retry: bool
    delay: float = 0.0  # seconds to wait before the next attempt
    note: str = ""  # appended to the error's message when giving up after retrying


def may_retry(error: ApiError, idempotent: bool) -> bool:
    """Whether another attempt could succeed and do no harm."""
    if isinstance(error, TransportError):
        # A request that may have reached the server is repeated only if repeating is safe.
        return not error.permanent and (idempotent or not error.maybe_sent)
    if error.refused_before_acting:  # a 429, a 503, a gateway's 403: nothing was done
        return True
    return idempotent and isinstance(error, RateLimited | ServerError)


def is_rate_signal(error: ApiError) -> bool:
    """A refusal that says "slower" to the whole run rather than "not this one": a 429,
    a gateway's bare 503, or a gateway's own 403 (a burst blocker's). The pacer cuts the
    rate; the request waits its turn again."""
    if isinstance(error, GatewayForbidden):  # not one a read got past (``_unconfirmed``)
        return error.confirmed
    return isinstance(error, RateLimited | GatewayRefused)


def decide_retry(
    error: ApiError,
    attempt: int,
    time_left: float,
    *,
    idempotent: bool,
    max_attempts: int,
    jitter: float,
    own: bool = False,
) -> RetryDecision:
    """``attempt`` attempts failed, the last with ``error``; ``jitter`` is in [0, 1);
    ``own``: a refusal the pacer found to be this request's own, not a limit on all."""
    if not may_retry(error, idempotent):
        return RetryDecision(False)
    tried = f"gave up after {attempt} attempt{'s' if attempt != 1 else ''}"
    asked = error.retry_after
    if asked and time_left < asked:  # `Retry-After: 0` asks no wait
        said, left = _apart(asked, max(time_left, 0.0))
        return RetryDecision(
            False,
            note=f" ({tried}: the server asked to wait {said} s, more than the "
            f"{left} s left of retry_max_seconds)",
        )
    if is_rate_signal(error):
        # Not counted against max_attempts: a limit slows a run, it does not end it.
        # Its wait happens in the pacer, for every request at once; the server's share
        # of that wait (a Retry-After, one interval of its rate) spends the budget.
        if time_left <= 0:
            return RetryDecision(
                False,
                note=f" ({tried}: refused for all of retry_max_seconds, not counting "
                "the time it waited for its turn)",
            )
        # Refused again while others went through (``own``): it backs off alone, as
        # after a fault, and the others go on at the rate.
        return _backed_off(error, attempt, jitter, time_left, tried) if own else RetryDecision(True)
    if attempt >= max_attempts:
        return RetryDecision(False, note=f" ({tried})")
    return _backed_off(error, attempt, jitter, time_left, tried)


def _backed_off(
    error: ApiError, attempt: int, jitter: float, time_left: float, tried: str
) -> RetryDecision:
    wait = _wait(error, attempt, jitter)
    if wait >= time_left:
        return RetryDecision(False, note=f" ({tried}: retry_max_seconds spent)")
    return RetryDecision(True, wait)


def _wait(error: ApiError, attempt: int, jitter: float) -> float:
    if error.retry_after is not None:
        return error.retry_after
    # Exponential backoff with full jitter, so workers do not retry in step.
    # The exponent bounded: a refusal is not counted against max_attempts, so a request
    # refused for all of retry_max_seconds may have made thousands of attempts.
    return jitter * min(BACKOFF_CAP, BACKOFF_BASE * 2.0 ** min(attempt - 1, 16))


def _apart(asked: float, left: float) -> tuple[str, str]:
    """``asked`` and ``left`` (less) in whole seconds, or with as many decimals as it takes
    (up to nine) to read apart: "1.00 s, more than the 0.96 s left", not "1 s ... the 1 s"."""
    digits = 0
    while digits < 9 and float(f"{asked:.{digits}f}") <= float(f"{left:.{digits}f}"):
        digits += 1
    return f"{asked:.{digits}f}", f"{left:.{digits}f}"
