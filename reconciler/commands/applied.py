"""`reconcile applied`: the record of the last successful apply, read (`show`) and moved
forward after an apply that exited 0 (`advance`). The rules are reconciler.applied's."""

from __future__ import annotations

import json

import click

from reconciler.applied import (
    BRANCH_ENV,
    MAIN_ENV,
    REMOTE_ENV,
    AlreadyApplied,
    Missing,
    Reading,
    Record,
    Trusted,
    Untrusted,
    advance,
    pending_commits,
    read_record,
)
from reconciler.commands.options import together
from reconciler.output.ci import append_step_summary, github_enabled
from reconciler.safetext import escape, plural

_where_options = together(
    click.option(
        "--branch", help=f"The record's branch (env {BRANCH_ENV}; default reconcile/applied)."
    ),
    click.option(
        "--main",
        help="The branch applies run on: a record is trusted only on its first-parent "
        f"history (env {MAIN_ENV}; default: CI_DEFAULT_BRANCH, else main).",
    ),
    click.option(
        "--remote", help=f"The git remote, a name or a URL (env {REMOTE_ENV}; default origin)."
    ),
)


@click.group()
def applied() -> None:
    """The record of the last successful apply: a branch at the commit of main it applied.

    `plan`, `apply` and `adopt --changed-since-applied` read it; `advance` moves it
    after an apply that exited 0. It is trusted only at a commit main has pointed at
    (on main's first-parent history), never at any other commit pushed to the branch.
    """


@applied.command(short_help="Print which revision is applied and what is pending.")
@_where_options
@click.option(
    "--format",
    "output_format",
    type=click.Choice(["text", "json"]),
    default="text",
    show_default=True,
    help="One line to read, or JSON for a script.",
)
def show(branch: str | None, main: str | None, remote: str | None, output_format: str) -> int:
    """Print which revision is applied, whether it is trusted, and what is pending.

    Under GitHub Actions the line is added to the job summary too.
    """
    record = Record.from_options(branch=branch, main=main, remote=remote)
    reading = read_record(record)
    line = describe(record, reading)
    if output_format == "json":
        click.echo(json.dumps(_as_json(record, reading), indent=2))
    else:
        click.echo(line)
    if github_enabled():
        append_step_summary(line)
    return 0


@applied.command(name="advance", short_help="Record COMMIT as the last successful apply.")
@click.argument("commit", default="HEAD")
@_where_options
def advance_command(commit: str, branch: str | None, main: str | None, remote: str | None) -> int:
    """Record COMMIT (default HEAD) as the last successful apply: run it after an apply
    that exited 0.

    A compare-and-swap push (--force-with-lease), only forward along main's first-parent
    history; a record moved meanwhile is read again, and one at a later commit of main
    is left there. Never backwards or sideways: that is refused (exit 1). Over https,
    a credential helper gives git the token in RECONCILER_GIT_TOKEN when git asks.
    """
    record = Record.from_options(branch=branch, main=main, remote=remote)
    done = advance(record, commit)
    where = escape(record.branch)
    if done.outcome == "moved":
        line = f"Recorded: {where} {done.old or '(new)'} -> {done.now}, the last successful apply."
    elif done.outcome == "later":
        line = f"{where} is at {done.now}, a later commit of {escape(record.main)}: left there."
    else:
        line = f"{where} is at {done.now} already."
    click.echo(line)
    if github_enabled():
        append_step_summary(line)
    return 0


def describe(record: Record, reading: Reading) -> str:
    """Which revision is applied and which is pending, in one line."""
    line = _applied_and_pending(record, reading)
    if reading.unreachable is not None:
        line += (
            f" ({record.shown_remote} could not be read: {reading.unreachable}; this "
            "clone's copies of its branches were)"
        )
    return line


def _applied_and_pending(record: Record, reading: Reading) -> str:
    where = f"{escape(record.branch)} of {record.shown_remote}"
    head = reading.head[:12]
    match reading.state:
        case Trusted(commit):
            count = pending_commits(commit, reading.head)
            pending = f"{commit[:12]}..{head} ({plural(count, 'commit')})" if count else "nothing"
            return f"Applied: {commit[:12]} ({where}); pending: {pending}."
        case AlreadyApplied(later):
            return (
                f"Applied: {later[:12]} ({where}), a later commit of {escape(record.main)} "
                f"than HEAD ({head}); pending: nothing."
            )
        case Untrusted(commit, why):
            return (
                f"Applied: unknown ({where} is at {commit[:12]}, {why}: not trusted); "
                "pending: every invite."
            )
        case Missing():
            return f"Applied: nothing recorded (no branch {where}); pending: every invite."


_STATES = {Trusted: "trusted", Untrusted: "untrusted", Missing: "missing"}


def _as_json(record: Record, reading: Reading) -> dict[str, str | None]:
    state = reading.state
    commit = state.later if isinstance(state, AlreadyApplied) else getattr(state, "commit", None)
    return {
        "state": _STATES.get(type(state), "already-applied"),
        "commit": commit,
        "head": reading.head,
        "changed_since": state.commit if isinstance(state, Trusted) else None,
        "why": state.why if isinstance(state, Untrusted) else None,
        "branch": record.branch,
        "main": record.main,
        "remote": record.shown_remote,
    }
