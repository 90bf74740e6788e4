"""The access token: fetched once, reused until near expiry, renewed once on a 401.

``BearerAuth`` follows requests' own ``HTTPDigestAuth.handle_401``: the auth
object sets the header and, when the answer is a 401, renews the token and
sends the request once more.
"""

from __future__ import annotations

import base64
import logging
import threading
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

import requests
from requests.auth import AuthBase

from reconciler.api.exceptions import ApiError
from reconciler.api.http.token_answer import Token
from reconciler.safetext import (
    register_secret,
)

log = logging.getLogger("reconciler.api")


class ClientBasicAuth(AuthBase):
    """``client_secret_basic`` (RFC 6749 §2.3.1): id and secret each percent-encoded, then
    joined by a colon and Base64-encoded into ``Authorization: Basic``.

    A space is sent as ``%20``, never as the form encoding's ``+``: a strict server
    (``unquote_plus``) and a lenient one (``unquote``, as Authlib decodes) both read
    ``%20`` as a space, while a lenient one reads ``+`` as a plus and refuses the client.
    Every other character outside the unreserved set is percent-encoded as the form
    encoding would."""

    def __init__(self, client_id: str, secret: str) -> None:
        pair = f"{quote(client_id, safe='')}:{quote(secret, safe='')}".encode()
        self._credentials = base64.b64encode(pair).decode("ascii")
        register_secret(self._credentials)  # the secret, only encoded

    def __call__(self, request: requests.PreparedRequest) -> requests.PreparedRequest:
        request.headers["Authorization"] = f"Basic {self._credentials}"
        return request

    def __repr__(self) -> str:
        return "<client credentials hidden>"


class TokenSource:
    """The run's token, shared by every worker."""

    def __init__(self, fetch: Callable[[], Token], clock: Callable[[], float]) -> None:
        self._fetch = fetch
        self._clock = clock
        self._token: Token | None = None
        self._lock = threading.Lock()
        self._failure: ApiError | None = None
        self._last: Token | None = None

    def current(self) -> Token:
        # The token in hand, while it is good, without the lock every request would take:
        # attributes replaced whole, so read unlocked they are one state or the next.
        token = self._token
        if self._failure is None and token is not None and self._clock() < token.refresh_at:
            return token
        with self._lock:
            if self._failure is not None:
                # Workers queued on the lock while a fetch failed after all its
                # retries must not each run a retry budget of their own.
                raise self._failure
            token = self._token
            if token is None or self._clock() >= token.refresh_at:
                try:
                    token = self._token = self._last = self._fetch()
                except ApiError as error:
                    self._failure = error
                    raise
            return token

    @property
    def last(self) -> Token | None:
        """The token in hand (or the last one), None before any was issued."""
        return self._token or self._last

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
        request.hooks["response"].append(self.handle_401)  # register_hook, typed
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
