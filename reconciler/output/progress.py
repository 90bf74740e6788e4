"""Progress on stderr: a bar on a terminal; in a CI log, a line every ~10 s and one at the end.

The closing line says only what happened: "stopped after 1,200 of 20,000" when a
run ends early, never "20,000 of 20,000". Callers close the progress before an
error is printed, so the error is the last thing a log shows.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

import click

LOG_INTERVAL = 10.0  # seconds between progress lines off a terminal


class Pace(Protocol):
    """What progress reads of the run's pacer (``api.capacity.RequestPacer``)."""

    said_limited: bool  # the run has already told the user of the server's limit

    @property
    def rate(self) -> float | None:
        """Requests per second the server allows, once it has refused one."""

    def settled_rate(self, *, early: bool = False) -> float | None:
        """The rate it settles at, once it has had time to (or now, when ``early``)."""


def per_second(rate: float) -> str:
    return f"{rate:.0f}" if rate >= 3 else f"{rate:.1f}"


def duration(seconds: float) -> str:
    """A short human duration: "14 s", "3 min", "1 h 5 min"."""
    if seconds < 59.5:
        return f"{seconds:.0f} s"
    minutes = max(1, int(seconds // 60))
    if minutes < 60:
        return f"{minutes} min"
    return f"{minutes // 60} h {minutes % 60} min"


class Progress:
    def __init__(
        self,
        label: str,
        total: int,
        *,
        enabled: bool = True,
        clock: Callable[[], float] = time.monotonic,
        interactive: bool | None = None,
        interval: float = LOG_INTERVAL,
        ticker: bool = True,
        pace: Pace | None = None,
        failed_word: str = "failed",
    ) -> None:
        self.label = label
        # What the work counted `failed` is called: apply's is not all failed (a conflict,
        # a diverged value, a re-send whose outcome is unknown), and "failed" would say a
        # re-send that may have gone out did not.
        self.failed_word = failed_word
        # Under a rate limit the time left is the work left over the allowed rate:
        # an average over the run so far would count its slow start and its refusals.
        self._pace = pace
        self.total = total
        self.done = 0
        self.failed = 0
        self._clock = clock
        self._started = self._last_line = clock()
        self._interval = interval
        # With stderr closed (``2>&-``) sys.stderr is None: nothing to show, not an error.
        self._enabled = enabled and total > 0 and sys.stderr is not None
        self._closed = False
        self._bar: Any = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._ticker: threading.Thread | None = None
        if interactive is None:
            interactive = sys.stderr is not None and sys.stderr.isatty()
        if self._enabled and interactive:
            self._bar = click.progressbar(
                length=total, label=label, file=sys.stderr, show_pos=True, show_eta=True
            )
            self._bar.__enter__()
        elif self._enabled and ticker:
            # A slow request must not leave a CI log silent: the ticker prints when
            # nothing finished for an interval, advance() when something did.
            self._ticker = threading.Thread(target=self._tick, name="progress", daemon=True)
            self._ticker.start()

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.finish()

    def advance(self, count: int = 1, *, failed: bool = False) -> None:
        """Count finished work; ``failed`` work was tried and did not succeed."""
        with self._lock:
            if failed:
                self.failed += count
            else:
                self.done += count
            if self._bar is not None:
                rate = self._rate()
                if rate:
                    self._bar.avg = [1.0 / rate]  # click's ETA: time per item × items left
                self._bar.update(count)
            else:
                self._line_if_due()
            self._say_limited(settled=True)

    def _rate(self) -> float | None:
        return self._pace.rate if self._pace is not None else None

    def _say_limited(self, *, settled: bool) -> None:
        """Once per run, when the pacer has found the server's rate. Hold the lock."""
        pace = self._pace
        if pace is None or pace.said_limited or not self._enabled or self._closed:
            return
        rate = pace.settled_rate(early=not settled)
        if rate is None:
            return
        pace.said_limited = True
        self._message(f"the server limits requests: slowed to about {per_second(rate)} per second")

    def _message(self, text: str) -> None:
        if self._bar is None:
            click.echo(text, err=True)
            return
        sys.stderr.write("\r\x1b[2K")  # over the bar's line; the next update draws it again
        click.echo(text, err=True)

    def _line_if_due(self) -> None:
        if self._enabled and not self._closed and self._clock() - self._last_line >= self._interval:
            self._last_line = self._clock()
            click.echo(self._running_line(), err=True)

    def _tick(self) -> None:
        while not self._stop.wait(min(self._interval / 4, 1.0)):
            with self._lock:
                self._line_if_due()
                self._say_limited(settled=True)

    def echo(self, text: str, err: bool = False) -> None:
        """Print a result line on stdout (stderr once stdout is gone) clear of the bar."""
        if self._bar is None:
            click.echo(text, err=err)
            return
        sys.stderr.write("\r\x1b[2K")  # clear the bar's line, write, draw the bar again
        sys.stderr.flush()
        click.echo(text, err=err)
        if not err:
            sys.stdout.flush()
        self._bar.render_progress()

    def finish(self) -> None:
        """Close the bar or print the closing line; only the first call does anything."""
        self._stop.set()
        if self._ticker is not None:
            self._ticker.join()
            self._ticker = None
        if self._closed:
            return
        with self._lock:
            self._say_limited(settled=False)  # a short run: the rate it had at the end
        self._closed = True
        complete = self.done + self.failed >= self.total
        if self._bar is not None:
            self._bar.__exit__(None, None, None)
            self._bar = None
            if complete:
                return  # the finished bar says it all
        if self._enabled:
            click.echo(self._closing_line(), err=True)

    def _running_line(self) -> str:
        finished = self.done + self.failed
        elapsed = self._clock() - self._started
        line = f"{self.label}: {finished:,} of {self.total:,} ({finished * 100 // self.total}%)"
        if self.failed:
            line += f", {self.failed:,} {self.failed_word}"
        line += f", {duration(elapsed)} elapsed"
        rate = self._rate()
        if rate:
            line += f", ~{duration((self.total - finished) / rate)} left"
        elif finished:
            line += f", ~{duration(elapsed / finished * (self.total - finished))} left"
        return line

    def _closing_line(self) -> str:
        elapsed = duration(self._clock() - self._started)
        failed = f", {self.failed:,} {self.failed_word}" if self.failed else ""
        if self.done + self.failed >= self.total:
            return f"{self.label}: {self.done:,} of {self.total:,} done{failed}, in {elapsed}."
        return (
            f"{self.label}: stopped after {self.done:,} of {self.total:,} done{failed}, "
            f"in {elapsed}."
        )
