"""Before `apply --plan` writes: every invite of the saved plan read again, each change
found to do, done, or stale (``reconciler.plan.drift``); one stale change refuses the
whole plan. Each write then reads its invite once more, right before its PATCH, as
every apply does (``reconciler.apply.applier``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from reconciler.api.capacity import Limiter
from reconciler.api.concurrency import ordered_map
from reconciler.errors import ReconcilerError
from reconciler.model.invite import CurrentInvite, Done, Failed, NotRun
from reconciler.plan.drift import recheck
from reconciler.plan.model import InviteChange, Plan
from reconciler.safetext import redact_and_escape
from reconciler.stop import Stop


class SavedPlanState(NamedTuple):
    """Where the server stands against a saved plan, change by change."""

    drift: list[str]  # every reason the plan no longer holds; empty when it may be applied
    done: frozenset[str]  # ids of changes whose fields all hold their `after` already


def saved_plan_state(
    plan: Plan,
    base_url: str,
    read: Callable[[str], CurrentInvite],
    parallelism: int | Limiter,
    stop: Stop | None = None,
    invite_urls: dict[str, str] | None = None,
) -> SavedPlanState:
    """Re-read every invite of the plan: each change is to do, done, or stale.

    ``invite_urls``: where this run reads, updates and re-sends (None: the contract's
    paths), which must be where the plan says, as ``base_url`` must be its server.
    When nothing has drifted, the plan's changes take back the server's values it
    shows redacted (``reconciler.plan.drift``): apply sends what the server holds.
    """
    elsewhere = _elsewhere(plan, base_url, invite_urls)
    if elsewhere:
        return SavedPlanState([elsewhere], frozenset())
    drift: list[str] = []
    done = set()
    by_id = {change.id: change for change in plan.changes}
    restored: dict[str, InviteChange] = {}
    for invite_id, outcome in ordered_map(read, list(by_id), parallelism, stop, inline=True):
        change = by_id[invite_id]
        match outcome:
            case Done(current):
                found = recheck(change, current)
                if found.done:
                    done.add(invite_id)
                drift += found.drift
                if found.restored is not None:
                    restored[invite_id] = found.restored
            case Failed(error):
                where = f"{invite_id} ({redact_and_escape(str(change.source))})"
                drift.append(f"{where}: cannot re-read it: {redact_and_escape(str(error))}")
            case NotRun():
                raise ReconcilerError("interrupted while checking the plan; nothing was changed")
    if not drift:
        plan.changes = [restored.get(change.id, change) for change in plan.changes]
    return SavedPlanState(drift, frozenset(done))


def _elsewhere(plan: Plan, base_url: str, invite_urls: dict[str, str] | None) -> str | None:
    """Why this run's requests would not go where the reviewed plan says, or None."""
    if plan.base_url.rstrip("/") != base_url.rstrip("/"):
        planned = redact_and_escape(plan.base_url)
        return f"the plan was made against {planned}, but this run talks to {base_url}"
    if plan.invite_urls != invite_urls:
        # The paths of reconciler.yaml changed since the plan was made: its writes and
        # re-sends would go to other addresses than the ones reviewed (issue 51, row 5).
        return (
            f"the plan's invite paths are {_paths(plan.invite_urls)}, but this run's "
            f"are {_paths(invite_urls)} (reconciler.yaml changed since the plan was made)"
        )
    return None


def _paths(urls: dict[str, str] | None) -> str:
    if urls is None:
        return "the contract's own"
    return ", ".join(f"{kind} {redact_and_escape(url)}" for kind, url in sorted(urls.items()))


def find_drift(
    plan: Plan,
    base_url: str,
    read: Callable[[str], CurrentInvite],
    parallelism: int | Limiter,
    stop: Stop | None = None,
) -> list[str]:
    """Every reason the plan no longer holds; empty when it is safe to apply."""
    return saved_plan_state(plan, base_url, read, parallelism, stop).drift
