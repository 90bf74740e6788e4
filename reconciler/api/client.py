"""ApiClient: one requests.Session per run, a token reused until near expiry,
bounded retries for what is safe to repeat, and errors that say what happened."""

from __future__ import annotations

import ipaddress
import logging
import random
import re
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple
from urllib.parse import quote, urlsplit

import requests
from requests.adapters import HTTPAdapter

from reconciler import __version__
from reconciler.api.errors import (
    ApiError,
    AuthenticationFailed,
    Conflict,
    InvalidRequest,
    NotFound,
    PermissionDenied,
    RateLimited,
    ServerError,
    TransportError,
    UnexpectedResponse,
    error_class_for,
)
from reconciler.api.pacing import RequestPacer
from reconciler.config import UPDATABLE_FIELDS, Settings
from reconciler.errors import ConfigError

log = logging.getLogger("reconciler.api")

_CONNECT_TIMEOUT = 10.0
_BACKOFF_BASE = 0.5
_BACKOFF_CAP = 8.0


@dataclass(frozen=True)
class CurrentInvite:
    """An invite as the server holds it, with canonical field names."""

    id: str
    status: str | None
    fields: dict[str, Any]  # updatable fields the server returned

    @property
    def is_pending(self) -> bool:
        return self.status == "pending"


class Receipt(NamedTuple):
    """The server's acknowledgement of a write."""

    status: int
    request_id: str | None


def check_base_url(base_url: str) -> str:
    """The base URL without a trailing slash, if it is safe to send a secret to."""
    parts = urlsplit(base_url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(f"base_url {base_url!r} is not an http(s) URL")
    if parts.username or parts.password:
        raise ConfigError("base_url must not carry credentials; use RECONCILER_CLIENT_ID/_SECRET")
    if parts.query or parts.fragment:
        raise ConfigError(f"base_url {base_url!r} must not have a query string or fragment")
    if parts.scheme == "http" and not _is_loopback(parts.hostname):
        raise ConfigError(
            f"base_url {base_url!r} uses plain http://, which would send the client secret "
            "and tokens unencrypted; use https:// (http:// is allowed only for loopback "
            "hosts such as 127.0.0.1, where the sandbox runs)"
        )
    return base_url.rstrip("/")


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class _IgnoredCookies(requests.cookies.RequestsCookieJar):
    """The API authenticates with bearer tokens: a cookie it sets is never kept or sent,
    which also spares parsing Set-Cookie on every answer."""

    def extract_cookies(self, response: Any, request: Any) -> None:
        return None


class _Token:
    """Holds the access token; repr and str never show it."""

    __slots__ = ("expires_at", "refresh_at", "value")

    def __init__(self, value: str, expires_in: float, now: float) -> None:
        self.value = value
        self.expires_at = now + expires_in
        # Renew shortly before expiry so a request never leaves with a dying token.
        self.refresh_at = self.expires_at - min(60.0, expires_in * 0.1)

    def __repr__(self) -> str:
        return "<token hidden>"


class ApiClient:
    def __init__(
        self,
        settings: Settings,
        *,
        pacer: RequestPacer | None = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        settings.require_credentials()
        assert settings.base_url and settings.client_id and settings.client_secret
        self.base_url = check_base_url(settings.base_url)
        self._host = urlsplit(self.base_url).netloc
        self.settings = settings
        self.pacer = pacer or RequestPacer(clock=clock, sleep=sleep)
        self._clock = clock
        self._sleep = sleep
        self._session = requests.Session()
        adapter = HTTPAdapter(
            pool_connections=2, pool_maxsize=max(settings.parallelism, 4), max_retries=0
        )
        self._session.mount("https://", adapter)
        self._session.mount("http://", adapter)
        self._session.headers["User-Agent"] = f"invite-reconciler/{__version__}"
        # requests re-reads proxies and the CA bundle from the environment on every
        # request, scanning os.environ each time; read them once per run instead.
        environment = self._session.merge_environment_settings(self.base_url, {}, None, None, None)
        self._session.proxies.update(environment["proxies"])
        self._session.verify = environment["verify"]
        self._session.trust_env = False
        self._session.cookies = _IgnoredCookies()
        self._token: _Token | None = None
        self._token_lock = threading.Lock()
        self._token_failure: ApiError | None = None
        # Set on an interrupt or a run-fatal error: attempts in flight finish,
        # none is retried, and no new call starts.
        self.halt = threading.Event()

    def __repr__(self) -> str:
        return f"ApiClient(base_url={self.base_url!r}, client_id={self.settings.client_id!r})"

    def close(self) -> None:
        self._session.close()

    def __enter__(self) -> ApiClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- operations ---------------------------------------------------------

    def get_invite(self, invite_id: str) -> CurrentInvite:
        path = self._invite_path(self.settings.get_invite_path, invite_id)
        response = self._call("GET", path, idempotent=True)
        return self._current_invite(invite_id, _envelope_data(response))

    def update_invite(self, invite_id: str, patch: Mapping[str, Any]) -> Receipt:
        path = self._invite_path(self.settings.update_invite_path, invite_id)
        body = {self.settings.wire_name(k): v for k, v in patch.items()}
        # The same PATCH body twice has the same effect, so it is safe to retry.
        response = self._call("PATCH", path, json_body=body, idempotent=True)
        return Receipt(response.status_code, _request_id(response))

    def resend_invite(self, invite_id: str) -> Receipt:
        path = self._invite_path(self.settings.resend_invite_path, invite_id)
        # Not idempotent: retried only when the request surely never left.
        response = self._call("POST", path, json_body={}, idempotent=False)
        return Receipt(response.status_code, _request_id(response))

    # -- plumbing -------------------------------------------------------------

    def _invite_path(self, template: str, invite_id: str) -> str:
        if not invite_id.strip("."):
            # URL normalisation would turn "." and ".." into other resources' paths.
            raise InvalidRequest(f"invite id {invite_id!r} cannot be used in a URL")
        return template.replace("{inviteId}", quote(invite_id, safe=""))

    def _current_invite(self, invite_id: str, data: Any) -> CurrentInvite:
        if not isinstance(data, dict):
            raise UnexpectedResponse(f"invite {invite_id}: response has no invite object")
        fields = {}
        for canonical in UPDATABLE_FIELDS:
            wire = self.settings.wire_name(canonical)
            if wire in data:
                fields[canonical] = data[wire]
        status = data.get("status")
        return CurrentInvite(str(data.get("id", invite_id)), status, fields)

    def _call(
        self, method: str, path: str, *, json_body: Any = None, idempotent: bool
    ) -> requests.Response:
        url = self.base_url + path
        renewed = False

        def send() -> requests.Response:
            token = self._access_token()
            response = self._send(method, url, token, json_body)
            nonlocal renewed
            if response.status_code == 401 and not renewed:
                # The contract: a 401 means expired or revoked; renew once, retry once.
                renewed = True
                self._forget_token(token)
                log.debug("%s %s -> 401, renewing the token and retrying once", method, path)
                token = self._access_token()
                response = self._send(method, url, token, json_body)
            return response

        return self._with_retries(method, path, send, idempotent=idempotent)

    def _send(self, method: str, url: str, token: _Token, json_body: Any) -> requests.Response:
        # Prepared by hand and sent on the session: Session.request would merge
        # settings, cookies and hooks anew on every call, a large CPU cost per
        # invite in a plan, and none of it applies to this API.
        request = requests.PreparedRequest()
        request.prepare(
            method=method,
            url=url,
            headers={
                **self._session.headers,
                "Authorization": f"Bearer {token.value}",
                "Accept": "application/json",
            },
            json=json_body,
        )
        return self._session.send(request, timeout=self._timeouts(), allow_redirects=False)

    def _timeouts(self) -> tuple[float, float]:
        return (min(_CONNECT_TIMEOUT, self.settings.timeout), self.settings.timeout)

    def _with_retries(
        self,
        method: str,
        path: str,
        send: Callable[[], requests.Response],
        *,
        idempotent: bool,
    ) -> requests.Response:
        deadline = self._clock() + self.settings.retry_max_seconds
        attempt = 0
        while True:
            attempt += 1
            self.pacer.wait_turn()
            started = self._clock()
            try:
                response = send()
            except requests.RequestException as exc:
                error: ApiError = _transport_error(exc, self.settings.timeout, self._host)
            else:
                elapsed_ms = (self._clock() - started) * 1000
                log.debug(
                    "%s %s -> %s (%.0f ms, requestId %s)",
                    method,
                    path,
                    response.status_code,
                    elapsed_ms,
                    _request_id(response) or "-",
                )
                # Only 2xx is success: a redirect or an informational answer
                # did not do what was asked.
                if 200 <= response.status_code < 300:
                    self.pacer.on_success()
                    return response
                error = _error_from_response(response)
                if isinstance(error, RateLimited):
                    self.pacer.on_rate_limited(error.retry_after)
                if isinstance(error, PermissionDenied):
                    error.message += (
                        f"; the client's token does not carry the scope this needs "
                        f"(asked for: {self.settings.scope!r}, set with RECONCILER_SCOPE)"
                    )
            if not _may_retry(error, idempotent) or self.halt.is_set():
                raise error
            delay = self._retry_delay(error, attempt)
            # A 429's wait happens in the pacer, but it still spends the retry budget.
            waits = (
                error.retry_after if isinstance(error, RateLimited) and error.retry_after else delay
            )
            if attempt >= self.settings.max_attempts or self._clock() + waits > deadline:
                error.message += f" (gave up after {attempt} attempts)"
                raise error
            if isinstance(error, RateLimited):
                log.debug("%s %s rate limited; every request waits %ss", method, path, waits)
            else:
                log.debug(
                    "%s %s failed (%s); retry %d in %.2fs", method, path, error, attempt, delay
                )
            self._sleep(delay)

    def _retry_delay(self, error: ApiError, attempt: int) -> float:
        if isinstance(error, RateLimited):
            return 0.0  # the pacer already holds every worker for Retry-After
        if error.retry_after is not None:
            return error.retry_after
        # Exponential backoff with full jitter, so workers do not retry in step.
        return random.uniform(0, min(_BACKOFF_CAP, _BACKOFF_BASE * 2 ** (attempt - 1)))

    # -- token ----------------------------------------------------------------

    def _access_token(self) -> _Token:
        with self._token_lock:
            if self._token_failure is not None:
                # Workers queued on the lock while a fetch failed after all its
                # retries must not each run a retry budget of their own.
                raise self._token_failure
            token = self._token
            if token is None or self._clock() >= token.refresh_at:
                try:
                    token = self._token = self._fetch_token()
                except ApiError as error:
                    self._token_failure = error
                    raise
            return token

    def _forget_token(self, token: _Token) -> None:
        with self._token_lock:
            if self._token is token:
                self._token = None

    def _fetch_token(self) -> _Token:
        url = self.base_url + self.settings.token_path
        form = {
            "grant_type": "client_credentials",
            "client_id": self.settings.client_id,
            "client_secret": self.settings.client_secret,
            "scope": self.settings.scope,
        }

        def send() -> requests.Response:
            return self._session.post(url, data=form, timeout=self._timeouts())

        try:
            response = self._with_retries("POST", self.settings.token_path, send, idempotent=True)
        except AuthenticationFailed as exc:
            exc.message = (
                f"the token endpoint refused client id {self.settings.client_id!r}: "
                f"{exc.message}; check RECONCILER_CLIENT_ID and RECONCILER_CLIENT_SECRET"
            )
            raise
        except (InvalidRequest, PermissionDenied, NotFound, Conflict, UnexpectedResponse) as exc:
            # No token means no request of this run can succeed: one clear error,
            # not the same refusal repeated for every invite.
            raise AuthenticationFailed(
                f"the token endpoint refused the request: {exc.message}; check "
                f"RECONCILER_SCOPE ({self.settings.scope!r}), RECONCILER_CLIENT_ID and "
                "token_path",
                status=exc.status,
                request_id=exc.request_id,
                details=exc.details,
            ) from None
        data = _envelope_data(response)
        # Tolerate a bare RFC 6749 body as well as the envelope.
        payload = data if isinstance(data, dict) and "access_token" in data else _json(response)
        if not isinstance(payload, dict) or not isinstance(payload.get("access_token"), str):
            raise UnexpectedResponse(
                "token response has no access_token",
                status=response.status_code,
                request_id=_request_id(response),
            )
        expires_in = payload.get("expires_in")
        if not isinstance(expires_in, int | float) or expires_in <= 0:
            expires_in = 300.0  # unknown lifetime: renew often rather than use a dead token
        log.debug("obtained an access token valid for %ss", expires_in)
        return _Token(payload["access_token"], float(expires_in), self._clock())


def _may_retry(error: ApiError, idempotent: bool) -> bool:
    if isinstance(error, TransportError):
        return not error.permanent and (idempotent or not error.maybe_sent)
    return idempotent and isinstance(error, RateLimited | ServerError)


def _transport_error(exc: requests.RequestException, timeout: float, host: str) -> TransportError:
    """What went wrong on the network, in words a user can act on."""
    text = repr(exc)
    # Only a failure to connect proves the server never saw the request.
    if isinstance(exc, requests.ConnectTimeout):
        return TransportError(f"could not connect to {host} within {timeout:g}s", maybe_sent=False)
    if isinstance(exc, requests.Timeout):
        return TransportError(f"no answer from {host} within {timeout:g}s", maybe_sent=True)
    if isinstance(exc, requests.exceptions.SSLError):
        if "CERTIFICATE_VERIFY_FAILED" in text:
            # OpenSSL's reason says what to fix: self-signed, expired, wrong host...
            reason = re.search(r"certificate verify failed: ([^'\"()]+)", text)
            detail = f"certificate verify failed: {reason.group(1).strip()}" if reason else ""
            message = (
                f"TLS verification failed for {host} ({detail or 'certificate not trusted'}); "
                "for a private CA, point REQUESTS_CA_BUNDLE at its certificate"
            )
        elif "WRONG_VERSION_NUMBER" in text:
            message = f"TLS handshake with {host} failed: it does not speak TLS on this port"
        else:
            message = f"TLS handshake with {host} failed"
        return TransportError(message, maybe_sent=False, permanent=True)
    if isinstance(exc, requests.ConnectionError):
        if "NameResolutionError" in text or "Name or service not known" in text:
            return TransportError(
                f"cannot resolve the host of {host}; check RECONCILER_BASE_URL", maybe_sent=False
            )
        if "NewConnectionError" in text or "Connection refused" in text:
            return TransportError(
                f"could not connect to {host} (connection refused); check RECONCILER_BASE_URL",
                maybe_sent=False,
            )
        return TransportError(f"connection to {host} closed without an answer", maybe_sent=True)
    return TransportError(f"request to {host} failed ({type(exc).__name__})", maybe_sent=True)


def _json(response: requests.Response) -> Any:
    try:
        return response.json()
    except ValueError:
        return None


def _request_id(response: requests.Response) -> str | None:
    body = _json(response) if response.content else None
    if isinstance(body, dict):
        metadata = body.get("metadata")
        if isinstance(metadata, dict) and metadata.get("requestId") is not None:
            return str(metadata["requestId"])
    return response.headers.get("X-Request-Id")


def _envelope_data(response: requests.Response) -> Any:
    body = _json(response)
    if isinstance(body, dict) and "data" in body:
        return body["data"]
    return body


def _retry_after(response: requests.Response) -> float | None:
    raw = response.headers.get("Retry-After")
    if raw is None:
        return None
    try:
        return max(0.0, float(raw))
    except ValueError:
        return None  # an HTTP date: fall back to our own backoff


def _error_from_response(response: requests.Response) -> ApiError:
    status = response.status_code
    body = _json(response)
    message = None
    details = None
    if isinstance(body, dict):
        if isinstance(body.get("message"), str):
            message = body["message"]
        details = body.get("data")
    if not message:
        message = _describe_body(response)
    return error_class_for(status)(
        message,
        status=status,
        request_id=_request_id(response),
        retry_after=_retry_after(response),
        details=details,
    )


def _describe_body(response: requests.Response) -> str:
    reason = response.reason or "error"
    if not response.content:
        return f"{reason} (empty body)"
    kind = response.headers.get("Content-Type", "").split(";")[0] or "unknown type"
    if "html" in kind:
        return f"{reason} (an HTML page, probably from a proxy or gateway)"
    return f"{reason} (body is not the API's JSON envelope: {kind})"
