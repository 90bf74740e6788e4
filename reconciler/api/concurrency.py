"""Run one network call per item with a bounded number in flight.

Results come back in the order of the items, whatever order the answers
arrive in, so output is stable. The main thread only waits in short slices,
so Ctrl-C and SIGTERM handlers run promptly. How many calls are in flight is
the limiter's current limit, read before each start; each call's duration and
whether the server refused it go back to the limiter.
"""

from __future__ import annotations

import logging
import queue
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from functools import partial
from typing import Any, TypeVar

from reconciler.api.exceptions import ApiError, RateLimited, ServerError
from reconciler.api.limiter import FixedLimit, Limiter
from reconciler.model.outcome import Done, Failed, NotRun, Outcome
from reconciler.stop import Stop

T = TypeVar("T")
R = TypeVar("R")

_WAIT_SLICE = 0.2  # seconds the main thread blocks before looking at signals again
log = logging.getLogger("reconciler.concurrency")


def ordered_map(
    call: Callable[[T], R],
    items: Sequence[T],
    parallelism: int | Limiter,
    stop: Stop | None = None,
) -> Iterator[tuple[T, Outcome[R, ApiError]]]:
    """Yield ``(item, outcome)`` in item order; once ``stop`` is set, no new call starts.

    ``parallelism`` is a number of calls in flight, or a limiter that sets it as
    the answers come. If the consumer abandons the iteration, ``stop`` is set for it.
    """
    limiter = FixedLimit(parallelism) if isinstance(parallelism, int) else parallelism
    timed = partial(_timed, call, limiter)
    finished: queue.SimpleQueue[int] = queue.SimpleQueue()
    futures: dict[int, Future[R]] = {}
    ready: set[int] = set()
    next_submit = next_yield = in_flight = 0
    with ThreadPoolExecutor(max_workers=limiter.cap, thread_name_prefix="api") as pool:
        try:
            while next_yield < len(items):
                limit = limiter.limit
                # How far ahead of the oldest unanswered item we may run: bounds memory
                # held for out-of-order answers while one slow answer holds up the output.
                window = limit * 8
                while (
                    in_flight < limit
                    and next_submit < len(items)
                    and next_submit - next_yield < window
                    and not (stop and stop.is_set())
                ):
                    future = pool.submit(timed, items[next_submit])
                    future.add_done_callback(partial(_put_index, finished, next_submit))
                    futures[next_submit] = future
                    next_submit += 1
                    in_flight += 1
                if next_yield in ready:
                    ready.discard(next_yield)
                    yield items[next_yield], _outcome(futures.pop(next_yield))
                    next_yield += 1
                elif next_yield >= next_submit and in_flight == 0:
                    yield items[next_yield], NotRun()  # stopped before it started
                    next_yield += 1
                else:
                    try:
                        ready.add(finished.get(timeout=_WAIT_SLICE))
                        in_flight -= 1
                    except queue.Empty:
                        pass
        except BaseException:
            # The consumer gave up (a run-fatal error, Ctrl-C): calls in flight
            # stop retrying, and what has not started never will.
            if stop is not None:
                stop.set("the run ended before every call was made")
            for future in futures.values():
                future.cancel()
            raise
    if items:
        log.debug("requests in flight: %s", limiter.describe())


def _timed(call: Callable[[T], R], limiter: Limiter, item: T) -> R:
    limiter.begin()
    started = time.monotonic()
    refused = False
    try:
        return call(item)
    except (RateLimited, ServerError):
        refused = True
        raise
    finally:
        limiter.sample(time.monotonic() - started, refused)


def _put_index(finished: queue.SimpleQueue[int], index: int, _: Future[Any]) -> None:
    finished.put(index)


def _outcome(future: Future[R]) -> Outcome[R, ApiError]:
    error = future.exception()
    if error is None:
        return Done(future.result())
    if isinstance(error, ApiError):
        return Failed(error)
    raise error
