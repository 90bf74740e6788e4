"""Ctrl-C, SIGTERM and SIGHUP during writes: finish what is in flight, start nothing new."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from types import FrameType
from typing import Any

from reconciler.stop import Stop


class GracefulInterrupt:
    """While active, the first signal sets ``stop``; a second Ctrl-C quits at once.

    Only a second SIGINT does: that is a person at the keyboard. A hangup often comes
    twice (the shell forwards SIGHUP to its jobs, and the kernel sends its own to the
    terminal's foreground group when the shell exits), and a supervisor or a script's
    trap may repeat SIGTERM; quitting on the repeat would drop, unsaid, the re-send of a
    write in flight (issue 33, row 6). SIGKILL remains for whoever must end it now.
    """

    def __init__(self, what: str, stop: Stop | None = None) -> None:
        self.stop = stop or Stop()
        self._what = what
        self._previous: dict[int, Any] = {}

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self.stop.is_set():
            if signum != signal.SIGINT:
                return  # already stopping: a repeated hangup or termination changes nothing
            _say(
                f"\nSecond interrupt: quitting now. {self._what.capitalize()} in flight may "
                "have completed; run `reconcile plan` to see where things stand, and look "
                'in the audit log for re-sends due and never attempted (README, "Reading '
                'the audit log").\n'
            )
            os._exit(1)
        self.stop.set("interrupted")
        _say(
            f"\nInterrupted: {self._what} in flight will finish, no new ones start "
            "(interrupt again to quit at once).\n"
        )

    def __enter__(self) -> GracefulInterrupt:
        if threading.current_thread() is threading.main_thread():
            # SIGHUP: the terminal closed, the SSH session dropped. Dying at once would
            # leave an update made and its re-send neither sent nor said to be owed.
            for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
                self._previous[signum] = signal.signal(signum, self._handle)
        return self

    def __exit__(self, *exc: object) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)


def _say(text: str) -> None:
    # With stderr closed (2>&-) sys.stderr is None: the interrupt still works, unannounced.
    # On a terminal that hung up a write fails (EIO): raised from a signal handler, that
    # would unwind whatever the main thread was doing.
    if sys.stderr is not None:
        with contextlib.suppress(OSError, ValueError):
            sys.stderr.write(text)
            sys.stderr.flush()
