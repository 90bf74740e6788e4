"""The record of the last successful apply moved forward, after an apply that exited 0:
by compare-and-swap (`git push --force-with-lease`), only along main's first-parent
history, never backwards or sideways. What the record is: reconciler.applied_record."""

from __future__ import annotations

from typing import Literal, NamedTuple

from reconciler.applied_record import (
    Record,
    commit_of,
    fetch_missing,
    git_run,
    git_said,
    main_commit,
    on_first_parent_line,
    remote_heads,
)
from reconciler.errors import ReconcilerError
from reconciler.safetext import escape, quote_value

TRIES = 3  # pushes tried while other records race this one


class Advance(NamedTuple):
    """What advancing did: the record before (None: none yet) and after; `moved` by this
    run, `there` at the commit already, or left at a `later` commit of main."""

    old: str | None
    now: str
    outcome: Literal["moved", "there", "later"]


def advance(record: Record, commit: str = "HEAD", tries: int = TRIES) -> Advance:
    """Move the record to ``commit`` by compare-and-swap, only forward along main's
    first-parent line; a push that lost a race is decided again from the record as it
    is then. Refuses (ReconcilerError) to move it backwards or sideways."""
    new = None if commit.startswith("-") else commit_of(commit)
    if new is None:
        raise ReconcilerError(f"{quote_value(commit)}: no such commit in this clone")
    for _ in range(tries):
        heads = remote_heads(record)
        if isinstance(heads, str):
            raise ReconcilerError(f"cannot read {record.shown_remote}: {heads}; not recorded")
        fetch_missing(record, heads)
        old = heads.get(record.branch)
        settled = _settled(record, old, new, main_commit(record, heads))
        if settled is not None:
            return settled
        if _push(record, old, new):
            return Advance(old, new, "moved")
    raise ReconcilerError(
        f"{escape(record.branch)} moved during each of {tries} tries to record {new[:12]} "
        "(other records racing this one): not recorded; the next apply covers this one's "
        "changes again"
    )


def _settled(record: Record, old: str | None, new: str, main: str) -> Advance | None:
    """The answer when nothing needs pushing; None when the push may go; raises when the
    record must not be moved to ``new``."""
    branch, shown_main = escape(record.branch), escape(record.main)
    if not on_first_parent_line(new, main):
        raise ReconcilerError(
            f"{new[:12]} is not on {shown_main}'s first-parent history: a record there "
            f"would never be trusted; {branch} is not moved"
        )
    if old is None:
        return None
    known = commit_of(old) is not None
    if known and on_first_parent_line(old, new):
        return None if old != new else Advance(old, new, "there")
    if known and on_first_parent_line(new, old) and on_first_parent_line(old, main):
        return Advance(old, old, "later")
    raise ReconcilerError(
        f"{branch} ({old}) is neither on the first-parent history of {new[:12]} nor a "
        f"later commit of {shown_main} (main was rewritten, or the branch pushed by hand): "
        f"it is never moved backwards or sideways. Delete it (git push "
        f"{record.shown_remote} --delete {branch}): the next apply then plans every invite, "
        "and its record starts afresh"
    )


def _push(record: Record, old: str | None, new: str) -> bool:
    """Whether the compare-and-swap push landed; False when the record moved meanwhile."""
    ref = f"refs/heads/{record.branch}"
    lease = f"--force-with-lease={ref}:{old or ''}"  # empty: the branch must not exist yet
    done = git_run(["push", "--quiet", lease, record.remote, f"{new}:{ref}"], network=True, ok=None)
    if done.returncode == 0:
        return True
    now = remote_heads(record)
    if isinstance(now, dict) and now.get(record.branch) != old:
        return False  # another record got there first: decided again
    raise ReconcilerError(
        f"git push to {record.shown_remote} failed: {git_said(done)}; {escape(record.branch)} "
        "is not moved"
    )
