"""Whether output gets colour: `--color`, then NO_COLOR and TERM, then whether it is a terminal.

One rule for both streams: stdout's colour (the plan) and stderr's (the `error:` and
`warning:` labels, and the plan shown there before a question) are each decided by
``use_color`` for that stream, from the same `--color` choice.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from typing import TextIO

import click

from reconciler.errors import FileProblem
from reconciler.safetext import escape

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
