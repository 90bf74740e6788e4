"""What an invite file can hold of values from elsewhere (the platform's, for `export` and
`adopt`): what the loader would refuse of them, found by the loader's own checks (the
invite schema, ``NOT_IN_TEXT``), so that a value written never makes the file invalid."""

from __future__ import annotations

import unicodedata

from reconciler.model.fields import ID_KEY, kind_of
from reconciler.model.values import Fields, FieldValue, fields_json
from reconciler.safetext import NOT_IN_TEXT, quote_value
from reconciler.schema.check import invite_validators
from reconciler.schema.messages import Where, describe
from reconciler.yamlload.positions import START, Lines, Located

Part = tuple[str, str | None]  # a field, and its sub-field (None: the field's own value)
CANNOT_HOLD = "validate would refuse it"


def character(char: str) -> str:
    """A character as messages name it: U+00A0 NO-BREAK SPACE."""
    name = unicodedata.name(char, "")
    return f"U+{ord(char):04X}" + (f" {name}" if name else "")


def unheld(invite_id: str, fields: Fields) -> dict[Part, str]:
    """What validate would refuse of ``fields`` in an entry: (field, sub-field or None):
    why, in validate's own words, the value quoted."""
    found: dict[Part, str] = {}
    entry = {ID_KEY: invite_id, **fields_json(fields)}
    where = Where(Located(entry, None, START, Lines("")), "a file")
    for error in invite_validators().entry.iter_errors(entry):
        path = tuple(error.absolute_path)
        if not path:  # about the entry as a whole: a required sub-field is under its field
            continue
        part = path[1] if len(path) > 1 and isinstance(path[1], str) else None
        problems = describe(error, where)
        reason = problems[0].message if problems else "the schema refuses it"
        found.setdefault((str(path[0]), part), _unquoted(reason))
    for name, value in fields.items():
        for part, text in kind_of(name).texts(value):
            match = NOT_IN_TEXT.search(text)
            if match is not None:
                found.setdefault(
                    (name, part),
                    f"{quote_value(text)} holds {character(match.group())}, which a file may "
                    "not hold",
                )
    # A whole field refused needs no word for its sub-fields as well.
    return {
        (name, part): reason
        for (name, part), reason in found.items()
        if part is None or (name, None) not in found
    }


def cannot_hold(
    invite_id: str, name: str, value: FieldValue, part: str | None = None
) -> str | None:
    """Why a file cannot hold ``value`` as field ``name`` (its sub-field ``part`` only, when
    given), or None: it can. The value as a file holds it (in NFC, a set without repeats)."""
    problems = unheld(invite_id, {name: kind_of(name).for_file(value, name, [])})
    if part is None:  # the whole value is written: a problem with any part of it
        why = next(iter(problems.values()), None)
    else:
        why = problems.get((name, part)) or problems.get((name, None))
    return None if why is None else f"{CANNOT_HOLD}: {why}"


def _unquoted(message: str) -> str:
    """A validate message without its leading "`field`: ", which the caller names already."""
    return message.split(": ", 1)[1] if message.startswith("`") and ": " in message else message
