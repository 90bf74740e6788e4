"""The invite as this tool models it: its fields, its id, and when two values are equal.

One home for what the loader, the API client, the plan and the sandbox must
agree on, so that a field added to the contract is added once. Imported on
the loader's path, whose start-up is benchmarked: standard library only.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from typing import Any

# The fields the platform lets a PATCH change, in the order an export writes them.
UPDATABLE_FIELDS = ("name", "email", "phone", "primaryContact", "groups", "addOns", "attachments")
# Lists whose order and repeats mean nothing to the platform.
SET_FIELDS = frozenset({"groups", "addOns", "attachments"})
# Objects replaced whole on PATCH, whose sub-fields an entry may manage one by one.
OBJECT_FIELDS = frozenset({"primaryContact"})

# Keys of an invite entry that steer the reconciler and are never sent.
ID_KEY = "id"  # also the invite's field name in the API
RESEND_KEY = "resendOnChange"
RECONCILER_KEYS = (ID_KEY, RESEND_KEY)

# When an invite's invitation is e-mailed again after its update: ``True`` after any
# update, a tuple of field names only after an update that carried one of them,
# ``False`` never. The e-mail is the one thing this tool does that cannot be undone.
ResendRule = bool | tuple[str, ...]


def resend_rule(value: Any) -> ResendRule:
    """The rule an entry's ``resendOnChange`` states (the schema has checked its shape)."""
    if value is True:
        return True
    if isinstance(value, list) and value and all(type(v) is str for v in value):
        return tuple(dict.fromkeys(value))
    return False


def resend_due(rule: ResendRule, patched: Iterable[str]) -> bool:
    """Whether an update carrying the fields ``patched`` re-sends the invitation."""
    if rule is True or rule is False:
        return rule
    return any(field in rule for field in patched)


# The schema's `pattern` says the same; this holds even if the schema is edited,
# and matches the whole string (a `$` in a search lets a final newline through).
INVITE_ID = re.compile(r"(?!\.+\Z)[A-Za-z0-9_.-]{1,128}")
# How the inviteId rule is worded wherever an id is refused (file entries, command lines).
ID_RULE = "1 to 128 letters, digits, `_`, `-`, `.`, and not dots alone"


def nfc(text: str) -> str:
    """``text`` in Unicode's NFC, the one normal form of text this tool compares and sends.

    "Café" typed as e + U+0301 (NFD) and as U+00E9 look the same and are the same
    name: values from the files are sent in NFC, and any text is compared in NFC.
    """
    return text if text.isascii() else unicodedata.normalize("NFC", text)


def nfc_value(value: Any) -> Any:
    """``value`` (JSON-like) with every string in NFC, keys as they are; ``value`` itself
    when it is already so (almost always: the loader asks this of every entry)."""
    return _nfc_copy(value) if _needs_nfc(value) else value


def _needs_nfc(value: Any) -> bool:
    if type(value) is str:
        return not value.isascii() and not unicodedata.is_normalized("NFC", value)
    if isinstance(value, dict):
        return any(map(_needs_nfc, value.values()))
    if isinstance(value, list):
        return any(map(_needs_nfc, value))
    return False


def _nfc_copy(value: Any) -> Any:
    if type(value) is str:
        return nfc(value)
    if isinstance(value, dict):
        return {k: _nfc_copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_nfc_copy(item) for item in value]
    return value


# "Equal" has one definition, ``canonical``: two values are the same when their
# canonical forms are ``==`` (text compared in NFC: see ``nfc``). The plan's quick
# check for unchanged invites and its DeepDiff of what changed both look at
# canonical forms only, so they cannot disagree (``True`` and ``1`` differ in
# both; a set field's order and repeats matter in neither).


def canonical_value(value: Any) -> Any:
    """A form in which ``==`` is JSON's equality: a bool is not a number, 1 is not 1.0.

    Any field's value but a set's; a set field's items each take this form.
    """
    if type(value) is str:  # most values: a str equals only a str
        return value if value.isascii() else unicodedata.normalize("NFC", value)
    if value is None:
        return value
    if isinstance(value, dict):
        # Keys in order, so that equal objects also print alike (see canonical).
        return {str(k): canonical_value(v) for k, v in sorted(value.items(), key=_key_text)}
    if isinstance(value, list | tuple):
        return [canonical_value(item) for item in value]
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
            return sorted({nfc(item) for item in value})
        # Keyed by their text: sortable and hashable whatever a server puts in a list;
        # canonical forms that are equal print alike, and only those.
        unique = {repr(item): item for item in map(canonical_value, value)}
        return [unique[key] for key in sorted(unique)]
    return canonical_value(value)


def values_equal(field: str, a: Any, b: Any) -> bool:
    """Equal as the platform means it: set fields ignore order and repeats."""
    return canonical(field, a) == canonical(field, b)
