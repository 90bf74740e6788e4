"""What a person reads besides the plan: colour, the lines on stderr, the `--verbose` log.

Colour: `--color`, then NO_COLOR and TERM, then whether it is a terminal. One rule for
both streams: stdout's colour (the plan) and stderr's (the `error:` and `warning:`
labels, and the plan shown there before a question) are each decided by ``use_color``
for that stream, from the same `--color` choice. The `error:` lines a command ends with
when invites failed (``echo_errors``), and the `--verbose` log (``setup_logging``), go
to stderr, redacted and escaped like every other output.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, TextIO

import click

from reconciler.errors import FileProblem
from reconciler.safetext import escape, redact_and_escape

if TYPE_CHECKING:
    from reconciler.model.invite import SourceLocation
    from reconciler.plan.model import FailedInvite

COLOR_CHOICES = ("auto", "always", "never")
COLOR_CHOICE = "reconciler.color"  # ctx.meta: the --color given (commands without it: auto)
_LABELS = {"error:": "red", "warning:": "yellow"}


def use_color(
    choice: str = "auto", env: Mapping[str, str] | None = None, stream: TextIO | None = None
) -> bool:
    """`always`/`never` as asked; `auto`: a terminal, NO_COLOR unset or empty, TERM not dumb."""
    if choice == "always":
        return True
    if choice == "never":
        return False
    env = os.environ if env is None else env
    if env.get("NO_COLOR"):  # https://no-color.org: only a non-empty value counts
        return False
    if env.get("TERM") == "dumb":
        return False
    stream = sys.stdout if stream is None else stream
    return bool(getattr(stream, "isatty", lambda: False)())


def stderr_color(meta: Mapping[str, object] | None = None) -> bool:
    """Whether stderr gets colour: ``use_color`` for stderr, with this run's `--color`.

    ``meta`` is the run's click meta (the current context's when None): where the
    option, if the command has one, left its choice.
    """
    if meta is None:
        context = click.get_current_context(silent=True)
        meta = context.meta if context is not None else {}
    choice = meta.get(COLOR_CHOICE, "auto")
    return use_color(choice if isinstance(choice, str) else "auto", stream=sys.stderr)


def labelled(line: str, color: bool) -> str:
    """``line`` with a leading `error:` or `warning:` label coloured when ``color``."""
    if color:
        for label, fg in _LABELS.items():
            if line.startswith(label):
                return click.style(label, fg=fg, bold=True) + line[len(label) :]
    return line


def echo_err(line: str, meta: Mapping[str, object] | None = None) -> None:
    """A line on stderr whose `error:` or `warning:` label is coloured as stderr's rule says."""
    color = stderr_color(meta)
    click.echo(labelled(line, color), err=True, color=True if color else None)


def problem_line(problem: FileProblem, color: bool) -> str:
    """An input problem as ``str(problem)`` says it, its place (an error's) or its
    `warning:` label (a warning's) coloured when ``color``."""
    text = str(problem)
    if not color:
        return text
    message = escape(problem.message)
    where = text[: len(text) - len(message)]  # "path:line:column: ", then "warning: " or not
    if problem.is_error:
        return click.style(where.rstrip(), fg="red", bold=True) + " " + message
    place = where[: -len("warning: ")]
    return place + click.style("warning:", fg="yellow", bold=True) + " " + message


def echo_problem(problem: FileProblem, meta: Mapping[str, object] | None = None) -> None:
    """An input problem on stderr, coloured as stderr's rule says."""
    color = stderr_color(meta)
    click.echo(problem_line(problem, color), err=True, color=True if color else None)


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
    if status in (400, 422):
        return f"fix {entry} (`reconcile validate`), then try again"
    if status == 409:
        return "the invite changed meanwhile; make a new plan"
    if status in (401, 403):
        return "check the credentials and their scopes"
    if status == 413:
        return "a proxy or gateway in front of the API limits request bodies; ask its operators"
    if request_id:
        return "try again later; if it persists, contact support with the requestId"
    # No requestId: the answer came from something in front of the API, or from nothing.
    return "try again later; if it persists, check the network path to the API (proxy, gateway)"


def error_lines(failures: Iterable[FailedInvite]) -> list[str]:
    failed = list(failures)
    lines = [
        f"error: {redact_and_escape(f.id)}: {redact_and_escape(f.message)}; "
        f"{f.advice or what_to_do(f.status, f.source, f.request_id)}"
        for f in failed[:SHOWN]
    ]
    if len(failed) > SHOWN:
        lines.append(f"error: and {len(failed) - SHOWN} more failed invites (listed above)")
    return lines


def echo_errors(failures: Iterable[FailedInvite]) -> None:
    """Print the `error:` lines on stderr: call it last, after any summary or progress line."""
    for line in error_lines(failures):
        echo_err(line)


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
