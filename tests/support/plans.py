"""Readings a plan is made from, as the plan tests build them: invite N as the files want
it, invite N as the server holds it, and a plan scoped to a change made of such pairs."""

from __future__ import annotations

from typing import Any

from reconciler.api.client import CurrentInvite
from reconciler.desired.state import DesiredInvite, SourceLocation
from reconciler.model.outcome import Done
from reconciler.plan.make import ScopedTo, make_plan
from reconciler.plan.model import Plan

BASE = "https://api.example.test"


def desired(index: int, **fields: Any) -> DesiredInvite:
    return DesiredInvite(
        id=f"inv_{index:04d}",
        fields=fields or {"email": f"new{index}@x.example"},
        source=SourceLocation("invites/a.yaml", index * 10 + 2),
    )


def current(index: int, status: str = "pending", **fields: Any) -> CurrentInvite:
    return CurrentInvite(f"inv_{index:04d}", status, fields or {"email": f"old{index}@x.example"})


def scoped(*pairs: tuple[DesiredInvite, CurrentInvite], scopes: dict[str, Any]) -> Plan:
    readings = [(d, Done(c)) for d, c in pairs]
    return make_plan(BASE, readings, scope=ScopedTo("main", scopes, not_read=7))
