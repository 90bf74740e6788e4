"""HTTP plumbing of the sandbox: a threaded HTTP/1.1 server on loopback.

Speed matters because benchmarks measure the client through it: connections
are kept alive, every connection has its own thread, and each answer leaves
in a single write with TCP_NODELAY set (headers and body in two small writes
can cost a 40 ms delayed-ACK stall): http.server's own header methods write
into a buffered stream that is flushed once per answer.
"""

from __future__ import annotations

import contextlib
import socket
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from reconciler.errors import ReconcilerError
from reconciler.sandbox import SANDBOX_CLIENT_ID, SANDBOX_CLIENT_SECRET
from reconciler.sandbox.app import (
    DROP,
    InviteStore,
    SandboxApp,
    SandboxOptions,
    SandboxStats,
    load_state_file,
)

__all__ = [
    "SANDBOX_CLIENT_ID",
    "SANDBOX_CLIENT_SECRET",
    "Sandbox",
    "SandboxOptions",
    "SandboxStats",
]

_MAX_BODY = 1024 * 1024
# How often the accept loop looks for a stop request: stop() waits up to this long
# (http.server's 0.5 s, times hundreds of sandboxes, was a minute of the test suite).
_POLL_SECONDS = 0.02


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    # Buffered: the status line, headers and body are flushed together after the
    # handler returns (answers are a few KiB; this holds any of them whole).
    wbufsize = 64 * 1024
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        pass  # a request log would mostly measure the terminal

    def _serve(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        if length > _MAX_BODY:
            # The body is not read, so the connection cannot carry another request.
            self._answer(413, b"", {"Connection": "close"})
            return
        body = self.rfile.read(length) if length else b""
        response = self.server.app.handle(self.command, self.path, self.headers, body)
        if response is DROP:
            self.close_connection = True
            with contextlib.suppress(OSError):
                self.connection.shutdown(socket.SHUT_RDWR)
            return
        self._answer(response.status, response.body, response.headers)

    do_GET = do_POST = do_PATCH = do_PUT = do_DELETE = _serve

    def _answer(self, status: int, body: bytes, headers: dict[str, str]) -> None:
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)  # "Connection: close" also ends the connection
        if self.close_connection and "Connection" not in headers:
            self.send_header("Connection", "close")  # the client asked to close
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128
    app: SandboxApp

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A gateway closing its idle connections to us with a reset (HAProxy does, when it
        # stops) is no fault of the sandbox's: no traceback on stderr for it.
        if not isinstance(sys.exc_info()[1], ConnectionResetError):
            super().handle_error(request, client_address)


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

    def client_env(self) -> dict[str, str]:
        """The RECONCILER_* variables that point the CLI at this sandbox."""
        return {
            "RECONCILER_BASE_URL": self.url,
            "RECONCILER_CLIENT_ID": SANDBOX_CLIENT_ID,
            "RECONCILER_CLIENT_SECRET": SANDBOX_CLIENT_SECRET,
        }

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
            target=self._server.serve_forever,
            args=(_POLL_SECONDS,),
            name="sandbox",
            daemon=True,
        )
        self._thread.start()
        return self

    def serve_forever(self) -> None:
        self._server.serve_forever(_POLL_SECONDS)

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
