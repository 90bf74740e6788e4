"""Asking before a write: yes from a person at a terminal, never from silence."""

from __future__ import annotations

import sys
from typing import TextIO

import click

from reconciler.errors import ReconcilerError


def stdin_is_terminal() -> bool:
    """True when a person can answer: stdin is open (not `<&-`) and a terminal."""
    return _is_terminal(sys.stdin)


def _is_terminal(stream: TextIO | None) -> bool:
    if stream is None:  # started with it closed
        return False
    try:
        return stream.isatty()
    except (OSError, ValueError):  # a stream closed or detached under us
        return False


def show_on_stderr_too(*, action: str, instead: str = "") -> bool:
    """Whether what a person is asked about must be shown on stderr as well as stdout.

    Only when stdout is not a terminal (`reconcile apply > apply.txt`) and stderr is:
    the question must never be about something that went unseen into a file. With
    neither a terminal, nobody can see it: refused at once, before any work.
    """
    if _is_terminal(sys.stdout):
        return False
    if _is_terminal(sys.stderr):
        return True
    raise ReconcilerError(
        f"refusing to {action} without confirmation: neither stdout nor stderr is a "
        "terminal, so what you would be asked about could not be seen; "
        f"pass --auto-approve{instead}"
    )


def require_terminal(*, action: str, instead: str = "") -> None:
    """Refuse at once when nobody could answer a question: call it before any work.

    A CI job without ``--auto-approve`` then fails in a second, before it reads
    thousands of invites only to refuse at the end.
    """
    if not stdin_is_terminal():
        raise ReconcilerError(
            f"refusing to {action} without confirmation: standard input is not a terminal; "
            f"pass --auto-approve{instead}"
        )


def confirm(question: str, *, action: str, instead: str = "") -> None:
    """Go on only when a person at a terminal answers yes to ``question``.

    Without a terminal nobody can answer, and silence must not count as yes:
    refuse, so that a CI job never writes without ``--auto-approve``. ``action``
    names what is refused ("apply"); ``instead`` offers another way to do it.
    """
    require_terminal(action=action, instead=instead)
    # On stderr, unless only stdout is a terminal (`reconcile apply 2> errors.txt`): a
    # question asked into a file leaves the person waiting in silence.
    err = _is_terminal(sys.stderr) or not _is_terminal(sys.stdout)
    try:
        if err:
            yes = click.confirm(question, default=False, err=True)
        else:  # input() at a terminal writes its prompt to fd 2: the question is ours to write
            click.echo(f"{question} [y/N]: ", nl=False)
            yes = click.confirm("", default=False, prompt_suffix="", show_default=False)
    except click.Abort:  # Ctrl-C or end of input at the prompt: click would say `Aborted.`
        click.echo("", err=err)  # the prompt's line ends here, not in the next message
        raise ReconcilerError(
            f"{action} cancelled at the prompt (Ctrl-C or end of input); nothing was changed"
        ) from None
    if not yes:
        raise ReconcilerError(f"{action} cancelled; nothing was changed")
