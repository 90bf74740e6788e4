"""A test HTTP server on a free port of 127.0.0.1, served from a thread of its own,
and the quiet handler the token servers share (no pytest here)."""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self


class LocalServer:
    """Serves ``handler`` while in a ``with`` block; a handler reaches this object as
    ``self.server.owner``."""

    scheme = "http"

    def __init__(self, handler: type[BaseHTTPRequestHandler], host: str = "127.0.0.1") -> None:
        self._http = ThreadingHTTPServer((host, 0), handler)
        self._http.daemon_threads = True
        self._http.owner = self  # type: ignore[attr-defined]
        self._thread = threading.Thread(
            target=self._http.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    @property
    def url(self) -> str:
        host, port = self._http.server_address[:2]
        return f"{self.scheme}://{host!s}:{port}"

    def use_tls(self, wrap: Callable[[socket.socket], socket.socket]) -> Self:
        """Serve https: ``wrap`` turns the listening socket into a TLS one (support.tls)."""
        self._http.socket = wrap(self._http.socket)
        self.scheme = "https"
        return self

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._http.shutdown()
        self._http.server_close()


class QuietHandler(BaseHTTPRequestHandler):
    """HTTP/1.1, no log lines on stderr, every method to ``handle(method)``."""

    protocol_version = "HTTP/1.1"
    # Headers and body go out in two writes: with Nagle's algorithm the second waits for
    # the client's delayed ACK of the first, 40 ms an answer on Linux.
    disable_nagle_algorithm = True

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        self.handle_method("POST")

    def do_GET(self) -> None:
        self.handle_method("GET")

    def do_PATCH(self) -> None:
        self.handle_method("PATCH")

    def handle_method(self, method: str) -> None:
        raise NotImplementedError

    def read_body(self) -> str:
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length).decode("utf-8", "replace")
