"""What became of one call made for an item (an invite read, a write): done, failed, not run.

Three cases, each its own type, matched with ``match`` or ``isinstance``: a
result is never a record of optional parts to be unpacked by assertion. The
API produces them (``api.capacity.concurrency.ordered_map``); the plan consumes readings
without knowing the API: a failure's error is anything that says the little a
plan needs of it (``ReadError``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, Protocol, TypeAlias, TypeVar

from reconciler.errors import ReconcilerError

T_co = TypeVar("T_co", covariant=True)
E_co = TypeVar("E_co", covariant=True)


class ReadError(Protocol):
    """What a plan needs of a failed read: what to show, and whether it ends the run."""

    @property
    def status(self) -> int | None:
        """The HTTP status, when an answer came."""

    @property
    def request_id(self) -> str | None:
        """The server's requestId of the answer, when it gave one."""

    @property
    def run_fatal(self) -> bool:
        """The same would happen to every read (credentials, scope, the server down):
        the run stops rather than list it for each invite."""

    @property
    def message(self) -> str:
        """What went wrong, in words."""


@dataclass(frozen=True, slots=True)
class Done(Generic[T_co]):
    """The call returned ``value``."""

    value: T_co


@dataclass(frozen=True, slots=True)
class Failed(Generic[E_co]):
    """The call failed with ``error``."""

    error: E_co


@dataclass(frozen=True, slots=True)
class NotRun:
    """The run stopped before this call started."""


Outcome: TypeAlias = Done[T_co] | Failed[E_co] | NotRun


def stop_if_run_fatal(error: ReadError) -> None:
    """Raise for an error that would repeat for every invite; per-invite ones pass."""
    if error.run_fatal:
        raise ReconcilerError(f"stopped reading invites: {error}")
