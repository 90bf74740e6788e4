"""What the sandbox saw: each request with its status and arrival time."""

from __future__ import annotations

import threading
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, NamedTuple


class RecordedRequest(NamedTuple):
    method: str
    path: str
    body: Any
    status: int
    arrived: float = 0.0  # time.monotonic() when the request was read


@dataclass
class SandboxStats:
    """What the sandbox saw; tests and benchmarks read it."""

    statuses: Counter[int] = field(default_factory=Counter)
    started: Counter[str] = field(default_factory=Counter)  # requests begun, by method
    requests: list[RecordedRequest] = field(default_factory=list)  # recorded as they end
    in_flight: int = 0
    max_in_flight: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def begin(self, method: str) -> None:
        with self.lock:
            self.started[method] += 1
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)

    def end(self, record: RecordedRequest) -> None:
        with self.lock:
            self.in_flight -= 1
            self.statuses[record.status] += 1
            self.requests.append(record)

    def calls(self, method: str, path_prefix: str = "") -> list[RecordedRequest]:
        with self.lock:
            return [
                r
                for r in self.requests
                if r.method == method and r.path.startswith(path_prefix) and r.status
            ]

    @property
    def total(self) -> int:
        with self.lock:
            return sum(self.statuses.values())

    def arrivals(self) -> list[float]:
        """When each request arrived (time.monotonic()), in arrival order."""
        with self.lock:
            return sorted(r.arrived for r in self.requests)
