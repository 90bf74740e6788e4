"""The plan: what apply would change, made of per-invite changes and failed invites.

Computing a plan is separate from showing it (reconciler.output), from saving
it (reconciler.plan.saved: the plan file, written and read) and from carrying it
out (reconciler.apply.applier).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import NamedTuple

from reconciler.errors import ReconcilerError
from reconciler.plan.changes import FailedInvite, InviteChange, NotUpdatable, OutsideChange
from reconciler.safetext import plural

__all__ = [
    "FORMAT_VERSION",
    "Plan",
    "Summary",
    "TooManyResends",
    "TooMuchChange",
]

FORMAT_VERSION = 2  # 2: signed, with `not_updatable`


class TooMuchChange(ReconcilerError):
    """The plan updates more invites than max_changes allows (octoDNS's TooMuchChange)."""

    def __init__(self, changes: int, limit: int, *, saved_limit: bool = False) -> None:
        # A saved plan's own limit wins over a looser one given to apply: say where it came from.
        advice = (
            f"This plan was made with --max-changes {limit}; make a new plan with a higher limit"
            if saved_limit
            else "Split the change or raise the limit"
        )
        self.reason = (
            f"the plan updates {plural(changes, 'invite')}, more than "
            f"max_changes ({limit}). {advice}."
        )
        super().__init__(f"refusing to apply, nothing was changed: {self.reason}")


class TooManyResends(ReconcilerError):
    """The plan e-mails more invitations than max_resends allows: the irreversible part."""

    def __init__(self, resends: int, limit: int, *, saved_limit: bool = False) -> None:
        advice = (
            f"This plan was made with --max-resends {limit}; make a new plan with a higher limit"
            if saved_limit
            else "Split the change, use resendOnChange's list form, or raise the limit"
        )
        self.reason = (
            f"the plan e-mails {plural(resends, 'invitation')} again, more than "
            f"max_resends ({limit}). {advice}."
        )
        super().__init__(f"refusing to apply, nothing was changed: {self.reason}")


class Summary(NamedTuple):
    update: int  # changes apply writes: conflicts are counted apart, never as updates
    unchanged: int
    failed: int
    resend: int = 0  # of the updates, those that e-mail the invitation again
    conflict: int = 0  # changes in conflict: apply writes nothing to them


@dataclass
class Plan:
    base_url: str
    changes: list[InviteChange] = field(default_factory=list)
    failed: list[FailedInvite] = field(default_factory=list)  # saved as `errors`
    unchanged: int = 0
    created_at: str = field(default_factory=lambda: _now())
    max_changes: int | None = None
    max_resends: int | None = None
    not_updatable: list[NotUpdatable] = field(default_factory=list)
    format_version: int = FORMAT_VERSION
    signature: str | None = None  # "hmac-sha256:<hex>", set by reconciler.plan.signature
    # Loaded from a file: its own max_changes is the limit it was reviewed under.
    saved: bool = field(default=False, compare=False)
    # Of a change (--changed-since REF): the REF, fields the platform differs in that the
    # change did not touch, and the invites not read because it did not touch them.
    changed_since: str | None = None
    outside_change: list[OutsideChange] = field(default_factory=list)
    not_read: int | None = None
    # Where invites are read, updated and re-sent (`read`, `update`, `resend`: URLs with
    # `{inviteId}`) when reconciler.yaml sets the paths; None at the contract's own.
    invite_urls: dict[str, str] | None = None

    @property
    def conflicts(self) -> list[InviteChange]:
        """Changes to fields the platform changed since REF: apply leaves them alone."""
        return [change for change in self.changes if change.conflicts]

    def without_conflicts(self) -> Plan:
        """The plan apply carries out unless --force-conflicts: no invite in conflict."""
        kept = [change for change in self.changes if not change.conflicts]
        return replace(self, changes=kept)

    @property
    def summary(self) -> Summary:
        conflicts = len(self.conflicts)
        return Summary(
            len(self.changes) - conflicts,
            self.unchanged,
            len(self.failed),
            self.resends,
            conflicts,
        )

    @property
    def resends(self) -> int:
        """How many invitations applying this plan e-mails again (conflicts left alone)."""
        return sum(1 for change in self.changes if change.resend and not change.conflicts)

    @property
    def has_changes(self) -> bool:
        return bool(self.changes)

    def too_much_change(
        self, limit: int | None = None, resend_limit: int | None = None
    ) -> TooMuchChange | TooManyResends | None:
        """Why apply would refuse this plan under max_changes or max_resends.

        Each limit is the plan's own or the one given, whichever is lower: a saved plan
        keeps the limits it was reviewed under; a run may add stricter ones.
        """
        binding = self._binding(self.max_changes, limit, len(self.changes))
        if binding is not None:
            return TooMuchChange(len(self.changes), binding[0], saved_limit=binding[1])
        binding = self._binding(self.max_resends, resend_limit, self.resends)
        if binding is not None:
            return TooManyResends(self.resends, binding[0], saved_limit=binding[1])
        return None

    def _binding(self, own: int | None, given: int | None, count: int) -> tuple[int, bool] | None:
        """The limit ``count`` passes and whether it is a saved plan's own; None if none."""
        limits = [n for n in (own, given) if n is not None]
        if not limits or count <= min(limits):
            return None
        binding = min(limits)
        own_limit = binding == own and (given is None or given >= binding)
        return binding, self.saved and own_limit

    def raise_if_unsafe(self, limit: int | None = None, resend_limit: int | None = None) -> None:
        """The one home of the max_changes and max_resends rules; raises their refusal."""
        problem = self.too_much_change(limit, resend_limit)
        if problem is not None:
            raise problem


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
