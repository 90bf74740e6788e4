"""ApiClient against a platform on 127.0.0.1 whose answers come too slowly: every
attempt ends at its deadline, says so with the host and the time, counts as
possibly received, and the retry budget still bounds the run. Real sockets; the
runs are in-process."""

from __future__ import annotations

import json
import re
import socket
import threading
import time
from collections.abc import Iterator

import pytest
from hostile_server import CLIENT_ID, HostileServer, Hostility
from loopback import serving

from reconciler.api.client import ApiClient
from reconciler.api.exceptions import ApiError, TransportError
from reconciler.settings.config import Settings

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


def client_of(base_url: str, **settings: float) -> ApiClient:
    return ApiClient(
        Settings(base_url=base_url, client_id=CLIENT_ID, client_secret=SECRET, **settings)
    )


def read_with(server: HostileServer, **settings: float) -> tuple[TransportError, float]:
    started = time.monotonic()
    with client_of(server.url, **settings) as client, pytest.raises(TransportError) as failed:
        client.get_invite("inv_1")
    return failed.value, time.monotonic() - started


HEADERS_DRIP = Hostility(header_drip_seconds=0.02)
BODY_DRIP = Hostility(drip_seconds=0.05)


@pytest.mark.parametrize("slow_platform", [HEADERS_DRIP], indirect=True, ids=["headers"])
def test_headers_that_drip_end_at_the_deadline_as_no_complete_answer(
    slow_platform: HostileServer,
) -> None:
    error, took = read_with(slow_platform, timeout=1, max_attempts=1)

    host = slow_platform.url.removeprefix("http://")
    assert str(error) == f"no complete answer from {host} within 1s (gave up after 1 attempt)"
    assert error.maybe_sent  # the server was answering: a re-send would be repeated
    assert 0.9 <= took < 4, f"a 1 s deadline ended the attempt after {took:.1f}s"


@pytest.mark.parametrize("slow_platform", [BODY_DRIP], indirect=True, ids=["body"])
def test_a_body_that_drips_ends_at_the_deadline_with_what_had_arrived(
    slow_platform: HostileServer,
) -> None:
    error, took = read_with(slow_platform, timeout=1, max_attempts=1)

    host = re.escape(slow_platform.url.removeprefix("http://"))
    assert re.fullmatch(
        rf"no complete answer from {host} within 1s \(HTTP 200, \d+ bytes so far\)"
        r" \(gave up after 1 attempt\)",
        str(error),
    )
    assert error.maybe_sent
    assert 0.9 <= took < 4


@pytest.mark.parametrize("slow_platform", [HEADERS_DRIP], indirect=True, ids=["headers"])
def test_a_slow_read_is_retried_within_the_budget_and_the_retry_is_cut_too(
    slow_platform: HostileServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    # No pause before the retry (the jitter pinned at 0): the retry then has a
    # whole second of the three-second budget, and says so.
    monkeypatch.setattr("reconciler.api.client.random.random", lambda: 0.0)
    error, took = read_with(slow_platform, timeout=1, max_attempts=2, retry_max_seconds=3)

    assert len(slow_platform.calls("GET")) == 2  # a GET is safe to send again
    assert str(error).startswith("no complete answer from ")
    assert str(error).endswith("within 1s (gave up after 2 attempts)"), str(error)
    assert took < 8, f"two 1 s attempts in a 3 s budget took {took:.1f}s"


def stall_in_the_status_line(conn: socket.socket, done: threading.Event) -> None:
    # The first bytes come late, so the socket's own read timeout (restarted by
    # them) would end the wait 0.3 s after the attempt's deadline does.
    with conn:
        conn.recv(65536)
        if not done.wait(0.3):
            conn.sendall(b"HTTP/1.1 2")
            done.wait(10)


def test_a_server_that_never_starts_its_answer_is_cut_at_the_deadline() -> None:
    # Not even a whole status line (here for the token request, the first one
    # sent): the watchdog's cut ends the wait, and the user is told the same as
    # for a drip.
    started = time.monotonic()
    with (
        serving(stall_in_the_status_line) as address,
        client_of(f"http://{address}", timeout=1, max_attempts=1) as client,
        pytest.raises(ApiError) as failed,
    ):
        client.get_invite("inv_1")

    assert f"no complete answer from {address} within 1s" in str(failed.value)
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
