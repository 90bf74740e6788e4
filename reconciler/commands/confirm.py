"""Asking before a write: yes from a person at a terminal, never from silence."""

from __future__ import annotations

import sys

import click

from reconciler.errors import ReconcilerError


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
