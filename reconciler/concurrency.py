"""Run one network call per item with a bounded number in flight.

Results come back in the order of the items, whatever order the answers
arrive in, so output is stable. The main thread only waits in short slices,
so Ctrl-C and SIGTERM handlers run promptly.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import Generic, NamedTuple, TypeVar

from reconciler.api.errors import ApiError

T = TypeVar("T")
R = TypeVar("R")


class Outcome(NamedTuple, Generic[R]):
    """What happened to one item: a value, an API error, or not run at all."""

    value: R | None = None
    error: ApiError | None = None
    ran: bool = True


NOT_RUN: Outcome = Outcome(ran=False)


def ordered_map(
    call: Callable[[T], R],
    items: Sequence[T],
    parallelism: int,
    stop: threading.Event | None = None,
) -> Iterator[tuple[T, Outcome[R]]]:
    """Yield ``(item, outcome)`` in item order; once ``stop`` is set, no new call starts."""
    stop = stop or threading.Event()
    window = max(1, parallelism) * 8  # how far ahead of the slowest answer we may run
    futures: dict[int, Future[R]] = {}
    next_submit = next_yield = 0
    with ThreadPoolExecutor(max_workers=max(1, parallelism), thread_name_prefix="api") as pool:
        try:
            while next_yield < len(items):
                in_flight = sum(1 for f in futures.values() if not f.done())
                while (
                    not stop.is_set()
                    and next_submit < len(items)
                    and in_flight < parallelism
                    and next_submit - next_yield < window
                ):
                    futures[next_submit] = pool.submit(call, items[next_submit])
                    next_submit += 1
                    in_flight += 1
                head = futures.get(next_yield)
                if head is None:  # stopped before this item was started
                    yield items[next_yield], NOT_RUN
                    next_yield += 1
                    continue
                if not head.done():
                    wait(list(futures.values()), timeout=0.2, return_when=FIRST_COMPLETED)
                    continue
                del futures[next_yield]
                yield items[next_yield], _outcome(head)
                next_yield += 1
        finally:
            # A consumer that stops early: drop what has not started yet.
            for future in futures.values():
                future.cancel()


def _outcome(future: Future[R]) -> Outcome[R]:
    error = future.exception()
    if error is None:
        return Outcome(value=future.result())
    if isinstance(error, ApiError):
        return Outcome(error=error)
    raise error
