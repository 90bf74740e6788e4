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
from contextlib import suppress

import pytest
from hostile_server import CLIENT_ID, HostileServer, Hostility

from reconciler.api.client import ApiClient
from reconciler.api.errors import ApiError, TransportError
from reconciler.config import Settings

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


def client_of(server: HostileServer, **settings: float) -> ApiClient:
    return ApiClient(
        Settings(base_url=server.url, client_id=CLIENT_ID, client_secret=SECRET, **settings)
    )


def read_with(server: HostileServer, **settings: float) -> tuple[TransportError, float]:
    started = time.monotonic()
    with client_of(server, **settings) as client, pytest.raises(TransportError) as failed:
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
    slow_platform: HostileServer,
) -> None:
    error, took = read_with(slow_platform, timeout=1, max_attempts=2, retry_max_seconds=3)

    assert len(slow_platform.calls("GET")) == 2  # a GET is safe to send again
    assert str(error).startswith("no complete answer from ")
    assert str(error).endswith("within 1s (gave up after 2 attempts)"), str(error)
    assert took < 8, f"two 1 s attempts in a 3 s budget took {took:.1f}s"


def test_a_server_that_never_starts_its_answer_is_cut_at_the_deadline() -> None:
    # Not even a status line: the watchdog's cut ends the wait before the socket's
    # own read timeout would, and the user is told the same as for a drip.
    listener = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def accept_and_stay_silent() -> None:
        with suppress(OSError):
            conn, _ = listener.accept()
            with conn:
                stop.wait(10)

    thread = threading.Thread(target=accept_and_stay_silent, daemon=True)
    thread.start()
    host = f"127.0.0.1:{listener.getsockname()[1]}"
    settings = Settings(
        base_url=f"http://{host}",
        client_id=CLIENT_ID,
        client_secret=SECRET,
        timeout=1,
        max_attempts=1,
    )
    started = time.monotonic()
    try:
        with ApiClient(settings) as client, pytest.raises(ApiError) as failed:
            client.get_invite("inv_1")
    finally:
        stop.set()
        listener.close()
        thread.join(5)

    assert f"no complete answer from {host} within 1s" in str(failed.value)
    assert time.monotonic() - started < 4


def test_an_answer_cut_off_part_way_through_the_client_says_so() -> None:
    token = json.dumps({"access_token": "tok_cut_test_1234", "expires_in": 3600}).encode()

    def serve(listener: socket.socket, stop: threading.Event) -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            with conn:
                request = conn.recv(65536)
                if request.startswith(b"POST"):  # the token: a whole answer
                    head = f"HTTP/1.1 200 OK\r\nContent-Length: {len(token)}\r\n\r\n".encode()
                    conn.sendall(head + token)
                else:  # the invite: 10 of the 500 bytes promised, then the end
                    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 500\r\n\r\n" + b'{"data": {')

    listener = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()
    thread = threading.Thread(target=serve, args=(listener, stop), daemon=True)
    thread.start()
    host = f"127.0.0.1:{listener.getsockname()[1]}"
    settings = Settings(
        base_url=f"http://{host}", client_id=CLIENT_ID, client_secret=SECRET, max_attempts=1
    )
    try:
        with ApiClient(settings) as client, pytest.raises(TransportError) as failed:
            client.get_invite("inv_1")
    finally:
        stop.set()
        listener.close()
        thread.join(5)

    assert str(failed.value) == f"the answer from {host} was cut off (gave up after 1 attempt)"
    assert failed.value.maybe_sent
