"""A reverse proxy on 127.0.0.1 in front of a sandbox that refuses answers, not requests.

A response-phase rule (ModSecurity's phase 4, a WAF rewriting the platform's answer, API
Gateway's ``{"message": "Forbidden"}``) forwards the request, lets the platform carry it
out, and then answers its own 403 to the client. Every other request is passed through.
What reached the platform is the sandbox's to count (``store.resends``).
"""

from __future__ import annotations

import http.client
import threading
from collections.abc import Collection
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

PAGE = (
    b'<!DOCTYPE HTML PUBLIC "-//W3C//DTD HTML 4.01//EN">\n<html><head>\n<title>403 Forbidden'
    b"</title>\n</head><body>\n<h1>Forbidden</h1>\n</body></html>\n"
)
# What the proxy answers instead of the platform's 2xx: (Content-Type or None, body).
REFUSALS: dict[str, tuple[str | None, bytes]] = {
    "html": ("text/html; charset=iso-8859-1", PAGE),
    "empty": (None, b""),
    "json": ("application/json", b'{"message":"Forbidden"}'),
}


class AnswerPhaseProxy:
    """Forwards everything to ``upstream``; a 2xx answer to a request whose method and
    last path segment are in ``refuse`` ("POST resend", "PATCH") becomes a 403."""

    def __init__(self, upstream: str, refuse: Collection[str], body: str = "html") -> None:
        self._upstream = urlsplit(upstream)
        self.refuse = set(refuse)
        self.body = REFUSALS[body]
        self.refused: list[str] = []
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self._server.daemon_threads = True
        self._server.proxy = self  # type: ignore[attr-defined]
        # A short poll: shutdown() waits for it.
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}{self._upstream.path}"

    def __enter__(self) -> AnswerPhaseProxy:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def refuses(self, method: str, path: str) -> bool:
        segment = path.rstrip("/").rsplit("/", 1)[-1]
        return method in self.refuse or f"{method} {segment}" in self.refuse

    def forward(self, method: str, path: str, headers: dict[str, str], body: bytes) -> Any:
        host, port = self._upstream.hostname or "127.0.0.1", self._upstream.port or 80
        conn = http.client.HTTPConnection(host, port, timeout=30)
        try:
            conn.request(method, path, body=body or None, headers=headers)
            answer = conn.getresponse()
            return answer.status, answer.getheaders(), answer.read()
        finally:
            conn.close()


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # Headers and body go out in two writes: with Nagle's algorithm the second waits for
    # the client's delayed ACK of the first, 40 ms an answer on Linux.
    disable_nagle_algorithm = True

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _handle(self) -> None:
        proxy: AnswerPhaseProxy = self.server.proxy  # type: ignore[attr-defined]
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        skip = ("host", "connection", "content-length")
        headers = {k: v for k, v in self.headers.items() if k.lower() not in skip}
        status, answer_headers, data = proxy.forward(self.command, self.path, headers, body)
        if 200 <= status < 300 and proxy.refuses(self.command, self.path):
            proxy.refused.append(f"{self.command} {self.path}")
            content_type, page = proxy.body
            self.send_response(403)
            if content_type:
                self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(page)))
            self.end_headers()
            self.wfile.write(page)
            return
        self.send_response(status)
        drop = ("transfer-encoding", "connection", "content-length")
        for name, value in answer_headers:
            if name.lower() not in drop:
                self.send_header(name, value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = do_PATCH = _handle
