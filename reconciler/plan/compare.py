"""Compare one desired invite with the server's copy, field by managed field.

Equal is ``reconciler.invite.canonical``'s equal, and it alone decides which
fields a PATCH carries: a field goes when its canonical forms differ. What a
plan shows inside such a field (the items added to and removed from a set, the
changed sub-fields of an object) comes from DeepDiff (``_deep_diff``) of the
same canonical forms, always with the same options, and only for the fields
that differ. So the plan cannot show a change the PATCH would not make, nor a
hand-written set difference disagree with the equality the PATCH was decided
by. DeepDiff, far slower than ``==``, never runs for an unchanged field: it
once compared every changed invite whole, and cost a plan more CPU than its reads.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

from reconciler.invite import OBJECT_FIELDS, SET_FIELDS, canonical, canonical_value


def managed_part(field: str, want: Any, have: Any) -> Any:
    """The part of the server's value that the desired value manages."""
    if field in OBJECT_FIELDS and isinstance(want, dict):
        # Sub-fields the YAML leaves out (a contact's phone, say) are unmanaged.
        return {key: have.get(key) for key in want} if isinstance(have, dict) else have
    return have


def _patch_value(field: str, want: Any, have: Any) -> Any:
    if field in OBJECT_FIELDS and isinstance(want, dict) and isinstance(have, dict):
        # An object is replaced whole on PATCH: keep the server's unmanaged sub-fields.
        return {**have, **want}
    return want


def _set_level(level: Any) -> bool:
    # Order means nothing in a set field's own list; inside its items (and in any
    # other list) it does, as it does for canonical's ``==``.
    path = level.path(output_format="list")
    return len(path) == 1 and path[0] in SET_FIELDS


def _deep_diff(before: dict[str, Any], after: dict[str, Any]) -> Any:
    """DeepDiff's tree of what differs between two invites' canonical forms."""
    # Imported here: most runs compare few changed invites, and the import
    # costs more start-up time than the rest of the tool's imports together.
    from deepdiff import DeepDiff

    return DeepDiff(
        before,
        after,
        ignore_order_func=_set_level,
        # A set's items are whole: an item is added or removed, never "changed"
        # into another. No pairing of added with removed items (cutoff 0), and
        # report_repetition keeps DeepDiff from merging an addition and a removal
        # at the same index into a values_changed (canonical sets have no repeats).
        cutoff_intersection_for_pairs=0,
        report_repetition=True,
        view="tree",
    )


def compare_invite(desired: dict[str, Any], current: dict[str, Any]) -> dict[str, Any]:
    """The PATCH body that brings ``current`` to ``desired``: only fields that differ.

    ``desired`` holds only managed fields; anything else on the server is
    never compared or sent.
    """
    wanted = {field: canonical(field, want) for field, want in desired.items()}
    held = {
        field: canonical(field, managed_part(field, want, current.get(field)))
        for field, want in desired.items()
    }
    return {
        field: _patch_value(field, want, current.get(field))
        for field, want in desired.items()
        if wanted[field] != held[field]
    }


class FieldDelta(NamedTuple):
    """What differs inside one field, as a plan shows it; values as written, not canonical."""

    added: list[Any]  # a set field's items ``after`` has and ``before`` lacks, in its order
    removed: list[Any]  # the items ``before`` has and ``after`` lacks, in its order
    sub_changes: list[tuple[str, Any, Any]]  # an object's (sub-field, before, after) that differ


NO_DELTA = FieldDelta([], [], [])


def field_deltas(before: Mapping[str, Any], after: Mapping[str, Any]) -> dict[str, FieldDelta]:
    """For each set or object field of ``after``: what differs inside it from ``before``.

    One DeepDiff of the canonical forms of all those fields. A value that is not
    a list (or not an object) counts as an empty one, as a plan shows it: every
    item of ``after`` added. A sub-field left out is one whose value is null.
    """
    old: dict[str, Any] = {}
    new: dict[str, Any] = {}
    for field, value in after.items():
        if field in SET_FIELDS:
            # Each item by its canonical text, as ``canonical`` itself keys them: inside
            # an item, order counts, where DeepDiff's hash of a list would ignore it.
            old[field] = [repr(item) for item in canonical(field, _as_list(before.get(field)))]
            new[field] = [repr(item) for item in canonical(field, _as_list(value))]
        elif field in OBJECT_FIELDS:
            was, now = _as_dict(before.get(field)), _as_dict(value)
            keys = _sub_fields(was, now)
            old[field] = canonical_value({k: was.get(k) for k in keys})
            new[field] = canonical_value({k: now.get(k) for k in keys})
    deltas = dict.fromkeys(old, NO_DELTA)
    # DeepDiff only the fields that differ: none, for the usual text field's change.
    differ = [field for field in old if old[field] != new[field]]
    if not differ:
        return deltas
    old = {field: old[field] for field in differ}
    new = {field: new[field] for field in differ}
    added: dict[str, set[str]] = {field: set() for field in old}
    removed: dict[str, set[str]] = {field: set() for field in old}
    changed: dict[str, set[str]] = {field: set() for field in old}
    for report, levels in _deep_diff(old, new).items():
        for level in levels:
            field, *inside = level.path(output_format="list")
            if report == "iterable_item_added":
                added[field].add(str(level.t2))
            elif report == "iterable_item_removed":
                removed[field].add(str(level.t1))
            if field in OBJECT_FIELDS and inside:
                changed[field].add(inside[0])
    for field in old:
        if field in SET_FIELDS:
            deltas[field] = FieldDelta(
                _items(after.get(field), added[field]),
                _items(before.get(field), removed[field]),
                [],
            )
        elif changed[field]:
            was, now = _as_dict(before.get(field)), _as_dict(after.get(field))
            subs = [
                (k, was.get(k), now.get(k))
                for k in _sub_fields(was, now)
                if str(k) in changed[field]
            ]
            deltas[field] = FieldDelta([], [], subs)
    return deltas


def _sub_fields(was: dict[str, Any], now: dict[str, Any]) -> list[str]:
    """Both objects' sub-fields: ``now``'s in its order (the files'), then ``was``'s others."""
    return list(dict.fromkeys([*now, *was]))


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _as_dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _items(value: Any, keys: set[str]) -> list[Any]:
    """The items of ``value`` whose canonical forms DeepDiff named, as written and in order."""
    return [item for item in _as_list(value) if repr(canonical_value(item)) in keys]
