"""A deadline for the start of an answer, which no socket timeout gives.

A socket timeout bounds each read, so a server that sends its status line and
headers a byte at a time holds a worker for as long as it likes. While an
attempt waits for an answer to begin, one shared watchdog thread stands ready
to shut the socket down at the attempt's deadline; the blocked read then ends.
(The body is read in ``answer.read_body``, which checks the deadline itself.)
"""

from __future__ import annotations

import contextvars
import heapq
import itertools
import os
import socket
import threading
import time
from collections.abc import Callable, Mapping
from contextlib import suppress
from typing import Any, cast

from requests import PreparedRequest, Response
from requests.adapters import HTTPAdapter
from requests.utils import get_encoding_from_headers
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool

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
