"""Run one network call per item with a bounded number in flight, within the run's
capacity (``capacity_for``: one pacer and one in-flight limit shared by every request).

Results come back in the order of the items, whatever order the answers arrive in, so
output is stable. The main thread only waits in short slices, so Ctrl-C and SIGTERM
handlers run promptly. How many calls are in flight is the limiter's current limit,
read before each start; each call's duration and whether the server refused it go back
to the limiter.

``Stop`` is the run's one stop: set on an interrupt, a run-fatal error or lost stdout.
Once set, calls in flight finish, none is retried, no worker waits for a turn and no
new call starts. The API client, this map, the applier and the interrupt handler are
all handed the same ``Stop``, by that name.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Generator, Sequence
from typing import Any, TypeVar

from reconciler.api.capacity import FixedLimit, Limiter
from reconciler.api.exceptions import ApiError, RateLimited, ServerError
from reconciler.model.invite import Done, Failed, NotRun, Outcome


class Stop(threading.Event):
    """An event with the reason a report gives for it."""

    reason: str | None = None  # why the run stopped; None while it has not

    def set(self, reason: str) -> None:  # type: ignore[override]  # a stop says why
        # The latest reason is the one reported: stdout lost after an interrupt is
        # why the report went to stderr. (A second interrupt quits before any report.)
        self.reason = reason
        super().set()

    def __repr__(self) -> str:
        return f"Stop(reason={self.reason!r})" if self.is_set() else "Stop()"


T = TypeVar("T")
R = TypeVar("R")
_Result = tuple[int, Any, BaseException | None]  # an item's index, value, what it raised

_WAIT_SLICE = 0.2  # seconds the main thread blocks before looking at signals again
log = logging.getLogger("reconciler.concurrency")


def ordered_map(
    call: Callable[[T], R],
    items: Sequence[T],
    parallelism: int | Limiter,
    stop: Stop | None = None,
) -> Generator[tuple[T, Outcome[R, ApiError]], None, None]:
    """Yield ``(item, outcome)`` in item order; once ``stop`` is set, no new call starts.

    ``parallelism`` is a number of calls in flight, or a limiter that sets it as the
    answers come. If the consumer abandons the iteration, ``stop`` is set for it, calls
    not started never are, and the ones in flight are waited for.
    """
    limiter = FixedLimit(parallelism) if isinstance(parallelism, int) else parallelism
    workers = _Workers(lambda index: _timed(call, limiter, items[index]), limiter.cap)
    answered: dict[int, _Result] = {}  # answered, waiting for their turn to be yielded
    started = yielded = 0
    try:
        while yielded < len(items):
            # How far ahead of the oldest unanswered item we may run: bounds memory
            # held for out-of-order answers while one slow answer holds up output.
            limit = limiter.limit
            ahead = min(len(items), yielded + limit * 8) - started
            in_flight = started - yielded - len(answered)
            started += workers.start(started, min(ahead, limit - in_flight), in_flight, stop)
            if yielded in answered:
                yield items[yielded], _outcome(answered.pop(yielded))
                yielded += 1
            elif yielded >= started:  # stopped before it started
                yield items[yielded], NotRun()
                yielded += 1
            elif (result := workers.next_result()) is not None:
                answered[result[0]] = result
    except BaseException:
        # The consumer gave up (a run-fatal error, Ctrl-C): calls in flight stop
        # retrying, and what has not started never will.
        if stop is not None:
            stop.set("the run ended before every call was made")
        workers.abandoned = True
        raise
    finally:
        workers.join()
    if items:
        log.debug("requests in flight: %s", limiter.describe())


class _Workers:
    """The threads that make the calls, started as the calls in flight outnumber them
    (never more than ``cap``). An index put in ``_todo`` is a call to make; None ends a
    thread."""

    def __init__(self, call: Callable[[int], Any], cap: int) -> None:
        self._call = call
        self._cap = cap
        self._todo: queue.SimpleQueue[int | None] = queue.SimpleQueue()
        self._done: queue.SimpleQueue[_Result] = queue.SimpleQueue()
        self._threads: list[threading.Thread] = []
        self.abandoned = False  # calls not yet started are skipped

    def start(self, first: int, count: int, in_flight: int, stop: Stop | None) -> int:
        """Start up to ``count`` calls, items ``first`` on, while ``stop`` is not set;
        how many were started."""
        for started in range(max(count, 0)):
            if stop is not None and stop.is_set():
                return started
            if len(self._threads) < min(in_flight + started + 1, self._cap):
                name = f"api_{len(self._threads)}"
                thread = threading.Thread(target=self._work, name=name, daemon=True)
                thread.start()
                self._threads.append(thread)
            self._todo.put(first + started)
        return max(count, 0)

    def next_result(self) -> _Result | None:
        """A call's result, in the order they end; None after waiting a slice for one."""
        try:
            return self._done.get(timeout=_WAIT_SLICE)
        except queue.Empty:
            return None

    def _work(self) -> None:
        while (index := self._todo.get()) is not None:
            if self.abandoned:
                continue
            try:
                self._done.put((index, self._call(index), None))
            except BaseException as error:  # the consumer's thread decides what it means
                self._done.put((index, None, error))

    def join(self) -> None:
        for _ in self._threads:
            self._todo.put(None)
        for thread in self._threads:
            thread.join()


def _timed(call: Callable[[T], R], limiter: Limiter, item: T) -> R:
    started = time.monotonic()
    refused = False
    try:
        return call(item)
    except (RateLimited, ServerError):
        refused = True
        raise
    finally:
        limiter.sample(time.monotonic() - started, refused)


def _outcome(result: _Result) -> Outcome[Any, ApiError]:
    _, value, error = result
    if error is None:
        return Done(value)
    if isinstance(error, ApiError):
        return Failed(error)
    raise error
