"""Reading an answer's body never waits past the attempt's deadline: not when the
server drips it a byte at a time, not when it stops sending part way. Real
sockets on 127.0.0.1; the read timeout is far longer than the deadline, so only
the deadline can end these reads in time."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest
from loopback import serving

from reconciler.api.exceptions import TransportError
from reconciler.api.http.answer import Limits, read_body
from reconciler.api.http.network import make_session

HEADERS = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n"
READ_TIMEOUT = 8.0


@contextmanager
def answered_by(send: Callable[[socket.socket, threading.Event], None]) -> Iterator[str]:
    """The URL of a server on 127.0.0.1 that reads a request and answers with ``send``."""

    def answer(conn: socket.socket, done: threading.Event) -> None:
        with conn:
            conn.recv(65536)
            send(conn, done)

    with serving(answer) as address:
        yield f"http://{address}/v1/invites/inv_1"


def drip(conn: socket.socket, done: threading.Event) -> None:
    conn.sendall(HEADERS)
    for _ in range(150):  # 3 s of one byte each 20 ms: 150 of the 1,000 bytes
        if done.wait(0.02):
            return
        try:
            conn.sendall(b" ")
        except OSError:  # the client gave up: what is being tested
            return


def stop_after_ten_bytes(conn: socket.socket, done: threading.Event) -> None:
    conn.sendall(HEADERS + b'{"data": {')
    done.wait(READ_TIMEOUT + 2)


def read_within(url: str, seconds: float) -> tuple[BaseException, float]:
    response = make_session(url, 1).get(url, stream=True, timeout=(5, READ_TIMEOUT))
    started = time.monotonic()
    limits = Limits(started + seconds, 10**6, time.monotonic, "127.0.0.1", seconds)
    with pytest.raises(Exception) as failed:
        read_body(response, limits)
    return failed.value, time.monotonic() - started


def test_a_body_dripped_a_byte_at_a_time_ends_at_the_deadline() -> None:
    with answered_by(drip) as url:
        error, took = read_within(url, 1.0)
    assert isinstance(error, TransportError)
    assert error.maybe_sent  # the server answered: the request was received
    message = str(error)
    assert message.startswith("no complete answer from 127.0.0.1 within 1s (HTTP 200, ")
    received = int(message.rsplit("(HTTP 200, ", 1)[1].split(" bytes so far)")[0])
    assert 0 < received < 150  # what had arrived when the deadline passed
    assert 0.95 <= took < 2.5  # not before the deadline, and not long after it


def test_a_body_that_stops_arriving_fails_at_the_deadline_not_the_read_timeout() -> None:
    with answered_by(stop_after_ten_bytes) as url:
        error, took = read_within(url, 0.5)
    assert 0.45 <= took < 2.5, f"waited {took:.1f}s for a 0.5s deadline"
    assert isinstance(error, TransportError)
    assert str(error) == "no complete answer from 127.0.0.1 within 0.5s (HTTP 200, 10 bytes so far)"
    assert error.maybe_sent
