"""The watchdog behind the attempt deadline: it cuts what is due, never what was disarmed."""

from __future__ import annotations

import socket
import threading
import time

from reconciler.api.deadline import AttemptDeadline, _Watchdog


def test_a_disarmed_action_never_runs_and_a_due_one_does() -> None:
    watchdog = _Watchdog()
    disarmed, due = threading.Event(), threading.Event()
    now = time.monotonic()

    entry = watchdog.arm(now + 0.01, disarmed.set)
    watchdog.disarm(entry)
    watchdog.arm(now + 0.05, due.set)

    assert due.wait(10), "the due action never ran"
    assert not disarmed.is_set()


def test_cutting_an_attempt_ends_a_blocked_read() -> None:
    left, right = socket.socketpair()
    deadline = AttemptDeadline(0.05)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(left.recv(10)))
    reader.start()

    _Watchdog().arm(deadline.at, lambda: deadline.cut(left))
    reader.join(10)

    assert not reader.is_alive() and got == [b""]  # the read ended, empty-handed
    assert deadline.expired
    left.close()
    right.close()
