"""The run's one stop: set on an interrupt, a run-fatal error or lost stdout.

Once set, calls in flight finish, none is retried, no worker waits for a turn
and no new call starts. The API client, the concurrency map, the applier and
the interrupt handler are all handed the same ``Stop``, by that name.
"""

from __future__ import annotations

import threading


class Stop:
    """An event with the reason a report gives for it."""

    def __init__(self) -> None:
        self._event = threading.Event()
        self._reason: str | None = None

    def set(self, reason: str) -> None:
        # The latest reason is the one reported: stdout lost after an interrupt is
        # why the report went to stderr. (A second interrupt quits before any report.)
        self._reason = reason
        self._event.set()

    def is_set(self) -> bool:
        return self._event.is_set()

    @property
    def reason(self) -> str | None:
        """Why the run stopped; None while it has not."""
        return self._reason

    def wait(self, timeout: float | None = None) -> bool:
        """Block until set or ``timeout`` seconds have passed; True if set."""
        return self._event.wait(timeout)

    def __repr__(self) -> str:
        return f"Stop(reason={self._reason!r})" if self.is_set() else "Stop()"
