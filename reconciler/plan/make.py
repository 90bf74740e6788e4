"""Computing a plan: each desired invite compared with the server's copy as it arrives.

The record it fills is ``reconciler.plan.model.Plan``; with ``ChangedSince``
(``--changed-since``) each invite is planned only in the fields the change touched.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, TypeAlias

from reconciler.errors import ReconcilerError
from reconciler.model.invite import (
    CurrentInvite,
    DesiredInvite,
    Done,
    Failed,
    Fields,
    FieldValue,
    HeldFields,
    NotRun,
    Outcome,
    ReadError,
    SourceLocation,
    differences,
    field_kinds,
    kind_of,
    resend_due,
    stop_if_run_fatal,
)
from reconciler.plan.model import FailedInvite, InviteChange, NotUpdatable, OutsideChange, Plan
from reconciler.safetext import redact

if TYPE_CHECKING:
    from reconciler.desired.changed_since import ChangedEntry, ChangedSince

# What a plan is made from: each desired invite, and what reading its server copy gave.
Reading: TypeAlias = tuple[DesiredInvite, Outcome[CurrentInvite, ReadError]]


def make_plan(
    base_url: str,
    readings: Iterable[Reading],
    max_changes: int | None = None,
    max_resends: int | None = None,
    changed_since: ChangedSince | None = None,
) -> Plan:
    """Compare each desired invite with the server's copy as the readings arrive.

    Only changes, failed invites and counts are kept: a server copy is dropped as soon
    as it has been compared, so memory follows the changes, not the invites. With
    ``changed_since``, each invite is planned only in the fields the change touched.
    """
    plan = Plan(base_url=base_url, max_changes=max_changes, max_resends=max_resends)
    if changed_since is not None:
        plan.changed_since, plan.not_read = changed_since.ref, changed_since.not_read
    for desired, outcome in readings:
        match outcome:
            case Done(current):
                changed = None if changed_since is None else changed_since.entries.get(desired.id)
                _place(plan, desired, current, changed)
            case Failed(error):
                stop_if_run_fatal(error)
                plan.failed.append(_failed(desired, error))
            case NotRun():
                raise ReconcilerError("interrupted while reading invites; nothing was changed")
    return plan


# -- comparing one invite ------------------------------------------------------------------
# Compare one desired invite with the server's copy, field by managed field.
#
# DeepDiff, over the canonical forms (``reconciler.model.invite.differences``), decides
# which fields a PATCH carries: a field goes when the value the files want and the part
# of the server's value they manage are not the same to the platform. What a plan shows
# inside such a field comes from the same DeepDiff (``field_changes``), so the plan
# cannot show a change the PATCH would not make.


def compare_invite(desired: Mapping[str, FieldValue], current: Mapping[str, FieldValue]) -> Fields:
    """The PATCH body that brings ``current`` to ``desired``: only fields that differ.

    ``desired`` holds only managed fields; anything else on the server is never
    compared or sent.
    """
    kinds = field_kinds()
    managed = {name: kinds[name].managed(want, current.get(name)) for name, want in desired.items()}
    return {
        name: kinds[name].patch_value(desired[name], current.get(name))
        for name in differences(managed, desired)
    }


# -- its place in the plan: a change, unchanged, not updatable, outside the change -------


def _place(
    plan: Plan, desired: DesiredInvite, current: CurrentInvite, changed: ChangedEntry | None
) -> None:
    wanted = desired.fields  # built on each access: read once
    patch = compare_invite(wanted, current.fields)
    conflicts: Fields = {}
    if changed is not None and patch:
        patch, conflicts = _of_change(plan, desired, wanted, current, changed, patch)
    if not patch:
        plan.unchanged += 1
    elif current.is_pending:
        plan.changes.append(_change(desired, wanted, current, patch, conflicts))
    else:
        status = current.status or "in an unknown state"
        set_apart = _set_apart(desired, wanted, current, list(patch))
        plan.not_updatable.append(NotUpdatable(*set_apart, status))


def _set_apart(
    desired: DesiredInvite, wanted: Fields, current: CurrentInvite, names: list[str]
) -> tuple[str, SourceLocation, str | None, HeldFields, Fields]:
    """An invite that differs in ``names`` and is not written: the part of the server's
    values the files manage, beside the files' values."""
    before = {f: kind_of(f).managed(wanted[f], current.fields.get(f)) for f in names}
    return desired.id, desired.source, desired.name, before, {f: wanted[f] for f in names}


def _change(
    desired: DesiredInvite, wanted: Fields, current: CurrentInvite, patch: Fields, conflicts: Fields
) -> InviteChange:
    """A pending invite's change: its PATCH, the values before it, the re-send it makes."""
    before = {f: current.fields.get(f) for f in patch}
    rule = desired.resend_on_change
    resend = resend_due(rule, patch)
    kept = {f: subs for f in patch if (subs := kind_of(f).kept(wanted[f], current.fields.get(f)))}
    return InviteChange(
        desired.id,
        desired.source,
        desired.name,
        before,
        patch,
        resend,
        recipient=_recipient(patch, current) if resend else None,
        conflicts=conflicts,
        kept=kept,
        resend_on=rule if isinstance(rule, tuple) and resend else None,
    )


def _of_change(
    plan: Plan,
    desired: DesiredInvite,
    wanted: Fields,
    current: CurrentInvite,
    changed: ChangedEntry,
    patch: Fields,
) -> tuple[Fields, Fields]:
    """The part of ``patch`` the change touched, and its conflicts; the rest is listed."""
    untouched = [f for f in patch if f not in changed.fields]
    if untouched:
        plan.outside_change.append(OutsideChange(*_set_apart(desired, wanted, current, untouched)))
    patch = {f: v for f, v in patch.items() if f in changed.fields}
    return patch, _conflicts(patch, current, changed)


def _conflicts(patch: Fields, current: CurrentInvite, changed: ChangedEntry) -> Fields:
    """The fields the change touched that the platform holds at neither REF's value nor
    the new one (those at the new one are not in ``patch``), each with its value at REF.
    A field new to the entry (or a new entry) has no value at REF: an ordinary change."""
    at_ref = changed.at_ref or {}
    conflicts = {}
    for name in (f for f in patch if f in at_ref):
        kind = kind_of(name)
        if not kind.equal(at_ref[name], kind.managed(at_ref[name], current.fields.get(name))):
            conflicts[name] = at_ref[name]
    return conflicts


def _recipient(patch: Fields, current: CurrentInvite) -> str | None:
    """The address the invitation goes to once the update is made."""
    email = patch.get("email", current.fields.get("email"))
    return email if isinstance(email, str) else None


def _failed(desired: DesiredInvite, error: ReadError) -> FailedInvite:
    message = redact(str(error))
    return FailedInvite(desired.id, desired.source, message, error.status, error.request_id)
