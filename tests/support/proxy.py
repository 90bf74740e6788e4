"""A small forward proxy on 127.0.0.1 that records what reaches it: CONNECT tunnels
(relayed both ways, as squid does), plain ``http://`` requests in absolute form (recorded
with their bodies, answered 502, never forwarded), and, when ``credentials`` are set,
407 to any request without the right ``Proxy-Authorization`` (403 when ``refuse``).

It is the witness for what a client sent a proxy (squid's logs do not show a body).
"""

from __future__ import annotations

import base64
import select
import socket
import threading
from typing import NamedTuple


class Received(NamedTuple):
    method: str
    target: str
    headers: dict[str, str]
    body: bytes


class RecordingProxy:
    def __init__(self, credentials: tuple[str, str] | None = None, refuse: bool = False) -> None:
        self.credentials = credentials
        self.refuse = refuse
        self.received: list[Received] = []
        self._lock = threading.Lock()
        self._done = threading.Event()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(0.05)
        self._thread = threading.Thread(target=self._accept, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._listener.getsockname()[1]}"

    def url_with(self, user: str, password: str) -> str:
        return f"http://{user}:{password}@127.0.0.1:{self._listener.getsockname()[1]}"

    def __enter__(self) -> RecordingProxy:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        self._thread.join(5)
        self._listener.close()

    def _accept(self) -> None:
        while not self._done.is_set():
            try:
                conn, _ = self._listener.accept()
            except OSError:
                continue
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        with conn:
            conn.settimeout(5)
            head, rest = _read_head(conn)
            if head is None:
                return
            lines = head.decode("latin-1").split("\r\n")
            method, target = [*lines[0].split(" "), "", ""][:2]
            headers = {}
            for line in lines[1:]:
                name, _, value = line.partition(":")
                headers[name.strip().lower()] = value.strip()
            length = int(headers.get("content-length") or 0)
            body = rest
            while len(body) < length:
                chunk = conn.recv(65536)
                if not chunk:
                    break
                body += chunk
            with self._lock:
                self.received.append(Received(method, target, headers, body))
            if self.refuse:
                return _answer(conn, "403 Forbidden")
            if self.credentials and headers.get("proxy-authorization") != _basic(*self.credentials):
                return _answer(
                    conn, "407 Proxy Authentication Required", 'Proxy-Authenticate: Basic realm="t"'
                )
            if method != "CONNECT":
                return _answer(conn, "502 Bad Gateway")  # never forwarded: only recorded
            host, _, port = target.rpartition(":")
            try:
                upstream = socket.create_connection((host, int(port)), timeout=5)
            except OSError:
                return _answer(conn, "502 Bad Gateway")
            with upstream:
                conn.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
                _relay(conn, upstream, self._done)


def _basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


def _read_head(conn: socket.socket) -> tuple[bytes | None, bytes]:
    data = b""
    while b"\r\n\r\n" not in data:
        try:
            chunk = conn.recv(65536)
        except OSError:
            return None, b""
        if not chunk or len(data) > 65536:
            return None, b""
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    return head, rest


def _answer(conn: socket.socket, status: str, header: str = "") -> None:
    extra = f"{header}\r\n" if header else ""
    conn.sendall(
        f"HTTP/1.1 {status}\r\n{extra}Content-Length: 0\r\nConnection: close\r\n\r\n".encode()
    )


def _relay(a: socket.socket, b: socket.socket, done: threading.Event) -> None:
    for sock in (a, b):
        sock.setblocking(False)
    while not done.is_set():
        readable, _, _ = select.select([a, b], [], [], 0.1)
        for sock in readable:
            other = b if sock is a else a
            try:
                data = sock.recv(65536)
            except BlockingIOError:
                continue
            except OSError:
                return
            if not data:
                return
            other.setblocking(True)
            other.sendall(data)
            other.setblocking(False)
