"""What answers take: a moving average (how many requests a rate keeps busy), and what
they take when the server is not loaded (how long a queue there is, whether a request
was late)."""

from __future__ import annotations

import math
from collections import deque

WEIGHT = 0.2  # share of each answer's time in the moving average
KEPT = 16  # answers whose times are kept: a block
BLOCKS = 4  # blocks whose medians are kept
LATE = 1.25  # an answer this much slower than unloaded: it probably left late


class Latencies:
    """Not thread-safe: the pacer calls it under its lock."""

    def __init__(self) -> None:
        self.average: float | None = None
        self._last: deque[float] = deque(maxlen=KEPT)
        self._medians: deque[float] = deque(maxlen=BLOCKS)  # of the last blocks
        self._counted = 0
        self._unloaded: float | None = None  # unloaded() as of the last answer

    def add(self, seconds: float) -> None:
        """An answer that was not a refusal came ``seconds`` after its request left."""
        seconds = max(0.0, seconds)
        self._last.append(seconds)
        self._counted += 1
        self._unloaded = None
        if self._counted % KEPT == 0:
            self._medians.append(_median(self._last))
        if self.average is None:
            self.average = seconds
        else:
            self.average += WEIGHT * (seconds - self.average)

    def unloaded(self) -> float:
        """What an answer takes when the server is not loaded: the lowest median of the
        last blocks of answers (and of the last answers), which neither a cache hit now
        and then nor a queue that builds up at the server moves (0: none yet)."""
        if not self._last:
            return 0.0
        if self._unloaded is None:  # read before every start, changed by answers alone
            self._unloaded = min(_median(self._last), min(self._medians, default=math.inf))
        return self._unloaded

    def forget_floor(self) -> None:
        """The server's latency changed: the answers kept say nothing of it now (the
        moving average, quick to follow, stays)."""
        self._last.clear()
        self._medians.clear()
        self._counted = 0
        self._unloaded = None

    def fastest(self) -> float:
        """The fastest of the last answers (0: none yet)."""
        return min(self._last, default=0.0)

    def arrived(self, started: float, seconds: float, now: float) -> float:
        """When a request that left at ``started`` and was answered ``seconds`` later (at
        ``now``) most likely reached the server: then, unless it was answered late (a
        connection opened, a thread scheduled late): then as late as its answer was."""
        unloaded = self.unloaded()
        if not unloaded or seconds <= LATE * unloaded:
            return started
        return max(started, now - unloaded)


def _median(times: deque[float]) -> float:
    return sorted(times)[len(times) // 2]
