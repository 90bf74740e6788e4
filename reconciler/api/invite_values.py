"""What the server may hold in an invite's updatable fields, checked before use.

The contract ("The invite object") says which type each field has. A value of
another type, or one too large to be an invite's, is refused for that invite
alone: compared, it could take minutes (a set of 150,000 groups) or put a
number where a string belongs (NaN, ``1e999``) into a PATCH, a plan or an export.
"""

from __future__ import annotations

from typing import Any

from reconciler.api.exceptions import BadInviteValue
from reconciler.invite import OBJECT_FIELDS, SET_FIELDS
from reconciler.safetext import clean, escape

MAX_TEXT_CHARS = 1_000  # a business name is at most 200 characters; an email, 254
MAX_SET_ITEMS = 1_000  # a few groups, add-ons or document types in practice
_MAX_CONTACT_KEYS = 20  # {name, email, phone} and room for a server's additions
# A contact's sub-field names, like its values, are bounded: a server's keys are
# compared, merged into PATCH bodies and shown, so unbounded ones would make a plan's
# cost grow with whatever a server sends rather than with what is shown.
MAX_KEY_CHARS = 64


def check_invite_values(
    invite_id: str, fields: dict[str, Any], *, status: int, request_id: str | None
) -> None:
    """Raise BadInviteValue naming the first field whose value breaks the contract."""
    for field, value in fields.items():
        problem = _problem(field, value)
        if problem is not None:
            raise BadInviteValue(
                f"invite {escape(invite_id)}: the server's `{escape(field)}` {problem}; "
                "this invite is left alone",
                status=status,
                request_id=request_id,
            )


def _problem(field: str, value: Any) -> str | None:
    if value is None:  # no value held: the same as a field left out
        return None
    if field in SET_FIELDS:
        return _set_problem(value)
    if field in OBJECT_FIELDS:
        return _object_problem(value)
    return _text_problem(value)


def _text_problem(value: Any) -> str | None:
    if type(value) is not str:
        return f"is {_kind(value)}, not a string"
    if len(value) > MAX_TEXT_CHARS:
        return f"has {len(value):,} characters, more than the {MAX_TEXT_CHARS:,} allowed"
    return None


def _set_problem(value: Any) -> str | None:
    if type(value) is not list:
        return f"is {_kind(value)}, not a list of strings"
    if len(value) > MAX_SET_ITEMS:
        return f"has {len(value):,} items, more than MAX_SET_ITEMS ({MAX_SET_ITEMS:,})"
    for index, item in enumerate(value):
        problem = _text_problem(item)
        if problem is not None:
            return f"item {index} {problem}"
    return None


def _object_problem(value: Any) -> str | None:
    if type(value) is not dict:
        return f"is {_kind(value)}, not an object of strings"
    if len(value) > _MAX_CONTACT_KEYS:
        return f"has {len(value):,} keys, more than the {_MAX_CONTACT_KEYS} allowed"
    for key, item in value.items():
        if len(key) > MAX_KEY_CHARS:
            return (
                f"has a field named `{clean(key[:40])}…` of {len(key):,} characters, "
                f"more than the {MAX_KEY_CHARS} allowed"
            )
        problem = None if item is None else _text_problem(item)
        if problem is not None:
            return f"field `{clean(str(key))[:100]}` {problem}"
    return None


def _kind(value: Any) -> str:
    """What a wrong value is, shown briefly: its JSON type, and a number's value."""
    if isinstance(value, bool):
        return f"a boolean ({str(value).lower()})"
    if isinstance(value, int | float):
        return f"a number ({clean(repr(value))[:40]})"
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, str):
        return "a string"
    return "null"  # JSON holds nothing else
