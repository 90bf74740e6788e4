"""A test HTTP server on a free port of 127.0.0.1, served from a thread of its own, and the
quiet handler the token and hostile servers share, with the platform's envelope and invite
endpoints (no pytest here)."""

from __future__ import annotations

import json
import secrets
import socket
import threading
from collections.abc import Callable, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self
from urllib.parse import unquote

INVITES = "/public-api/v1/kyb/invites/"


def envelope(status: int, data: Any, message: str = "OK", success: bool | None = None) -> bytes:
    body = {
        "status": status,
        "success": 200 <= status < 300 if success is None else success,
        "message": message,
        "data": data,
        "metadata": {
            "requestId": str(secrets.randbelow(10**9)),
            "timestamp": "2026-11-23T08:00:00.000Z",
        },
        "details": {"hint": "hostile test server"},
    }
    return json.dumps(body, ensure_ascii=False).encode("utf-8")


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

    def answer(self, status: int, body: bytes, headers: Mapping[str, str]) -> None:
        self.send_response(status)
        headers = {k: v for k, v in headers.items() if k.lower() != "content-length"}
        headers.setdefault("Content-Type", "application/json")
        for name, value in headers.items():
            # A header value cannot hold a line break: a hostile description is cut there.
            self.send_header(name, value.replace("\r", " ").replace("\n", " "))
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def answer_invite(self, method: str, body: str, invites: dict[str, dict[str, Any]]) -> None:
        """The platform's invite endpoints over ``invites``: read, and PATCH stored as sent."""
        if not self.path.startswith(INVITES):
            return self.answer(404, envelope(404, None, "no such endpoint"), {})
        invite_id = unquote(self.path[len(INVITES) :])
        invite = invites.get(invite_id)
        if invite is None:
            return self.answer(404, envelope(404, None, f"invite {invite_id} not found"), {})
        if method == "PATCH":
            invite.update(json.loads(body or "{}"))
        return self.answer(200, envelope(200, invite), {})
