"""What the run actually sends: the starts of the last second, as rates.

The pacer's rate is what it allows; these are what went out, which the in-flight
limit, a slow server or our own queue may hold far below it. A cut measures from
them where a limit lies, and slow start may run only so far ahead of them.
"""

from __future__ import annotations

from collections import deque

WINDOW = 1.0  # seconds of starts kept: they measure the rate actually offered
RECENT = 8  # starts that measure it during slow start, when it changes fast
_SHORTEST = 1e-5  # seconds: a span no shorter than this, so no rate is infinite


class RecentStarts:
    """Not thread-safe: the pacer calls it under its lock."""

    def __init__(self) -> None:
        self._times: deque[float] = deque()  # start times within the last WINDOW

    def add(self, now: float) -> None:
        self._times.append(now)
        while self._times[0] < now - WINDOW:
            self._times.popleft()

    def offered(self, now: float, since: float) -> float | None:
        """Starts per second from ``since`` (at most WINDOW ago) to ``now``; None: too
        few to tell."""
        recent = [t for t in self._times if t >= max(since, now - WINDOW)]
        if len(recent) < 2:
            return None
        return len(recent) / max(now - recent[0], _SHORTEST)

    def recent_rate(self) -> float:
        """Starts per second over the last RECENT starts (0: too few to tell)."""
        count = min(len(self._times), RECENT)
        if count < 2:
            return 0.0
        newest, oldest = self._times[-1], self._times[-count]  # read from the newest end
        if newest <= oldest:
            return 0.0
        return (count - 1) / (newest - oldest)
