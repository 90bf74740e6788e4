"""Progress on stderr: a bar on a terminal, one closing line in CI."""

from __future__ import annotations

import sys
import time
from typing import Any

import click


class Progress:
    def __init__(self, label: str, total: int, *, enabled: bool = True) -> None:
        self.label = label
        self.total = total
        self.done = 0
        self._started = time.monotonic()
        self._enabled = enabled and total > 0
        self._bar: Any = None
        if self._enabled and sys.stderr.isatty():
            self._bar = click.progressbar(
                length=total, label=label, file=sys.stderr, show_pos=True, show_eta=True
            )
            self._bar.__enter__()

    def advance(self, count: int = 1) -> None:
        self.done += count
        if self._bar is not None:
            self._bar.update(count)

    def echo(self, text: str) -> None:
        """Print a result line on stdout without it running into the bar."""
        if self._bar is None:
            click.echo(text)
            return
        sys.stderr.write("\r\x1b[2K")  # clear the bar's line, write, draw the bar again
        sys.stderr.flush()
        click.echo(text)
        sys.stdout.flush()
        self._bar.render_progress()

    def finish(self) -> None:
        if self._bar is not None:
            self._bar.__exit__(None, None, None)
            self._bar = None
        elif self._enabled:
            elapsed = time.monotonic() - self._started
            click.echo(f"{self.label}: {self.done} of {self.total} in {elapsed:.1f}s", err=True)
