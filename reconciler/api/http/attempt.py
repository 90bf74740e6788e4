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
import http.client
import itertools
import math
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, suppress
from typing import Any

import requests
import urllib3.exceptions
from requests.adapters import HTTPAdapter
from requests.auth import AuthBase
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool

from reconciler.api.exceptions import TransportError
from reconciler.api.http.answer import Answer, Limits, read_answer
from reconciler.api.http.network import CONNECT_TIMEOUT, BaseUrl, make_session, transport_error
from reconciler.settings.config import Settings

_MIN_ATTEMPT = 1.0  # seconds a retry is given even when the budget is nearly spent
_READ_FAILURES = (
    requests.RequestException,
    urllib3.exceptions.HTTPError,
    http.client.HTTPException,
    OSError,
)


class Attempts:
    """The session the attempts share, and how each is bounded."""

    def __init__(self, settings: Settings, base: BaseUrl, clock: Callable[[], float]) -> None:
        self.settings = settings
        self._base_url = base.text
        self._host = base.netloc
        self._clock = clock
        in_flight = settings.parallelism or settings.max_parallelism
        adapter = GuardedAdapter(pool_maxsize=max(in_flight, 4))
        self._session = make_session(base, adapter, settings.ca_path, settings.validate_certs)

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
        # Request.prepare, not the session's: the session holds no state a request needs
        # but its headers (no cookies kept, no auth of its own, the environment read once).
        prepared = requests.Request(
            method,
            self._base_url + path,
            headers={**self._session.headers, **(headers or {})},
            json=json_body,
            data=form,
            auth=auth,
        ).prepare()
        with attempt_deadline(allowance) as deadline:
            try:
                response = self._send(prepared, allowance)
            except TransportError:
                if deadline.expired:  # the answer had not even begun at the deadline
                    raise self._too_slow(allowance) from None
                raise
        if deadline.expired:  # cut mid-headers: what http.client parsed is not an answer
            response.close()
            raise self._too_slow(allowance)
        limits = Limits(
            now + allowance, self.settings.max_response_bytes, self._clock, self._host, allowance
        )
        try:
            return read_answer(response, limits)
        except _READ_FAILURES as exc:
            raise transport_error(exc, self._host, allowance, self._session.proxy_source) from None
        finally:
            response.close()

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
    thread for each would cost every request a thread switch.
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
    """requests' adapter, with connections whose wait for an answer has a deadline."""

    def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
        super().init_poolmanager(*args, **kwargs)
        self.poolmanager.pool_classes_by_scheme = dict(_POOLS)

    def proxy_manager_for(self, proxy: str, **proxy_kwargs: Any) -> Any:
        manager = super().proxy_manager_for(proxy, **proxy_kwargs)
        if not proxy.lower().startswith("socks"):  # SOCKS brings pools of its own
            manager.pool_classes_by_scheme = dict(_POOLS)
        return manager
