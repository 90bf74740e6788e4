"""Compare one desired invite with the server's copy, field by managed field.

"Equal" has one definition here, ``canonical``: two values are the same when
their canonical forms are ``==``. The quick check for unchanged invites and
DeepDiff's field-level diff both look at canonical forms only, so they cannot
disagree (``True`` and ``1`` differ in both; a set field's order and repeats
matter in neither).
"""

from __future__ import annotations

from typing import Any

SET_FIELDS = frozenset({"groups", "addOns", "attachments"})
OBJECT_FIELDS = frozenset({"primaryContact"})


def _canonical_value(value: Any) -> Any:
    """A form in which ``==`` is JSON's equality: a bool is not a number, 1 is not 1.0."""
    if type(value) is str or value is None:  # most values: a str equals only a str
        return value
    if isinstance(value, dict):
        # Keys in order, so that equal objects also print alike (see _order_key).
        return {str(k): _canonical_value(v) for k, v in sorted(value.items(), key=_key_text)}
    if isinstance(value, list | tuple):
        return [_canonical_value(item) for item in value]
    if isinstance(value, float):
        # NaN is not even equal to itself, and -0.0 prints apart from 0.0: one form each.
        return (float, None) if value != value else (float, value + 0.0)
    return (type(value), value)  # True, 1 and 1.0 no longer compare equal


def _key_text(item: tuple[Any, Any]) -> str:
    return str(item[0])


def canonical(field: str, value: Any) -> Any:
    """``value`` of ``field`` as compared: set fields sorted and without repeats."""
    if field in SET_FIELDS and isinstance(value, list):
        if all(type(item) is str for item in value):
            return sorted(set(value))
        # Keyed by their text: sortable and hashable whatever a server puts in a list;
        # canonical forms that are equal print alike, and only those.
        unique = {repr(item): item for item in map(_canonical_value, value)}
        return [unique[key] for key in sorted(unique)]
    return _canonical_value(value)


def values_equal(field: str, a: Any, b: Any) -> bool:
    """Equal as the platform means it: set fields ignore order and repeats."""
    return canonical(field, a) == canonical(field, b)


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
    # Cheap exact check first: most invites in a plan are unchanged.
    if wanted == held:
        return {}
    # Imported here: most runs compare few changed invites, and the import
    # costs more start-up time than the rest of the tool's imports together.
    from deepdiff import DeepDiff

    differing = DeepDiff(held, wanted).affected_root_keys
    return {
        field: _patch_value(field, want, current.get(field))
        for field, want in desired.items()
        if field in differing
    }
