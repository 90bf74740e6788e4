"""A raw TCP server on 127.0.0.1 for tests that need an answer no HTTP library
would send: dripped, silent, cut off. Each connection is handed, on a thread of
its own, to a function that also gets an event set when the test is done."""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

Handler = Callable[[socket.socket, threading.Event], None]


@contextmanager
def serving(handle: Handler) -> Iterator[str]:
    """``host:port`` of a server that gives each connection to ``handle``."""
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.05)
    done = threading.Event()

    def accept() -> None:
        while not done.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                continue
            threading.Thread(target=handle, args=(conn, done), daemon=True).start()

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{listener.getsockname()[1]}"
    finally:
        done.set()
        thread.join(5)
        listener.close()
