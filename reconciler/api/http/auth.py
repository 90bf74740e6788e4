"""The access token: fetched once, reused until near expiry, renewed once on a 401.

``BearerAuth`` follows requests' own ``HTTPDigestAuth.handle_401``: the auth
object sets the header and, when the answer is a 401, renews the token and
sends the request once more.
"""

from __future__ import annotations

import json
import logging
import math
import threading
from collections.abc import Callable
from typing import Any
from urllib.parse import quote, quote_plus

import requests
from requests.auth import AuthBase

from reconciler.api.exceptions import ApiError, TokenRefused
from reconciler.safetext import MIN_SECRET_LENGTH, register_secret

log = logging.getLogger("reconciler.api")

_DEFAULT_LIFETIME = 300.0  # unknown lifetime: renew often rather than use a dead token


class Token:
    """Holds the access token; repr and str never show it."""

    __slots__ = ("expires_at", "refresh_at", "value")

    def __init__(self, value: str, expires_in: float, now: float) -> None:
        self.value = value
        self.expires_at = now + expires_in
        # Renew shortly before expiry so a request never leaves with a dying token.
        self.refresh_at = self.expires_at - min(60.0, expires_in * 0.1)

    def __repr__(self) -> str:
        return "<token hidden>"


def register_secret_forms(secret: str) -> None:
    """The secret as sent (form-encoded, JSON-escaped) is as secret as the secret."""
    forms = {
        secret,
        quote_plus(secret),
        quote(secret, safe=""),
        json.dumps(secret)[1:-1],
        json.dumps(secret, ensure_ascii=False)[1:-1],  # as the text output shows values
    }
    for form in forms:
        register_secret(form)


def token_from_payload(data: Any, body: Any, now: float) -> Token:
    """The token of a token answer: the envelope's ``data``, or a bare RFC 6749 body."""
    payload = data if isinstance(data, dict) and "access_token" in data else body
    value = payload.get("access_token") if isinstance(payload, dict) else None
    if not isinstance(value, str):
        raise TokenRefused("the token endpoint's answer has no access_token")
    register_secret_forms(value)  # before anything else could show it
    problem = _uncarriable(value)
    if problem:
        raise TokenRefused(
            f"the token endpoint issued an access token that cannot be sent in an HTTP "
            f"header ({problem}); it was not used, so no request was sent with it"
        )
    expires_in = payload.get("expires_in")
    if (
        not isinstance(expires_in, int | float)
        or isinstance(expires_in, bool)
        or not math.isfinite(expires_in)
        or expires_in <= 0
    ):
        expires_in = _DEFAULT_LIFETIME
    log.debug("obtained an access token valid for %ss", expires_in)
    return Token(value, float(expires_in), now)


def _uncarriable(value: str) -> str | None:
    if not value:
        return "it is empty"
    if len(value) < MIN_SECRET_LENGTH:
        # It could not be kept out of output: it would be found inside ordinary words.
        return f"it is shorter than {MIN_SECRET_LENGTH} characters, too short to keep out of output"
    if any(c in "\r\n" for c in value):
        return "it holds a line break"
    if any(c.isspace() for c in value):
        return "it holds whitespace"
    if not value.isprintable():
        return "it holds a control character"
    try:
        value.encode("latin-1")
    except UnicodeEncodeError:
        return "it holds a character outside Latin-1"
    return None


class TokenSource:
    """The run's token, shared by every worker."""

    def __init__(self, fetch: Callable[[], Token], clock: Callable[[], float]) -> None:
        self._fetch = fetch
        self._clock = clock
        self._token: Token | None = None
        self._lock = threading.Lock()
        self._failure: ApiError | None = None

    def current(self) -> Token:
        with self._lock:
            if self._failure is not None:
                # Workers queued on the lock while a fetch failed after all its
                # retries must not each run a retry budget of their own.
                raise self._failure
            token = self._token
            if token is None or self._clock() >= token.refresh_at:
                try:
                    token = self._token = self._fetch()
                except ApiError as error:
                    self._failure = error
                    raise
            return token

    @property
    def failure(self) -> ApiError | None:
        """Why no token can be had in this run, once that is known."""
        return self._failure

    def renew(self, stale: Token | None) -> Token:
        """A token other than ``stale``, which the server refused."""
        with self._lock:
            if self._token is stale:
                self._token = None
        return self.current()


class BearerAuth(AuthBase):
    """Sets ``Authorization: Bearer``; on a 401, renews the token and resends once."""

    def __init__(self, tokens: TokenSource) -> None:
        self._tokens = tokens
        self._local = threading.local()  # per request in flight, as in HTTPDigestAuth

    def __call__(self, request: requests.PreparedRequest) -> requests.PreparedRequest:
        token = self._tokens.current()
        self._local.token = token
        request.headers["Authorization"] = f"Bearer {token.value}"
        request.register_hook("response", self.handle_401)
        return request

    def handle_401(self, response: requests.Response, **kwargs: Any) -> requests.Response:
        # The contract: a 401 means expired or revoked; renew once, retry once. The
        # retry goes to the connection directly, past the response hooks, so its
        # own 401 is the answer: never a second renewal.
        if response.status_code != 401:
            return response
        # Not read: a body we throw away could be endless. The connection goes with it.
        response.close()
        log.debug("%s -> 401, renewing the token and retrying once", response.request.method)
        token = self._tokens.renew(self._local.token)
        retry = response.request.copy()
        retry.headers["Authorization"] = f"Bearer {token.value}"
        # kwargs: the same timeouts, CA bundle and proxies as the first attempt.
        answer = response.connection.send(retry, **kwargs)
        answer.history.append(response)
        return answer
