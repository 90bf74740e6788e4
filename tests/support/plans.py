"""Readings a plan is made from, as the plan tests build them: invite N as the files want
it, invite N as the server holds it, and a plan of a change made of such pairs."""

from __future__ import annotations

from typing import Any

from reconciler.desired.changed_since import ChangedEntry, ChangedSince
from reconciler.model.invite import CurrentInvite, DesiredInvite, Done, SourceLocation
from reconciler.plan.make import make_plan
from reconciler.plan.model import Plan
from support.values import typed

BASE = "https://api.example.test"


def desired(index: int, **fields: Any) -> DesiredInvite:
    return DesiredInvite(
        id=f"inv_{index:04d}",
        fields=typed(fields or {"email": f"new{index}@x.example"}),
        source=SourceLocation("invites/a.yaml", index * 10 + 2),
    )


def current(index: int, status: str | None = "pending", **fields: Any) -> CurrentInvite:
    return CurrentInvite(
        f"inv_{index:04d}", status, typed(fields or {"email": f"old{index}@x.example"})
    )


def changed(fields: set[str] | frozenset[str], at_ref: dict[str, Any] | None) -> ChangedEntry:
    """What a change did to an entry: ``fields`` touched, ``at_ref`` (JSON-like) at the base."""
    return ChangedEntry(frozenset(fields), None if at_ref is None else typed(at_ref))


def of_change(
    *pairs: tuple[DesiredInvite, CurrentInvite], entries: dict[str, ChangedEntry]
) -> Plan:
    readings = [(d, Done(c)) for d, c in pairs]
    return make_plan(BASE, readings, changed_since=ChangedSince("main", entries, not_read=7))
