"""HTTP plumbing of the sandbox: a threaded HTTP/1.1 server on loopback.

Speed matters because benchmarks measure the client through it: connections
are kept alive, each answer leaves in a single write with TCP_NODELAY set
(headers and body in two small writes can cost a 40 ms delayed-ACK stall),
and every connection has its own thread.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from reconciler.errors import ReconcilerError
from reconciler.sandbox.app import (
    DROP,
    SANDBOX_CLIENT_ID,
    SANDBOX_CLIENT_SECRET,
    SandboxApp,
    SandboxOptions,
    SandboxStats,
)
from reconciler.sandbox.state import InviteStore, load_state_file

__all__ = [
    "SANDBOX_CLIENT_ID",
    "SANDBOX_CLIENT_SECRET",
    "Sandbox",
    "SandboxOptions",
    "SandboxStats",
]

_MAX_BODY = 1024 * 1024


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def setup(self) -> None:
        super().setup()
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, format: str, *args: Any) -> None:
        pass  # a request log would mostly measure the terminal

    def _serve(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        if length > _MAX_BODY:
            self.close_connection = True
            self._write(413, b"", {"Connection": "close"})
            return
        body = self.rfile.read(length) if length else b""
        response = self.server.app.handle(self.command, self.path, self.headers, body)
        if response is DROP:
            self.close_connection = True
            with contextlib.suppress(OSError):
                self.connection.shutdown(socket.SHUT_RDWR)
            return
        self._write(response.status, response.body, response.headers)

    do_GET = do_POST = do_PATCH = do_PUT = do_DELETE = _serve

    def _write(self, status: int, body: bytes, headers: dict[str, str]) -> None:
        lines = [f"HTTP/1.1 {status} {self.responses.get(status, ('',))[0]}"]
        lines += [f"{name}: {value}" for name, value in headers.items()]
        lines.append(f"Content-Length: {len(body)}")
        if self.close_connection:
            lines.append("Connection: close")
        head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
        self.wfile.write(head + body)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128
    app: SandboxApp


class Sandbox:
    """The sandbox API on a loopback port, started in a background thread.

    >>> with Sandbox(options=SandboxOptions(latency=0.05)) as sandbox:
    ...     sandbox.url
    """

    def __init__(
        self,
        invites: list[dict[str, Any]] | None = None,
        *,
        state_file: str | Path | None = None,
        options: SandboxOptions | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        if invites is None:
            invites = load_state_file(state_file)
        self.app = SandboxApp(invites, options or SandboxOptions())
        try:
            self._server = _Server((host, port), _Handler)
        except OSError as exc:
            raise ReconcilerError(
                f"the sandbox cannot listen on {host}:{port}: {exc.strerror}; "
                "pass --port N, or --port 0 for any free port"
            ) from None
        self._server.app = self.app
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        host, port = str(self._server.server_address[0]), self._server.server_address[1]
        return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"

    @property
    def store(self) -> InviteStore:
        return self.app.store

    @property
    def stats(self) -> SandboxStats:
        return self.app.stats

    @property
    def options(self) -> SandboxOptions:
        return self.app.options

    def start(self) -> Sandbox:
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="sandbox", daemon=True
        )
        self._thread.start()
        return self

    def serve_forever(self) -> None:
        self._server.serve_forever()

    def stop(self) -> None:
        if self._thread is not None:
            self._server.shutdown()
            self._thread.join()
            self._thread = None
        self._server.server_close()

    def __enter__(self) -> Sandbox:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
