"""Attempts: one HTTP exchange on the wire, its answer read whole, failures named.

The attempt deadline: its watchdog cuts what is due, never what was disarmed, and a
real connection whose answer has not begun by then is cut, directly or through a proxy.
"""

from __future__ import annotations

import json
import os
import re
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import suppress
from types import SimpleNamespace
from typing import Any

import pytest
import requests
from requests.adapters import HTTPAdapter
from support.hostile_server import CLIENT_ID, HostileServer, Hostility
from support.loopback import serving

from reconciler.api.client import ApiClient
from reconciler.api.exceptions import ApiError, TransportError
from reconciler.api.exchange import (
    _WATCHDOG,
    AttemptDeadline,
    GuardedAdapter,
    _Watchdog,
    attempt_deadline,
)
from reconciler.api.network import make_session
from reconciler.settings.config import Settings

READ_TIMEOUT = 8.0  # far past every deadline here: only the deadline ends these waits in time


def test_cutting_an_attempt_ends_a_blocked_read_and_cutting_a_closed_one_is_quiet() -> None:
    left, right = socket.socketpair()
    deadline = AttemptDeadline(0.05)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(left.recv(10)))
    reader.start()

    _Watchdog().arm(deadline.at, lambda: deadline.shut_down(left))
    reader.join(10)

    assert not reader.is_alive() and got == [b""]  # the read ended, empty-handed
    assert deadline.expired
    left.close()
    right.close()
    # The answer may end, and its socket close, just as the deadline passes: the
    # watchdog thread must not die of it, or no later deadline would fire.
    (closed := AttemptDeadline(0)).shut_down(left)
    assert closed.expired


# -- the watchdog's order and wake-ups --------------------------------------------------


def test_an_earlier_deadline_armed_later_wakes_the_named_daemon_watchdog() -> None:
    watchdog = _Watchdog()
    early = threading.Event()
    now = time.monotonic()
    watchdog.arm(now + 30, lambda: None)  # the thread now sleeps until this one
    time.sleep(0.05)

    watchdog.arm(time.monotonic() + 0.05, early.set)

    assert early.wait(5), "an earlier deadline waited behind a later one"
    # A deadline far away may be pending when the run ends: a daemon thread never
    # keeps the process alive, and a thread dump names what the thread is for.
    assert watchdog._thread is not None
    assert (watchdog._thread.name, watchdog._thread.daemon) == ("deadline", True)


def test_actions_run_in_the_order_of_their_times_never_before_and_disarmed_ones_never() -> None:
    watchdog = _Watchdog()
    ran: list[tuple[str, float]] = []
    done = threading.Event()
    now = time.monotonic()

    def second() -> None:
        ran.append(("second", time.monotonic()))
        done.set()

    watchdog.disarm(watchdog.arm(now + 0.01, lambda: ran.append(("disarmed", 0.0))))
    watchdog.disarm(watchdog.arm(now + 0.02, lambda: ran.append(("disarmed", 0.0))))
    watchdog.arm(now + 0.15, second)
    watchdog.arm(now + 0.1, lambda: ran.append(("first", time.monotonic())))

    assert done.wait(10)  # disarmed entries ahead of it held back no due one
    assert [name for name, _ in ran] == ["first", "second"]  # by their times, not arming
    assert ran[0][1] >= now + 0.1 and ran[1][1] >= now + 0.15  # never before their time


def test_disarmed_entries_do_not_pile_up_while_the_thread_sleeps() -> None:
    # Each attempt arms a deadline the full allowance away and disarms it when the
    # answer begins: the thread, asleep until the first of them, sweeps none of them.
    watchdog = _Watchdog()
    far = time.monotonic() + 600

    for n in range(10_000):
        watchdog.disarm(watchdog.arm(far + n, lambda: None))
    kept = watchdog.arm(far + 10_000, lambda: None)

    assert list(watchdog._armed) == [kept]


# -- through a real HTTP connection -------------------------------------------------------

STATUS_LINE = b"HTTP/1.1 200 OK\r\n"
ANSWER = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"


def drip_headers(conn: socket.socket, done: threading.Event) -> None:
    """Status line, then a header a byte every 20 ms for 6 s: never a whole answer."""
    with conn:
        conn.recv(65536)
        conn.sendall(STATUS_LINE + b"X-Slow: ")
        for _ in range(300):
            if done.wait(0.02):
                return
            try:
                conn.sendall(b"x")
            except OSError:  # cut by the client: what is being tested
                return


def test_headers_dripped_through_a_proxy_end_at_the_attempt_deadline() -> None:
    # The proxy drips: the request goes to it (an absolute URL), through the
    # proxy manager's pools, which must carry the deadline too. Cut mid-headers,
    # http.client may hand back what it parsed as an answer: the caller tells by
    # ``expired`` (see ``exchange``), not by an exception.
    started = time.monotonic()
    with (
        serving(drip_headers) as address,
        # The session's base only decides proxies and trust; the URL is what is asked.
        make_session("http://127.0.0.1:1", GuardedAdapter()) as session,
        attempt_deadline(0.2) as deadline,
        suppress(requests.RequestException),
    ):
        url, proxies = "http://api.example/v1/invites/inv_1", {"http": f"http://{address}"}
        session.get(url, timeout=(5, READ_TIMEOUT), proxies=proxies)
    took = time.monotonic() - started

    assert deadline.expired
    assert 0.2 <= took < 3, f"a 0.2 s deadline ended the wait after {took:.1f}s"


def test_without_an_attempt_deadline_only_the_read_timeout_bounds_a_slow_answer() -> None:
    # Slow headers that finish in time: nothing cuts them when no deadline is set.
    def slow_but_whole(conn: socket.socket, done: threading.Event) -> None:
        with conn:
            conn.recv(65536)
            for byte in ANSWER:
                if done.wait(0.002):
                    return
                conn.sendall(bytes([byte]))

    with serving(slow_but_whole) as address:
        url = f"http://{address}/v1/invites/inv_1"
        with make_session(url, GuardedAdapter()) as session:
            response = session.get(url, timeout=(5, READ_TIMEOUT))

    assert response.status_code == 200 and response.json() == {}


COOKIE_ANSWER = (
    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nSet-Cookie: s=1; Path=/\r\n"
    b"X-Request-Id: r-1\r\nContent-Length: 2\r\n\r\n{}"
)


def answer_with_a_cookie(conn: socket.socket, done: threading.Event) -> None:
    conn.settimeout(0.05)
    with conn:
        while not done.is_set():
            try:
                if not conn.recv(65536):
                    return
            except TimeoutError:
                continue
            except OSError:
                return
            conn.sendall(COOKIE_ANSWER)


def test_an_answer_in_time_disarms_the_deadline_keeps_its_connection_but_not_its_cookies():
    # A keep-alive connection: each request gets a small, whole answer at once.
    with (
        serving(answer_with_a_cookie) as address,
        make_session(f"http://{address}", GuardedAdapter()) as s,
    ):
        url = f"http://{address}/v1/invites/inv_1"
        with attempt_deadline(0.2) as first:
            answer = s.get(url, timeout=(5, READ_TIMEOUT))
        time.sleep(0.3)  # past the first attempt's deadline
        with attempt_deadline(5) as second:
            again = s.get(url, timeout=(5, READ_TIMEOUT))

    # Disarmed once answered: the watchdog never cut the kept-alive connection.
    assert not first.expired and not second.expired
    assert answer.json() == {} == again.json() and answer.url == url
    assert answer.headers.get("x-request-id") == answer.headers["X-REQUEST-ID"] == "r-1"
    assert answer.encoding == "utf-8"  # as requests gives it for application/json
    assert not s.cookies
    assert "Cookie" not in again.request.headers


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_process_forked_after_the_watchdog_started_still_has_deadlines() -> None:
    # The shared watchdog's thread is not copied into a forked child: without a
    # fresh start there, every deadline in the child would silently never fire.
    started = threading.Event()
    _WATCHDOG.arm(time.monotonic(), started.set)
    assert started.wait(5)  # the parent's watchdog thread is running

    pid = os.fork()
    if pid == 0:  # the child: exit 0 only if a deadline fires in time
        fired = threading.Event()
        try:
            _WATCHDOG.arm(time.monotonic() + 0.05, fired.set)
            os._exit(0 if fired.wait(5) else 1)
        finally:
            os._exit(2)  # never go on running the test session in the child
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


@pytest.mark.parametrize(
    ("proxy", "pools"),
    [("socks5://127.0.0.1:1080", ("socks pool", "socks tls")),
     ("SOCKS5h://127.0.0.1:1080", ("socks pool", "socks tls")),
     ("HTTP://proxy.example:3128", ("_HTTPPool", "_HTTPSPool"))],
)  # fmt: skip
def test_a_socks_proxy_keeps_its_librarys_pools_an_http_one_gets_ours(proxy, pools, monkeypatch):
    # SOCKS pools come from PySocks' manager; ours (that carry the deadline) would
    # bypass the SOCKS tunnel.
    manager = SimpleNamespace(pool_classes_by_scheme={"http": "socks pool", "https": "socks tls"})
    monkeypatch.setattr(HTTPAdapter, "proxy_manager_for", lambda self, proxy, **kw: manager)
    classes = GuardedAdapter().proxy_manager_for(proxy).pool_classes_by_scheme
    named = {scheme: getattr(pool, "__name__", pool) for scheme, pool in classes.items()}
    assert named == {"http": pools[0], "https": pools[1]}


# From test_slow_answers.py:
# ApiClient against a platform on 127.0.0.1 whose answers come too slowly: every
# attempt ends at its deadline, says so with the host and the time, counts as
# possibly received, and the retry budget still bounds the run. Real sockets; the
# runs are in-process.
SECRET = "cs_slow_answers_secret"
INVITE = {"id": "inv_1", "status": "pending", "name": "Acme", "email": "a@acme.example"}


@pytest.fixture
def slow_platform(request: pytest.FixtureRequest) -> Iterator[HostileServer]:
    with HostileServer([INVITE], request.param, secret=SECRET) as server:
        # The drip would go on for ever: if the deadline failed, the test must fail
        # (on its time bound), not hang.
        give_up = threading.Timer(10, server.stopping.set)
        give_up.start()
        yield server
        give_up.cancel()


def client_of(base_url: str, **values: Any) -> ApiClient:
    return ApiClient(
        Settings(base_url=base_url, client_id=CLIENT_ID, client_secret=SECRET, **values)
    )


def read_with(server: HostileServer, **settings: float) -> tuple[TransportError, float]:
    started = time.monotonic()
    with client_of(server.url, **settings) as client, pytest.raises(TransportError) as failed:
        client.get_invite("inv_1")
    return failed.value, time.monotonic() - started


HEADERS_DRIP = Hostility(header_drip_seconds=0.02)
BODY_DRIP = Hostility(drip_seconds=0.05)


@pytest.mark.parametrize(
    ("slow_platform", "so_far"),
    [(HEADERS_DRIP, ""), (BODY_DRIP, r" \(HTTP 200, (\d+) bytes so far\)")],
    indirect=["slow_platform"],
    ids=["headers", "body"],
)
def test_an_answer_that_drips_ends_at_the_deadline_with_what_had_arrived(slow_platform, so_far):
    error, took = read_with(slow_platform, timeout=0.3, max_attempts=1)

    host = re.escape(slow_platform.url.removeprefix("http://"))
    said = re.fullmatch(
        rf"no complete answer from {host} within 0\.3s{so_far} \(gave up after 1 attempt\)",
        str(error),
    )
    assert said, str(error)
    assert not so_far or int(said.group(1)) > 0  # what had arrived when the deadline passed
    assert error.maybe_sent  # the server was answering: a re-send would be repeated
    assert 0.3 <= took < 4, f"a 0.3 s deadline ended the attempt after {took:.1f}s"


@pytest.mark.parametrize("slow_platform", [HEADERS_DRIP], indirect=True, ids=["headers"])
def test_a_slow_read_is_retried_within_the_budget_and_the_retry_is_cut_too(
    slow_platform, monkeypatch
):
    # No pause before the retry (the jitter pinned at 0): the retry then has the whole
    # timeout again within the budget, and says so.
    monkeypatch.setattr("random.random", lambda: 0.0)
    error, took = read_with(slow_platform, timeout=0.3, max_attempts=2, retry_max_seconds=0.8)

    assert len(slow_platform.calls("GET")) == 2  # a GET is safe to send again
    assert str(error).startswith("no complete answer from ")
    assert str(error).endswith("within 0.3s (gave up after 2 attempts)"), str(error)
    assert took < 8, f"two 0.3 s attempts in a 0.8 s budget took {took:.1f}s"


def stall_in_the_status_line(conn: socket.socket, done: threading.Event) -> None:
    # The first bytes come late, so the socket's own read timeout (restarted by
    # them) would end the wait 0.1 s after the attempt's deadline does.
    with conn:
        conn.recv(65536)
        if not done.wait(0.1):
            conn.sendall(b"HTTP/1.1 2")
            done.wait(10)


def test_a_server_that_never_starts_its_answer_is_cut_at_the_deadline() -> None:
    # Not even a whole status line (here for the token request, the first one
    # sent): the watchdog's cut ends the wait, and the user is told the same as
    # for a drip.
    started = time.monotonic()
    with (
        serving(stall_in_the_status_line) as address,
        client_of(f"http://{address}", timeout=0.3, max_attempts=1) as client,
        pytest.raises(ApiError) as failed,
    ):
        client.get_invite("inv_1")

    assert f"no complete answer from {address} within 0.3s" in str(failed.value)
    assert time.monotonic() - started < 4


TOKEN = json.dumps({"access_token": "tok_cut_test_1234", "expires_in": 3600}).encode()


# Connection: close, as the server then closes: the GET must not reuse it.
TOKEN_ANSWER = (
    f"HTTP/1.1 200 OK\r\nContent-Length: {len(TOKEN)}\r\nConnection: close\r\n\r\n".encode() + TOKEN
)


def token_then_cut_off(conn: socket.socket, done: threading.Event) -> None:
    with conn:
        if conn.recv(65536).startswith(b"POST"):  # the token: a whole answer
            conn.sendall(TOKEN_ANSWER)
        else:  # the invite: 10 of the 500 bytes promised, then the end
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 500\r\n\r\n" + b'{"data": {')


def test_an_answer_cut_off_part_way_through_the_client_says_so() -> None:
    with (
        serving(token_then_cut_off) as address,
        client_of(f"http://{address}", max_attempts=1) as client,
        pytest.raises(TransportError) as failed,
    ):
        client.get_invite("inv_1")

    assert str(failed.value) == f"the answer from {address} was cut off (gave up after 1 attempt)"
    assert failed.value.maybe_sent
