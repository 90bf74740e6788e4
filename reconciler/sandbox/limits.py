"""Rate limits the sandbox can enforce: the platform's own, and a gateway's in front of it."""

from __future__ import annotations

import threading
import time


class TokenBucket:
    """The platform's own limit: a second's worth of burst, then `rate` per second."""

    def __init__(self, rate: float) -> None:
        self.rate = rate
        self.capacity = max(1.0, rate)  # one second's worth of burst
        self.tokens = self.capacity
        self.updated = time.monotonic()
        self.lock = threading.Lock()

    def take(self) -> float:
        """0 if allowed, else the seconds until a request would be."""
        with self.lock:
            now = time.monotonic()
            self.tokens = min(self.capacity, self.tokens + (now - self.updated) * self.rate)
            self.updated = now
            if self.tokens >= 1:
                self.tokens -= 1
                return 0.0
            return (1 - self.tokens) / self.rate


class LeakyBucket:
    """nginx's `limit_req` with no burst: a steady rate, and every early request refused.

    Refused requests do not count (nginx only moves its clock on a request it lets
    through), so a client that keeps knocking is not punished beyond its refusals.
    """

    def __init__(self, rate: float) -> None:
        self.interval = 1.0 / rate
        self.last: float | None = None
        self.lock = threading.Lock()

    def take(self) -> float:
        """0 if let through, else the seconds until a request would be."""
        with self.lock:
            now = time.monotonic()
            if self.last is not None and now - self.last < self.interval:
                return self.interval - (now - self.last)
            self.last = now
            return 0.0
