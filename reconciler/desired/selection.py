"""Which invites a run reads and plans: --target, --exclude, --changed-since."""

from __future__ import annotations

from collections.abc import Collection
from difflib import get_close_matches
from typing import NamedTuple

from reconciler.errors import ReconcilerError
from reconciler.model.invite import DesiredInvite
from reconciler.safetext import escape


class Selection(NamedTuple):
    targets: tuple[str, ...] = ()
    excludes: tuple[str, ...] = ()
    changed_since: str | None = None

    @property
    def is_everything(self) -> bool:
        return not (self.targets or self.excludes or self.changed_since)


def select_invites(
    invites: list[DesiredInvite],
    selection: Selection,
    where: str,
    changed: Collection[str] | None = None,
) -> list[DesiredInvite]:
    """The invites to read and plan, in file order. ``where`` names the files, for errors."""
    known = {invite.id for invite in invites}
    for option, ids in (("--target", selection.targets), ("--exclude", selection.excludes)):
        unknown = [i for i in dict.fromkeys(ids) if i not in known]
        if unknown:
            raise ReconcilerError(
                f"{option} {', '.join(map(escape, unknown))}: no invite with "
                f"{'this id' if len(unknown) == 1 else 'these ids'} in the files read ({where})"
                f"{_did_you_mean(unknown, known)}"
            )
    wanted = set(selection.targets) or known
    wanted -= set(selection.excludes)
    if changed is not None:
        wanted &= set(changed)
    return [invite for invite in invites if invite.id in wanted]


def _did_you_mean(unknown: list[str], known: Collection[str]) -> str:
    """The ids of the files nearest to each one typed (a typo: `inv_8f2k2` for `inv_8f2k1`)."""
    near = {typed: get_close_matches(typed, known, n=1, cutoff=0.75) for typed in unknown}
    hints = [(typed, match[0]) for typed, match in near.items() if match]
    if not hints:
        return ""
    if len(unknown) == 1:
        return f"; did you mean {escape(hints[0][1])}?"
    shown = ", ".join(f"{escape(match)} for {escape(typed)}" for typed, match in hints)
    return f"; did you mean {shown}?"


EVERYTHING = Selection()
