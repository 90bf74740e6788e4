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
from typing import NamedTuple

from reconciler.model.invite import CurrentInvite, FieldValue, kind_of
from reconciler.plan.model import InviteChange
from reconciler.safetext import REDACTED, json_text, redact_and_escape


class Recheck(NamedTuple):
    """Where the server stands against one change of a saved plan."""

    done: bool  # every field holds its `after` already
    drift: list[str]  # every reason the change no longer holds; empty when it may be applied
    restored: InviteChange | None  # the change with the server's values, when `before` holds


def recheck(change: InviteChange, current: CurrentInvite) -> Recheck:
    """``change`` against ``current``, the server's copy of its invite read just now."""
    where = f"{change.id} ({redact_and_escape(str(change.source))})"
    if all(
        _still_holds(name, value, current.fields.get(name)) for name, value in change.patch.items()
    ):
        return Recheck(True, [], None)  # applied already, whatever its status has become since
    drift = []
    if not current.is_pending:
        drift.append(f"{where}: is now {redact_and_escape(str(current.status))}, not pending")
    moved = False
    for name, planned in change.before.items():
        now = current.fields.get(name)
        if not _still_holds(name, planned, now):
            moved = True
            shown = None if now is None else kind_of(name).redacted(now)
            drift.append(
                f"{where}: `{name}` was {json_text(planned)} when planned, "
                f"is now {json_text(shown)}" + _not_after(name, change.patch[name], now)
            )
    return Recheck(False, drift, None if moved else _with_server_values(change, current))


def _still_holds(name: str, planned: FieldValue | None, now: FieldValue | None) -> bool:
    kind = kind_of(name)
    if kind.equal(planned, now):
        return True
    if planned is None or now is None:
        return False
    # Saved, the server's value is shown redacted where it held the secret or a token.
    mentions = any(REDACTED in text for _, text in kind.texts(planned))
    return mentions and kind.equal(planned, kind.redacted(now))


def _with_server_values(change: InviteChange, current: CurrentInvite) -> InviteChange:
    """``change`` with the server's values taken from ``current``, the copy just read,
    which the plan's ``before`` was found to match: ``before`` itself, and its objects'
    server-held sub-fields (see ``InviteChange.redacted``). Shown, they are redacted again."""
    before = {name: current.fields.get(name) for name in change.before}
    patch = {
        name: kind_of(name).with_server_parts(
            value, change.before.get(name), current.fields.get(name)
        )
        for name, value in change.patch.items()
    }
    return replace(change, before=before, patch=patch)


def _not_after(name: str, after: FieldValue, now: FieldValue | None) -> str:
    """A field already at `after` beside others that are not: the plan was half applied by hand."""
    return " (which the plan would write)" if kind_of(name).equal(after, now) else ""
