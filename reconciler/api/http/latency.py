"""How long the server takes to answer, as the pacer counts it for ``servable()``.

A moving average of every answer, but never more than ``QUEUE_GAIN`` times the
fastest answer of the last ``BASE_WINDOW`` seconds. An answer slower than that
waited in a queue at the server (a local sandbox, a busy gateway): counting the
queue as latency would put more requests in flight, and they would only make the
queue longer. BBR keeps a round-trip floor for the same reason; its window and
its in-flight gain are the numbers here.
"""

from __future__ import annotations

from collections import deque

WEIGHT = 0.2  # share of each answer's time in the moving average
QUEUE_GAIN = 2.0  # counted at most this times the fastest answer (BBR's cwnd gain)
BASE_WINDOW = 10.0  # seconds the fastest answer is remembered (BBR's min-RTT window)


class Latency:
    """Not thread-safe: the pacer calls it under its lock."""

    def __init__(self) -> None:
        self._average: float | None = None
        # (when, seconds) of answers, each faster than every later one: the first is
        # the fastest of the last BASE_WINDOW seconds.
        self._fastest: deque[tuple[float, float]] = deque()

    def add(self, now: float, seconds: float) -> None:
        seconds = max(0.0, seconds)
        if self._average is None:
            self._average = seconds
        else:
            self._average += WEIGHT * (seconds - self._average)
        while self._fastest and self._fastest[-1][1] >= seconds:
            self._fastest.pop()  # never again the fastest: this one is as fast, and newer
        self._fastest.append((now, seconds))
        while self._fastest[0][0] < now - BASE_WINDOW:
            self._fastest.popleft()

    @property
    def seconds(self) -> float:
        """The latency a request in flight is counted for (0 before any answer)."""
        if self._average is None:
            return 0.0
        return min(self._average, QUEUE_GAIN * self._fastest[0][1])
