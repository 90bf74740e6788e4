"""What the run actually sends, and what the server let through of it: the starts of
the last few seconds, as rates.

The pacer's rate is what it allows; these are what went out, which the in-flight
limit, a slow server or our own queue may hold far below it, and what of that the
server let through, which its limit holds below that. A cut sets the rate from what
was let through, and slow start may run only so far ahead of what is sent.
"""

from __future__ import annotations

import math
from collections import Counter, deque

WINDOW = 1.0  # seconds: what was let through in the window before a refusal is the rate
KEPT = 3.0  # seconds of starts kept: a queue refuses a request a second or more after
RECENT = 8  # starts that measure it during slow start, when it changes fast


class RecentStarts:
    """Not thread-safe: the pacer calls it under its lock."""

    def __init__(self) -> None:
        self._times: deque[float] = deque()  # start times within the last KEPT seconds
        self._refused: deque[float] = deque()  # start times of those refused, the same
        self._answered: deque[float] = deque(maxlen=RECENT)  # times of the last answers let through
        self.first: float | None = None  # the run's first start

    def add(self, now: float) -> None:
        if self.first is None:
            self.first = now
        self._times.append(now)
        while self._times[0] < now - KEPT:
            self._times.popleft()

    def refused(self, started: float) -> None:
        """The request started at ``started`` was refused."""
        self._refused.append(started)
        while self._refused[0] < started - KEPT:
            self._refused.popleft()

    def let_through(self, before: float, since: float) -> tuple[int, float, float, float]:
        """Requests started in [``since``, ``before``) and not refused (so far: one still
        in flight that left before a refused one was let through), when the first and
        the last of them started (``before`` when none), and the shortest time between
        two of them (0 when fewer than two)."""
        refused = Counter(t for t in self._refused if since <= t < before)
        count, first, last, gap = 0, before, -math.inf, math.inf
        for t in self._times:
            if since <= t < before:
                if refused[t]:
                    refused[t] -= 1
                    continue
                count += 1
                first = min(first, t)
                gap = min(gap, t - last)
                last = t
        return count, first, last if count else before, gap if count > 1 else 0.0

    def before(self, started: float) -> float | None:
        """When the start before the one at ``started`` was (None: none kept)."""
        earlier = [t for t in self._times if t < started]
        return earlier[-1] if earlier else None

    def answered(self, now: float) -> None:
        """An answer that was not a refusal came."""
        self._answered.append(now)

    def delivery_rate(self) -> float:
        """Answers let through per second over the last RECENT (0: too few to tell)."""
        answered = self._answered
        if len(answered) < 2 or answered[-1] <= answered[0]:
            return 0.0
        return (len(answered) - 1) / (answered[-1] - answered[0])

    def recent_rate(self) -> float:
        """Starts per second over the last RECENT starts (0: too few to tell)."""
        count = min(len(self._times), RECENT)
        if count < 2:
            return 0.0
        newest, oldest = self._times[-1], self._times[-count]  # read from the newest end
        if newest <= oldest:
            return 0.0
        return (count - 1) / (newest - oldest)
