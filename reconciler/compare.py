"""Compare one desired invite with the server's copy, field by managed field."""

from __future__ import annotations

from typing import Any

SET_FIELDS = frozenset({"groups", "addOns", "attachments"})
OBJECT_FIELDS = frozenset({"primaryContact"})


def _canonical(field: str, value: Any) -> Any:
    if field in SET_FIELDS and isinstance(value, list):
        try:
            return sorted(set(value))
        except TypeError:  # unhashable or mixed items from a strange server
            return value
    return value


def values_equal(field: str, a: Any, b: Any) -> bool:
    """Equal as the platform means it: set fields ignore order and repeats."""
    return _canonical(field, a) == _canonical(field, b)


def _comparable(field: str, want: Any, have: Any) -> Any:
    """The part of the server's value that the desired value manages."""
    if field in OBJECT_FIELDS and isinstance(want, dict):
        # Sub-fields the YAML leaves out (a contact's phone, say) are unmanaged.
        return {key: have.get(key) for key in want} if isinstance(have, dict) else have
    return have


def compare_invite(desired: dict[str, Any], current: dict[str, Any]) -> dict[str, Any]:
    """The PATCH body that brings ``current`` to ``desired``: only fields that differ.

    ``desired`` holds only managed fields; anything else on the server is
    never compared or sent.
    """
    managed = {
        field: _comparable(field, want, current.get(field)) for field, want in desired.items()
    }
    # Cheap exact check first: most invites in a plan are unchanged.
    if all(values_equal(f, desired[f], managed[f]) for f in desired):
        return {}
    # Imported here: most runs compare few changed invites, and the import
    # costs more start-up time than the rest of the tool's imports together.
    from deepdiff import DeepDiff

    # ignore_order: list fields are sets; report_repetition off: repeats carry no meaning.
    diff = DeepDiff(managed, desired, ignore_order=True, report_repetition=False)
    patch = {}
    for field in diff.affected_root_keys:
        want = desired[field]
        have = current.get(field)
        if field in OBJECT_FIELDS and isinstance(want, dict) and isinstance(have, dict):
            # An object is replaced whole on PATCH: keep the server's unmanaged sub-fields.
            want = {**have, **want}
        patch[field] = want
    return {field: patch[field] for field in desired if field in patch}
