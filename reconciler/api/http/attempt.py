"""One HTTP attempt, whole answer included, bounded in time and size.

Everything about a single exchange on the wire: the request prepared against the
base URL, sent without redirects, cut at the attempt's deadline (which a retry
shortens to what is left of its budget), and the answer read within its limits.
What to do with the answer (retry, pace, refresh the token) is ``exchange``'s.
"""

from __future__ import annotations

import http.client
import re
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import urlsplit

import requests
import urllib3.exceptions
from requests.auth import AuthBase
from requests.structures import CaseInsensitiveDict

from reconciler.api.exceptions import TransportError
from reconciler.api.http.answer import Answer, Limits, read_answer
from reconciler.api.http.deadline import attempt_deadline
from reconciler.api.http.failures import transport_error
from reconciler.api.http.network import CONNECT_TIMEOUT, make_session
from reconciler.api.http.urls import BaseUrl
from reconciler.settings.config import Settings

_MIN_ATTEMPT = 1.0  # seconds a retry is given even when the budget is nearly spent
# A path requests' URL preparation leaves as it is: segments of unreserved characters,
# none of them "." or ".." (which it would resolve) and no percent-encoding (which it
# may rewrite). Invite paths are these unless an id needs quoting.
_PLAIN_PATH = re.compile(r"(?:/[A-Za-z0-9_~-][A-Za-z0-9._~-]*)+")
_READ_FAILURES = (
    requests.RequestException,
    urllib3.exceptions.HTTPError,
    http.client.HTTPException,
    OSError,
)


class _Headers(CaseInsensitiveDict[str]):
    """requests' case-insensitive headers, copied whole rather than rebuilt name by name:
    each request's are copied from the template, and urllib3 copies them once more."""

    def copy(self) -> _Headers:
        copied = _Headers.__new__(_Headers)  # its mapping set next: no empty one made first
        copied._store = self._store.copy()  # type: ignore[attr-defined]
        return copied


class _Prepared(requests.PreparedRequest):
    """A prepared request whose path the template already knows."""

    known_path: str | None = None

    @property
    def path_url(self) -> str:
        """What requests sends as the request's target: its path (and query)."""
        return self.known_path if self.known_path is not None else super().path_url


class Attempts:
    """The session the attempts share, and how each is bounded."""

    def __init__(self, settings: Settings, base: BaseUrl, clock: Callable[[], float]) -> None:
        self.settings = settings
        self._base_url = base.text
        self._host = base.netloc
        self._clock = clock
        self._session = make_session(base, settings.parallelism or settings.max_parallelism)
        # What PreparedRequest.prepare makes of the parts every request shares, made once:
        # the session's headers (checked) and the base URL (normalised), copied per request.
        template = requests.PreparedRequest()
        template.prepare("GET", self._base_url + "/", dict(self._session.headers))
        self._headers = _Headers(template.headers)
        self._prefix: str | None = template.url.removesuffix("/")  # type: ignore[union-attr]
        self._base_path = urlsplit(self._prefix).path
        if self._prepared_url("/x") != self._prefix + "/x":  # a base it normalises apart
            self._prefix = None

    def close(self) -> None:
        self._session.close()

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
        limits = Limits(
            now + allowance, self.settings.max_response_bytes, self._clock, self._host, allowance
        )
        request = self._prepare(method, path, auth, json_body, form)
        if headers:
            request.headers.update(headers)
        with attempt_deadline(allowance) as deadline:
            try:
                response = self._send(request, allowance)
            except TransportError:
                if deadline.expired:  # the answer had not even begun at the deadline
                    raise self._too_slow(allowance) from None
                raise
        if deadline.expired:  # cut mid-headers: what http.client parsed is not an answer
            response.close()
            raise self._too_slow(allowance)
        try:
            return read_answer(response, limits)
        except _READ_FAILURES as exc:
            raise transport_error(exc, self._host, allowance, self._session.proxy_source) from None
        finally:
            response.close()

    def _prepare(
        self,
        method: str,
        path: str,
        auth: AuthBase | None,
        json_body: Any,
        form: dict[str, str] | None,
    ) -> requests.PreparedRequest:
        """The request PreparedRequest.prepare would make, without redoing the shared parts:
        the headers copied from the template, the URL prepared only when the path is not
        plain, and no cookie jar (the session keeps none)."""
        request = _Prepared()
        request.method = method.upper()
        if self._prefix is not None and _PLAIN_PATH.fullmatch(path):
            request.url = self._prefix + path
            request.known_path = self._base_path + path
        else:
            request.url = self._prepared_url(path)
        request.headers = self._headers.copy()
        request.prepare_body(form, None, json_body)
        if auth is not None:
            request.prepare_auth(auth)
        return request

    def _prepared_url(self, path: str) -> str:
        request = requests.PreparedRequest()
        request.prepare_url(self._base_url + path, None)
        return request.url  # type: ignore[return-value]

    def _too_slow(self, allowance: float) -> TransportError:
        return TransportError(
            f"no complete answer from {self._host} within {allowance:g}s", maybe_sent=True
        )

    def _send(self, request: requests.PreparedRequest, allowance: float) -> requests.Response:
        try:
            return self._session.send(
                request,
                stream=True,
                timeout=(min(CONNECT_TIMEOUT, allowance), allowance),
                allow_redirects=False,
            )
        except OSError as exc:  # requests' errors are OSErrors, as is a CA bundle gone missing
            raise transport_error(exc, self._host, allowance, self._session.proxy_source) from None
