"""What a person reads besides the plan: colour, the lines on stderr, the `--verbose` log.

Colour: `--color`, then NO_COLOR and TERM, then whether it is a terminal. One rule for
both streams: stdout's colour (the plan) and stderr's (the `error:` and `warning:`
labels, and the plan shown there before a question) are each decided by ``use_color``
for that stream, from the same `--color` choice. The `error:` lines a command ends with
when invites failed (``echo_errors``), and the `--verbose` log (``setup_logging``), go
to stderr, redacted and escaped like every other output.

Progress (``Progress``), on stderr too: a bar on a terminal; in a CI log, a line every
~10 s and one at the end. The closing line says only what happened: "stopped after
1,200 of 20,000" when a run ends early, never "20,000 of 20,000". Callers close the
progress before an error is printed, so the error is the last thing a log shows.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Protocol, TextIO

import click

from reconciler.errors import FileProblem
from reconciler.safetext import escape, redact_and_escape

if TYPE_CHECKING:
    from reconciler.model.invite import SourceLocation
    from reconciler.plan.model import FailedInvite

COLOR_CHOICES = ("auto", "always", "never")
COLOR_CHOICE = "reconciler.color"  # ctx.meta: the --color given (commands without it: auto)


def use_color(
    choice: str = "auto", env: Mapping[str, str] | None = None, stream: TextIO | None = None
) -> bool:
    """`always`/`never` as asked; `auto`: a terminal, NO_COLOR unset or empty, TERM not dumb."""
    if choice in ("always", "never"):
        return choice == "always"
    env = os.environ if env is None else env
    if env.get("NO_COLOR") or env.get("TERM") == "dumb":  # no-color.org: a non-empty value
        return False
    stream = sys.stdout if stream is None else stream
    return bool(getattr(stream, "isatty", lambda: False)())


def _coloured(line: str | FileProblem) -> str:
    """``line`` with its `error:` or `warning:` label coloured (an input problem: an error's
    place, or its `warning:` label), as it is said: ``str()`` of a problem, escaped."""
    text = str(line)
    if isinstance(line, FileProblem):
        where = text[: len(text) - len(escape(line.message))]  # "path:line:col: " (+ "warning: ")
        if line.is_error:
            return click.style(where.rstrip(), fg="red", bold=True) + text[len(where) - 1 :]
        text = text[len(where) - len("warning: ") :]
        return where[: -len("warning: ")] + _coloured(text)
    for label, fg in (("error:", "red"), ("warning:", "yellow")):
        if text.startswith(label):
            return click.style(label, fg=fg, bold=True) + text[len(label) :]
    return text


def echo_err(line: str | FileProblem, meta: Mapping[str, object] | None = None) -> None:
    """A line (or an input problem) on stderr, coloured as stderr's rule says: ``use_color``
    for stderr, with this run's `--color`, which the option left in ``meta`` (the run's
    click meta; the current context's when None)."""
    if meta is None:
        context = click.get_current_context(silent=True)
        meta = context.meta if context is not None else {}
    choice = meta.get(COLOR_CHOICE, "auto")
    color = use_color(choice if isinstance(choice, str) else "auto", stream=sys.stderr)
    click.echo(_coloured(line) if color else str(line), err=True, color=True if color else None)


echo_problem = echo_err  # the name the input problems' callers know


# The `error:` lines every command ends with on stderr when some invites failed.
#
# stderr carries errors and an error is the last thing printed, so the reasons shown inside a plan
# or a progress log on stdout are repeated here, bounded.

SHOWN = 10  # a run over thousands of invites must not bury the last line


# Whenever an invitation may have gone out: never advice to send it again.
RESEND_UNKNOWN_ADVICE = (
    "re-send unknown: check with the platform or the invitee before sending again"
)


def resend_advice(invite_id: str) -> str:
    """For a re-send that certainly was not made: how to make it."""
    return f"send it with: reconcile resend {redact_and_escape(invite_id)}"


_ADVICE = {  # by the HTTP status an invite failed with; {entry}: what to fix
    400: "fix {entry} (`reconcile validate`), then try again",
    422: "fix {entry} (`reconcile validate`), then try again",
    409: "the invite changed meanwhile; make a new plan",
    401: "check the credentials and their scopes",
    403: "check the credentials and their scopes",
    413: "a proxy or gateway in front of the API limits request bodies; ask its operators",
}


def what_to_do(
    status: int | None, source: SourceLocation | None, request_id: str | None = None
) -> str:
    """Advice for one failed invite, by the HTTP status it failed with; only about what
    exists (no requestId to quote when the answer had none)."""
    entry = f"the entry at {source}" if source is not None else "it from the command"
    if status == 404:
        if source is None:
            return "check the id"
        # A Terraform user expects a missing invite to be created: say that it is not.
        return (
            f"check the id; reconcile only manages invites that already exist on the platform "
            f"(it never creates, deletes or revokes one): create the invite on the platform, "
            f"or remove {entry}, which only stops managing it"
        )
    if status in _ADVICE:
        return _ADVICE[status].format(entry=entry)
    if request_id:
        return "try again later; if it persists, contact support with the requestId"
    # No requestId: the answer came from something in front of the API, or from nothing.
    return "try again later; if it persists, check the network path to the API (proxy, gateway)"


def echo_errors(failures: Iterable[FailedInvite]) -> None:
    """Print the `error:` lines on stderr: call it last, after any summary or progress line."""
    failed = list(failures)
    for f in failed[:SHOWN]:
        advice = f.advice or what_to_do(f.status, f.source, f.request_id)
        echo_err(f"error: {redact_and_escape(f.id)}: {redact_and_escape(f.message)}; {advice}")
    if len(failed) > SHOWN:
        echo_err(f"error: and {len(failed) - SHOWN} more failed invites (listed above)")


# `--verbose`: the tool's own log records on stderr (never a secret or token).


class _CleanFormatter(logging.Formatter):
    # Log messages may quote server answers: redact and escape them like all other output.
    def format(self, record: logging.LogRecord) -> str:
        return redact_and_escape(super().format(record))


def setup_logging(verbose: bool) -> None:
    if not verbose or sys.stderr is None:  # stderr closed (2>&-): nowhere to log to
        return
    logger = logging.getLogger("reconciler")
    for old in [h for h in logger.handlers if getattr(h, "_reconciler", False)]:
        logger.removeHandler(old)  # one handler, on this run's stderr, even when run in-process
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_CleanFormatter("%(asctime)s %(name)s: %(message)s", "%H:%M:%S"))
    handler._reconciler = True  # type: ignore[attr-defined]
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)


# Progress.

LOG_INTERVAL = 10.0  # seconds between progress lines off a terminal


class Pace(Protocol):
    """What progress reads of the run's pacer (``api.capacity.RequestPacer``)."""

    said_limited: bool  # the run has already told the user of the server's limit

    @property
    def rate(self) -> float | None:
        """Requests per second the server allows, once it has refused one."""

    def settled_rate(self, *, early: bool = False) -> float | None:
        """The rate it settles at, once it has had time to (or now, when ``early``)."""


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
        clock: Callable[[], float] = time.monotonic,
        interactive: bool | None = None,
        interval: float = LOG_INTERVAL,
        ticker: bool = True,
        pace: Pace | None = None,
        failed_word: str = "failed",
    ) -> None:
        self.label, self.total, self.done, self.failed = label, total, 0, 0
        # What the work counted `failed` is called: apply's is not all failed (a conflict,
        # a diverged value, a re-send whose outcome is unknown), and "failed" would say a
        # re-send that may have gone out did not.
        self.failed_word = failed_word
        # Under a rate limit the time left is the work left over the allowed rate:
        # an average over the run so far would count its slow start and its refusals.
        self._pace = pace
        self._clock, self._interval = clock, interval
        self._started = self._last_line = clock()
        # With stderr closed (``2>&-``) sys.stderr is None: nothing to show, not an error.
        self._enabled = total > 0 and sys.stderr is not None
        self._closed = False
        self._bar: Any = None
        self._lock, self._stop = threading.Lock(), threading.Event()
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
                rate = self._pace and self._pace.rate
                if rate:
                    self._bar.avg = [1.0 / rate]  # click's ETA: time per item × items left
                self._bar.update(count)
            else:
                self._line_if_due()
            self._say_limited(settled=True)

    def _say_limited(self, *, settled: bool) -> None:
        """Once per run, when the pacer has found the server's rate. Hold the lock."""
        pace = self._pace
        if pace is None or pace.said_limited or not self._enabled or self._closed:
            return
        rate = pace.settled_rate(early=not settled)
        if rate is None:
            return
        pace.said_limited = True
        if self._bar is not None:
            sys.stderr.write("\r\x1b[2K")  # over the bar's line; the next update draws it again
        shown = f"{rate:.0f}" if rate >= 3 else f"{rate:.1f}"
        click.echo(f"the server limits requests: slowed to about {shown} per second", err=True)

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
        rate = self._pace and self._pace.rate
        if rate:
            line += f", ~{duration((self.total - finished) / rate)} left"
        elif finished:
            line += f", ~{duration(elapsed / finished * (self.total - finished))} left"
        return line

    def _closing_line(self) -> str:
        elapsed = duration(self._clock() - self._started)
        failed = f", {self.failed:,} {self.failed_word}" if self.failed else ""
        stopped = "" if self.done + self.failed >= self.total else "stopped after "
        return f"{self.label}: {stopped}{self.done:,} of {self.total:,} done{failed}, in {elapsed}."
