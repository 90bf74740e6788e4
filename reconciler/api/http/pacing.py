"""One pacer per run, shared by every worker, to stay under the API's rate limit.

The platform does not publish its limit; it answers 429 with Retry-After when
it is exceeded. On the first 429 the pacer pauses every worker for Retry-After
and from then on spaces request starts at 90% of the rate that was succeeding
just before, raising it slowly while answers keep succeeding. The 429s of
requests already in flight during a pause count as the same event.

No wait is unbounded: a worker whose turn would come after its own deadline,
or whose run has stopped, is told so at once (``NoTurn``) instead of sleeping.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable

from reconciler.stop import Stop

_WINDOW = 1.0  # seconds of recent successes used to estimate the limit
_BACKOFF = 0.9  # share of the observed rate kept after a 429
_INCREASE = 0.01  # requests/second added per success while paced
_MIN_RATE = 1.0  # requests/second: pacing never stops work altogether
DEFAULT_PAUSE = 1.0  # seconds every worker waits after a 429 without Retry-After
SLEEP_SLICE = 0.25  # longest single sleep: a pause or a stop is noticed this soon


class NoTurn(Exception):
    """The caller's turn would not come in time, or its run stopped while it waited."""

    def __init__(self, wait: float, stopped: bool) -> None:
        super().__init__()  # no text: its one catcher (exchange) says what happened
        self.wait = wait  # seconds until the turn would have come
        self.stopped = stopped


class RequestPacer:
    def __init__(
        self,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._clock = clock
        self._sleep = sleep
        self._lock = threading.Lock()
        self._paused_until = 0.0
        self._next_start = 0.0
        self._rate: float | None = None  # requests per second; None: not limited yet
        self._recent: deque[float] = deque()
        self.rate_limited_events = 0

    @property
    def rate(self) -> float | None:
        return self._rate

    def wait_turn(self, *, stop: Stop | None = None, give_up_at: float | None = None) -> None:
        """Block until this worker may start a request.

        Raises NoTurn rather than wait past ``give_up_at`` (a clock time), or
        once ``stop`` is set while a wait is still needed.
        """
        while True:
            with self._lock:
                now = self._clock()
                start = max(now, self._paused_until)
                if self._rate is not None:
                    start = max(start, self._next_start)
                if start <= now:
                    if self._rate is not None:
                        self._next_start = max(self._next_start, now) + 1.0 / self._rate
                    return
            if stop is not None and stop.is_set():
                raise NoTurn(start - now, stopped=True)
            if give_up_at is not None and start > give_up_at:
                raise NoTurn(start - now, stopped=False)
            # Sleep outside the lock, then look again: a 429 may have paused us.
            self._sleep(min(start - now, SLEEP_SLICE))

    def on_success(self) -> None:
        with self._lock:
            now = self._clock()
            self._recent.append(now)
            while self._recent and self._recent[0] < now - _WINDOW:
                self._recent.popleft()
            if self._rate is not None:
                self._rate += _INCREASE

    def on_rate_limited(self, retry_after: float | None) -> None:
        with self._lock:
            now = self._clock()
            if now < self._paused_until:
                return  # an answer to a request sent before this pause began
            self.rate_limited_events += 1
            self._paused_until = now + (retry_after if retry_after else DEFAULT_PAUSE)
            recent = sum(1 for t in self._recent if t >= now - _WINDOW)
            estimate = max(_MIN_RATE, recent * _BACKOFF / _WINDOW)
            if self._rate is None or estimate < self._rate:
                self._rate = estimate
            else:
                self._rate = max(_MIN_RATE, self._rate * _BACKOFF)
            self._next_start = self._paused_until
