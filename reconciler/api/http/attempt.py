"""One HTTP attempt, whole answer included, bounded in time and size.

Everything about a single exchange on the wire: the request prepared against the
base URL, sent without redirects, cut at the attempt's deadline (which a retry
shortens to what is left of its budget), and the answer read within its limits.
What to do with the answer (retry, pace, refresh the token) is ``exchange``'s.

A deadline for the start of an answer, which no socket timeout gives: a socket timeout
bounds each read, so a server that sends its status line and headers a byte at a time
holds a worker for as long as it likes. While an attempt waits for an answer to begin,
one shared watchdog thread stands ready to shut the socket down at the attempt's
deadline; the blocked read then ends. (The body is read in ``answer.read_body``, which
checks the deadline itself.)
"""

from __future__ import annotations

import contextvars
import heapq
import http.client
import itertools
import os
import re
import socket
import threading
import time
from collections.abc import Callable, Mapping
from contextlib import suppress
from typing import Any, cast
from urllib.parse import urlsplit

import requests
import urllib3.exceptions
from requests import PreparedRequest, Response
from requests.adapters import HTTPAdapter
from requests.auth import AuthBase
from requests.structures import CaseInsensitiveDict
from requests.utils import get_encoding_from_headers
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool

from reconciler.api.exceptions import TransportError
from reconciler.api.http.answer import Answer, Limits, read_answer
from reconciler.api.http.network import CONNECT_TIMEOUT, BaseUrl, make_session, transport_error
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
        in_flight = settings.parallelism or settings.max_parallelism
        self._session = make_session(base, GuardedAdapter(pool_maxsize=max(in_flight, 4)))
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


_COMPACT_FROM = 64  # entries in the heap before disarmed ones are swept out


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


class attempt_deadline:
    """Requests sent in this block by this thread must begin answering in ``seconds``."""

    __slots__ = ("_deadline", "_token")

    def __init__(self, seconds: float) -> None:
        self._deadline = AttemptDeadline(seconds)

    def __enter__(self) -> AttemptDeadline:
        self._token = _CURRENT.set(self._deadline)
        return self._deadline

    def __exit__(self, *exc: object) -> None:
        _CURRENT.reset(self._token)


class _Watchdog:
    """One thread running actions at their times; cancelled ones are skipped.

    The thread sleeps until the earliest entry is due and is woken only by an entry
    earlier than that: attempts share one allowance, so a new deadline is almost always
    the latest, and waking the thread for each would cost every request a thread switch.
    Disarmed entries wait in the heap until they come up, or until it has doubled since
    it was last compacted, so it holds about as many as are armed at once.
    """

    def __init__(self) -> None:
        self.start_afresh()

    def start_afresh(self) -> None:
        """Forget every entry and the thread: for a new watchdog, or in a forked child."""
        self._lock = threading.Lock()  # held by no one twice
        self._wake = threading.Condition(self._lock)
        self._due: list[list[Any]] = []  # heap of [time, sequence, action or None]
        self._sequence = itertools.count()
        self._thread: threading.Thread | None = None
        self._compact_at = _COMPACT_FROM

    def arm(self, at: float, action: Callable[[], None]) -> list[Any]:
        entry = [at, next(self._sequence), action]
        with self._lock:
            if len(self._due) >= self._compact_at:
                self._due = [armed for armed in self._due if armed[2] is not None]
                heapq.heapify(self._due)
                self._compact_at = max(_COMPACT_FROM, 2 * len(self._due))
            heapq.heappush(self._due, entry)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="deadline", daemon=True)
                self._thread.start()
            elif self._due[0] is entry:  # due before what the thread sleeps until
                self._wake.notify()
        return entry

    @staticmethod
    def disarm(entry: list[Any]) -> None:
        entry[2] = None

    def _run(self) -> None:
        with self._wake:
            while True:
                while self._due and self._due[0][2] is None:
                    heapq.heappop(self._due)
                wait = self._due[0][0] - time.monotonic() if self._due else None
                if wait is None or wait > 0:
                    self._wake.wait(wait)
                    continue
                action = heapq.heappop(self._due)[2]
                if action is not None:
                    action()


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
        entry = _WATCHDOG.arm(deadline.at, lambda: deadline.shut_down(sock))
        try:
            return super().getresponse()  # type: ignore[misc]
        finally:
            _WATCHDOG.disarm(entry)


class _HTTPConnection(_Guarded, HTTPConnection):
    pass


class _HTTPSConnection(_Guarded, HTTPSConnection):
    pass


class _HTTPPool(HTTPConnectionPool):
    ConnectionCls = _HTTPConnection


class _HTTPSPool(HTTPSConnectionPool):
    ConnectionCls = _HTTPSConnection


_POOLS = {"http": _HTTPPool, "https": _HTTPSPool}


class GuardedAdapter(HTTPAdapter):
    """requests' adapter, with connections whose wait for an answer has a deadline.

    Without a proxy, the pool for a host is looked up once, not parsed again from each
    request's URL; and an answer's cookies are not read into a jar nothing reads (the
    session keeps none, see ``network``), nor its headers copied into another mapping.
    """

    def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
        super().init_poolmanager(*args, **kwargs)
        self.poolmanager.pool_classes_by_scheme = dict(_POOLS)
        self._pools: dict[tuple[Any, ...], Any] = {}

    def proxy_manager_for(self, proxy: str, **proxy_kwargs: Any) -> Any:
        manager = super().proxy_manager_for(proxy, **proxy_kwargs)
        if not proxy.lower().startswith("socks"):  # SOCKS brings pools of its own
            manager.pool_classes_by_scheme = dict(_POOLS)
        return manager

    def close(self) -> None:
        super().close()
        self._pools.clear()  # urllib3 closes none of the pools it drops: they go with us

    def get_connection_with_tls_context(
        self,
        request: PreparedRequest,
        verify: Any,
        proxies: Mapping[str, str] | None = None,
        cert: Any = None,
    ) -> Any:
        # The pool depends on the scheme and the host of the URL and on verify and cert.
        url = request.url
        parts = url.split("/", 3) if not proxies and isinstance(url, str) else ()
        if len(parts) < 3 or not isinstance(verify, bool | str):
            return super().get_connection_with_tls_context(request, verify, proxies, cert)
        key = (parts[0], parts[2], verify, cert if not isinstance(cert, list) else tuple(cert))
        pool = self._pools.get(key)
        if pool is None:
            pool = self._pools[key] = super().get_connection_with_tls_context(
                request, verify, proxies, cert
            )
        return pool

    def request_url(self, request: PreparedRequest, proxies: Mapping[str, str] | None) -> str:
        if not proxies:  # no proxy: the path, as requests' own gives it
            return request.path_url
        return super().request_url(request, proxies)

    def build_response(self, req: PreparedRequest, resp: Any) -> Response:
        response = Response()
        response.status_code = resp.status
        response.headers = resp.headers  # case-insensitive already (urllib3's HTTPHeaderDict)
        response.encoding = get_encoding_from_headers(response.headers)
        response.raw = resp
        response.reason = resp.reason
        response.url = cast(str, req.url)  # a str once prepared
        response.request = req
        response.connection = self
        return response
