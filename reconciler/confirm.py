"""What the commands that write share: asking first, and where writes are recorded."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any, TypeVar

import click

from reconciler.errors import ReconcilerError

F = TypeVar("F", bound=Callable[..., Any])


def auto_approve_option(f: F) -> F:
    return click.option("--auto-approve", is_flag=True, help="Do not ask for confirmation.")(f)


def audit_log_option(f: F) -> F:
    return click.option(
        "--audit-log",
        type=click.Path(dir_okay=False),
        help=(
            "Append to this JSON Lines file an attempt record before each write leaves "
            "and its outcome record after the answer."
        ),
    )(f)


def confirm(question: str, *, action: str, instead: str = "") -> None:
    """Go on only when a person at a terminal answers yes to ``question``.

    Without a terminal nobody can answer, and silence must not count as yes:
    refuse, so that a CI job never writes without ``--auto-approve``. ``action``
    names what is refused ("apply"); ``instead`` offers another way to do it.
    """
    if not sys.stdin.isatty():
        raise ReconcilerError(
            f"refusing to {action} without confirmation: standard input is not a terminal; "
            f"pass --auto-approve{instead}"
        )
    if not click.confirm(question, default=False, err=True):
        raise ReconcilerError(f"{action} cancelled; nothing was changed")
