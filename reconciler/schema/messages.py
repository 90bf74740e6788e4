"""What each kind of schema error says, written for the person who edits the YAML.

One function per JSON Schema keyword (``MESSAGES``), reading what jsonschema's
error carries (``validator``, ``validator_value``, ``schema``, the path)
rather than parsing its English. Values are shown as written, escaped,
never as Python reprs of dates or booleans.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from reconciler.errors import FileProblem
from reconciler.model.invite import ID_RULE
from reconciler.safetext import QUOTED_CHARS, escape, kind_in_words, quote_value
from reconciler.yamlload.builder import Located, cut, quote_it, reading

if TYPE_CHECKING:
    from jsonschema import ValidationError


class Where(NamedTuple):
    """The value validated, the file it is in, and its path in that file."""

    document: Located
    source: str
    prefix: tuple[Any, ...] = ()


# Words for one kind of schema error: one message at the value's place, or problems placed.
Describer = Callable[["ValidationError", Where, tuple[Any, ...]], str | list[FileProblem]]


# The schema's `$defs/line` pattern: text without control characters.
ONE_LINE = "^[^\\u0000-\\u001f\\u007f-\\u009f]*$(?!\\n)"
_CONTROLS = frozenset(map(chr, [*range(0x20), *range(0x7F, 0xA0)]))


def field_name(path: tuple[Any, ...]) -> str:
    """`phone`, or `primaryContact.phone` inside an object: the field's own path in its entry."""
    last_index = max((i for i, p in enumerate(path) if isinstance(p, int)), default=-1)
    own = [p for p in path[last_index + 1 :] if isinstance(p, str)]
    if not own:
        own = [p for p in path if isinstance(p, str)][-1:]
    return escape(".".join(own)) if own else "document"


def place(path: tuple[Any, ...]) -> str:
    """How a message names the value at ``path``."""
    if path and isinstance(path[-1], int):
        parent = field_name(path[:-1])
        return "each invite entry" if parent == "invites" else f"an item of `{parent}`"
    return f"`{field_name(path)}`" if path else "the file"


def describe(error: ValidationError, where: Where) -> list[FileProblem]:
    path = tuple(error.absolute_path)
    said = MESSAGES.get(str(error.validator), _other)(error, where, path)
    return [_at(where, path, said)] if isinstance(said, str) else said


def _at(where: Where, path: tuple[Any, ...], message: str, key: bool = False) -> FileProblem:
    line, column = (where.document.key_mark if key else where.document.mark)(path)
    return FileProblem(where.source, line, column, message)


def _additional(error: ValidationError, where: Where, path: tuple[Any, ...]) -> list[FileProblem]:
    allowed = sorted(error.schema.get("properties", {}))
    patterns = [re.compile(p) for p in error.schema.get("patternProperties", {})]
    extra = [
        key
        for key in error.instance
        if key not in allowed and not any(p.search(str(key)) for p in patterns)
    ]
    # The one pattern of the shipped schemas: a top-level `x-` key holds templates.
    templates = ", or a template under a key starting with `x-`" if patterns else ""
    problems = []
    for key in extra:
        message = f"unknown field `{escape(str(key))}`; {_advice(str(key), allowed, templates)}"
        problems.append(_at(where, (*path, key), message, key=True))
    return problems


def _required(error: ValidationError, where: Where, path: tuple[Any, ...]) -> list[FileProblem]:
    full = where.prefix + path
    if full and isinstance(full[-1], int):
        # An invite entry, or an item of a list in the config (a policy).
        what = (
            "invite"
            if full[0] == "invites"
            else f"item {full[-1] + 1} of `{field_name(full[:-1])}`"
        )
    else:
        what = f"`{field_name(full)}`" if full else "file"
    # jsonschema gives one error per missing name without naming it apart from
    # its English; each error lists them all, and the caller drops repeats.
    missing = [name for name in error.validator_value if name not in error.instance]
    return [
        _at(where, path, f"{what} is missing required field `{name}`", key=True) for name in missing
    ]


def _type(error: ValidationError, where: Where, path: tuple[Any, ...]) -> str:
    full = where.prefix + path
    expected = error.validator_value
    raw = where.document.raw(path)
    value = error.instance
    if value is None and full == ("invites",):
        return "`invites` is empty; list invites under it, or write `invites: []`"
    if value is None:
        return f"{place(full)} is empty; give it a value or remove it"
    if expected == "string" and raw is not None:
        return f"{place(full)} must be text, but YAML reads {reading(raw, value)}; {quote_it(raw)}"
    return _not_of_type(full, expected, value)


def _not_of_type(full: tuple[Any, ...], expected: Any, value: Any) -> str:
    integer = expected == "integer" and type(value) is float
    found = cut(repr(value)) if integer else kind_in_words(value)
    message = f"{place(full)} must be {_a(expected)}, not {found}"
    if expected == "array" and isinstance(value, str):
        message += _as_a_list(value)
    if place(full) == "each invite entry":
        message += " (start each entry with `- id: ...`)"
    return message


_PLAIN_ITEM = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.+-]*")  # written plain in a flow list


def _as_a_list(text: str) -> str:
    """`groups: emea` meant `groups: [emea]` (and `a, b` meant `[a, b]`): the list it likely
    meant, when its items are plain words; else how a list is written."""
    items = [item.strip() for item in text.split(",")]
    if all(_PLAIN_ITEM.fullmatch(item) for item in items) and len(text) <= QUOTED_CHARS:
        return f"; did you mean `[{', '.join(items)}]`?"
    return "; write a list as `[a, b]` or as lines starting with `- `"


def _format(error: ValidationError, where: Where, path: tuple[Any, ...]) -> str:
    field = field_name(where.prefix + path)
    kind = "email address" if error.validator_value == "email" else str(error.validator_value)
    message = f"`{field}`: {quote_value(error.instance)} is not a valid {kind}"
    if error.validator_value == "email" and isinstance(error.instance, str):
        why = email_problem(error.instance)
        if why:
            message += f": {escape(why)}"
    return message


def _pattern(error: ValidationError, where: Where, path: tuple[Any, ...]) -> str:
    field = field_name(where.prefix + path)
    shown = quote_value(error.instance)
    if field == "phone":
        return f'`phone`: {shown} is not E.164 text such as "+442079460000"'
    if field == "id":
        return f"`id`: {shown} is not a valid inviteId ({ID_RULE})"
    if error.validator_value == ONE_LINE:
        return f"`{field}`: {shown} {_control_problem(error.instance)}"
    return f"`{field}`: {shown} does not match `{escape(str(error.validator_value))}`"


def _enum(error: ValidationError, where: Where, path: tuple[Any, ...]) -> str:
    field = field_name(where.prefix + path)
    allowed = [str(a) for a in error.validator_value]
    value = error.instance
    what = place(where.prefix + path)
    kind = "is not a field of an invite" if field == "resendOnChange" else "is not allowed"
    return f"{what}: {quote_value(value)} {kind}; {_advice(value, allowed)}"


def _advice(word: object, allowed: Sequence[str], more: str = "") -> str:
    """The allowed word meant, when ``word`` is text: the same but for case (`Id` is `id`,
    which difflib's similarity, one letter of two, misses), else the closest by spelling;
    else every allowed word, and ``more``."""
    if isinstance(word, str):
        same = [name for name in allowed if name.casefold() == word.casefold()]
        meant = same[:1] or difflib.get_close_matches(word, allowed, n=1)
        if meant:
            return f"did you mean `{meant[0]}`?"
    return f"allowed: {', '.join(allowed)}{more}"


def _control_problem(value: str) -> str:
    control = next(c for c in value if c in _CONTROLS)
    if control in "\r\n":
        # Most often a `|` or `>` block scalar, which keeps the final line break.
        return "holds a line break; write the value on one line, plain or quoted"
    if control == "\t":
        return "holds a tab; use spaces"
    return f"holds control character U+{ord(control):04X}; remove it"


def _bound(words: str, noun: str = "") -> Describer:
    """Words for a bound: ``words`` before the limit, and what it counts ("at least" 1
    "character")."""

    def describe(error: ValidationError, where: Where, path: tuple[Any, ...]) -> str:
        limit = error.validator_value
        unit = "" if not noun else f" {noun}" if limit == 1 else f" {noun}s"
        return f"{place(where.prefix + path)} must be {words} {limit}{unit}"

    return describe


def _unique(error: ValidationError, where: Where, path: tuple[Any, ...]) -> str:
    return f"`{field_name(where.prefix + path)}` lists the same item twice; it is a set"


def _one_of(error: ValidationError, where: Where, path: tuple[Any, ...]) -> str | list[FileProblem]:
    context = error.context or []
    # Branches whose `type` does not fit say nothing about what is wrong inside
    # the value; the deepest error of a branch that fits does.
    fitting = [e for e in context if not (e.validator == "type" and not e.path)]
    if context and not fitting:
        kinds = " or ".join(_a(e.validator_value) for e in context)
        return f"{place(where.prefix + path)} must be {kinds}, not {kind_in_words(error.instance)}"
    if not fitting:
        return _other(error, where, path)
    return describe(max(fitting, key=lambda e: len(e.path)), where)


def _other(error: ValidationError, where: Where, path: tuple[Any, ...]) -> str:
    rule = json.dumps(error.validator_value, ensure_ascii=False, default=str)[:QUOTED_CHARS]
    field = field_name(where.prefix + path)
    return f"`{field}` does not meet the schema rule `{error.validator}: {escape(rule)}`"


def _a(expected: Any) -> str:
    names = {
        "string": "text",
        "array": "a list",
        "object": "a mapping",
        "boolean": "true or false",
        "integer": "a whole number",
        "number": "a number",
        "null": "empty",
    }
    if isinstance(expected, list):
        return " or ".join(names.get(e, str(e)) for e in expected)
    return names.get(expected, str(expected))


MESSAGES: dict[str, Describer] = {
    "additionalProperties": _additional,
    "required": _required,
    "type": _type,
    "format": _format,
    "pattern": _pattern,
    "uniqueItems": _unique,
    "enum": _enum,
    "minLength": _bound("at least", "character"),
    "maxLength": _bound("at most", "character"),
    "minItems": _bound("a list of at least", "item"),
    "maxItems": _bound("a list of at most", "item"),
    "minimum": _bound("at least"),
    "maximum": _bound("at most"),
    "exclusiveMinimum": _bound("more than"),
    "exclusiveMaximum": _bound("less than"),
    "oneOf": _one_of,
    "anyOf": _one_of,
}


# One meaning of an e-mail address: email-validator's, without deliverability checks.
#
# The schema says ``"format": "email"`` (RFC 5321's ASCII addresses; not ``idn-email``): the
# platform is not known to take international addresses, and an editor's JSON Schema
# implementation (ajv-formats, yaml-language-server) judges the same format. What ``validate``
# accepts is what email-validator accepts for an ASCII address: no quoted local part, no domain
# literal, a domain with a dot that is not a special-use name (``.test``, ``.local``,
# ``localhost``...), a local part of at most 64 characters.


def email_problem(value: str) -> str | None:
    """Why ``value`` is not an e-mail address this tool accepts, or None."""
    if not value.isascii():
        char = next(c for c in value if not c.isascii())
        fix = (
            "; write the domain in its ASCII (xn--) form"
            if char in value.rpartition("@")[2]
            else ""
        )
        return (
            f"it holds U+{ord(char):04X}, which is not ASCII: international addresses "
            f"are not accepted{fix}"
        )
    from email_validator import EmailNotValidError, validate_email

    try:
        validate_email(
            value,
            check_deliverability=False,
            allow_smtputf8=False,
            allow_quoted_local=False,
            allow_domain_literal=False,
            allow_display_name=False,
            strict=True,  # a local part of at most 64 characters (RFC 5321)
        )
    except EmailNotValidError as error:
        said = str(error)
        return _REASONS.get(said, said[:1].lower() + said[1:].rstrip("."))
    return None


# email-validator's sentences, said as the rest of a message here: "... is not a valid
# email address: it has no @-sign". Others are shown as it words them, without the dot.
_REASONS = {
    "An email address must have an @-sign.": "it has no @-sign",
    "The part after the @-sign is not valid. It should have a period.": (
        "the part after the @-sign has no period"
    ),
}


def is_email(value: object) -> bool:
    """The ``email`` format: True for anything but text (the schema's `type` judges that)."""
    return not isinstance(value, str) or email_problem(value) is None
