"""A saved plan's change against the server's copy read again: to do, done, or drifted.

Pure: the reading is apply's (``reconciler.apply.recheck``). A change whose fields
all hold ``before`` is to do; all ``after``, it is done (a re-run of an apply that
made it: nothing is sent again); anything else is drift, and one drifted change
refuses the whole plan.

Values are compared as they are, never redacted, except where the plan itself
shows a server's value redacted (it held the secret or a token). When nothing
has drifted, each change gets back the server's values the plan shows redacted
(``restored``): apply sends what the server holds, never the word ``[redacted]``.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any, NamedTuple

from reconciler.invite import values_equal
from reconciler.model.values import show
from reconciler.plan.changes import InviteChange
from reconciler.safetext import REDACTED, clean, redact_strings

if TYPE_CHECKING:
    from reconciler.api.client import CurrentInvite


class Recheck(NamedTuple):
    """Where the server stands against one change of a saved plan."""

    done: bool  # every field holds its `after` already
    drift: list[str]  # every reason the change no longer holds; empty when it may be applied
    restored: InviteChange | None  # the change with the server's values, when `before` holds


def recheck(change: InviteChange, current: CurrentInvite) -> Recheck:
    """``change`` against ``current``, the server's copy of its invite read just now."""
    where = f"{change.id} ({clean(change.source)})"
    held = current.fields
    if all(_still_holds(name, value, held.get(name)) for name, value in change.patch.items()):
        return Recheck(True, [], None)  # applied already, whatever its status has become since
    drift = []
    if not current.is_pending:
        drift.append(f"{where}: is now {clean(str(current.status))}, not pending")
    moved = False
    for name, planned in change.before.items():
        now = current.fields.get(name)
        if not _still_holds(name, planned, now):
            moved = True
            drift.append(
                f"{where}: `{name}` was {show(planned)} when planned, "
                f"is now {show(redact_strings(now))}" + _not_after(name, change.patch[name], now)
            )
    return Recheck(False, drift, None if moved else _with_server_values(change, current))


def _still_holds(name: str, planned: Any, now: Any) -> bool:
    if values_equal(name, planned, now):
        return True
    # Saved, the server's value is shown redacted where it held the secret or a token.
    return _mentions(planned, REDACTED) and values_equal(name, planned, redact_strings(now))


def _mentions(value: Any, word: str) -> bool:
    if isinstance(value, str):
        return word in value
    if isinstance(value, dict):
        return any(_mentions(v, word) for v in value.values())
    if isinstance(value, list):
        return any(_mentions(v, word) for v in value)
    return False


def _with_server_values(change: InviteChange, current: CurrentInvite) -> InviteChange:
    """``change`` with the server's values taken from ``current``, the copy just read,
    which the plan's ``before`` was found to match: ``before`` itself, and its objects'
    server-held sub-fields (see ``InviteChange.shown``). Shown, they are redacted again."""
    before = {name: current.fields.get(name) for name in change.before}
    patch = dict(change.patch)
    for name, value in change.patch.items():
        held, was = current.fields.get(name), change.before.get(name)
        if isinstance(value, dict) and isinstance(held, dict) and isinstance(was, dict):
            # The server's object as it is now, and over it what the files change: the
            # sub-fields whose planned value differs from the server's.
            changed = {k: v for k, v in value.items() if k not in was or was[k] != v}
            patch[name] = {**held, **changed}
    return replace(change, before=before, patch=patch)


def _not_after(name: str, after: Any, now: Any) -> str:
    """A field already at `after` beside others that are not: the plan was half applied by hand."""
    return " (which the plan would write)" if values_equal(name, after, now) else ""
