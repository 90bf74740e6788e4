"""What answers take: a moving average (how many requests a rate keeps busy), what they
take when the server is not loaded (how long a queue there is, whether a request was
late), and the least they took lately (how many keep a server busy that serves one at
a time)."""

from __future__ import annotations

import math
from collections import deque

WEIGHT = 0.2  # share of each answer's time in the moving average
KEPT = 16  # answers whose times are kept: a block
BLOCKS = 4  # blocks whose medians are kept
LATE = 1.25  # an answer this much slower than unloaded: it probably left late
# Seconds a block's median counts towards the floor (BBR's window for its RTprop): long
# enough that a queue the run itself keeps at the server does not become the floor,
# short enough that a server which slowed down for good is soon taken at its word.
FLOOR_WINDOW = 10.0


class Latencies:
    """Not thread-safe: the pacer calls it under its lock."""

    def __init__(self) -> None:
        self.average: float | None = None
        self._last: deque[float] = deque(maxlen=KEPT)
        self._medians: deque[float] = deque(maxlen=BLOCKS)  # of the last blocks
        self._counted = 0
        self._unloaded: float | None = None  # unloaded() as of the last answer
        # (when, median) of the blocks of the last FLOOR_WINDOW seconds, each median
        # lower than every one after it: the first is the window's least.
        self._lows: deque[tuple[float, float]] = deque()
        self._floor: float | None = None  # floor() as of the last answer

    def add(self, seconds: float, now: float) -> float | None:
        """An answer that was not a refusal came ``seconds`` after its request left, at
        ``now`` (monotonic seconds). The median of the block it closed, if it closed one."""
        seconds = max(0.0, seconds)
        self._last.append(seconds)
        self._counted += 1
        self._unloaded = self._floor = None
        median = None
        if self._counted % KEPT == 0:
            median = _median(self._last)
            self._medians.append(median)
            lows = self._lows
            while lows and lows[-1][1] >= median:
                lows.pop()
            lows.append((now, median))
        while self._lows and self._lows[0][0] < now - FLOOR_WINDOW:
            self._lows.popleft()
        if self.average is None:
            self.average = seconds
        else:
            self.average += WEIGHT * (seconds - self.average)
        return median

    def forget_floor(self) -> None:
        """The floor is stale (the server slowed down): from now on, the last block's."""
        if self._lows:
            self._lows = deque([self._lows[-1]])
            self._floor = None

    def unloaded(self) -> float:
        """What an answer takes when the server is not loaded: the lowest median of the
        last blocks of answers (and of the last answers), which neither a cache hit now
        and then nor a queue that builds up at the server moves (0: none yet)."""
        if not self._last:
            return 0.0
        if self._unloaded is None:  # read before every start, changed by answers alone
            self._unloaded = min(_median(self._last), min(self._medians, default=math.inf))
        return self._unloaded

    def floor(self) -> float:
        """The least a block of answers took over the last FLOOR_WINDOW seconds (and the
        last answers): what an answer takes with nothing queued ahead of it, when the
        number in flight was low at some point in that window (0: none yet).

        A server that serves one request at a time (or one whose latency rises with
        load) keeps every request beyond the first few in a queue, and ``unloaded()``
        follows that queue within a few blocks; the number in flight worked out from
        it then grows with the queue it makes, up to the cap. Worked out from the
        floor, it stays at what keeps the server busy. A queue kept for longer than
        the window becomes the floor once the window has passed, and the number in
        flight can then double once a window (BBR drains its queue now and then to
        measure again, its ProbeRTT: not done here; a plan of 20,000 invites at no
        latency takes about two windows). A floor the server left behind (it slowed
        down) is forgotten by the caller (``forget_floor``), which knows how many were
        in flight.
        """
        if not self._last:
            return 0.0
        if self._floor is None:  # read before every start, changed by answers alone
            least = self._lows[0][1] if self._lows else math.inf
            self._floor = min(_median(self._last), least)
        return self._floor

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
