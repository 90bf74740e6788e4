"""What YAML 1.1 makes of a scalar, how to say so to the person who wrote it, and how
to write a value back as a scalar that reads as that value.

The rules are PyYAML's own (its implicit resolvers and safe constructors), so
values load exactly as ``yaml.safe_load`` would read them; only the way of
reporting changes: the text as written, never a Python repr.
"""

from __future__ import annotations

import datetime
import json
import re
from collections.abc import Callable
from typing import Any

import yaml

from reconciler.safetext import escape, quote_value

YAML_TAG = "tag:yaml.org,2002:"
STR_TAG = YAML_TAG + "str"
MERGE_TAG = YAML_TAG + "merge"
MAP_TAGS = frozenset({YAML_TAG + "map"})
SEQ_TAGS = frozenset({YAML_TAG + "seq", YAML_TAG + "omap"})
# The patterns YAML 1.1 reads a plain scalar by, by its first character.
_RESOLVERS: dict[str | None, tuple[tuple[str, Callable[[str], object]], ...]] = {
    first: tuple((tag, regexp.match) for tag, regexp in resolvers)
    for first, resolvers in yaml.resolver.Resolver.yaml_implicit_resolvers.items()
}
# A plain scalar YAML 1.1 may read as something other than text starts with one of these
# (most keys and values do not: they need no resolving).
RESOLVED_FIRST = frozenset(_RESOLVERS)
# Tags YAML resolves that have no value of their own: the text stays a string.
_STAYS_TEXT = frozenset({STR_TAG, YAML_TAG + "value", YAML_TAG + "yaml"})
# Python will not write out an int of more than 4,300 digits (about 14,284 bits):
# `0x` and 5,000 `f`s would break every message that shows the value.
_MAX_INT_BITS = 14_000
_SAFE = yaml.constructor.SafeConstructor()
SCALAR_TAGS = frozenset(
    YAML_TAG + name for name in ("null", "bool", "int", "float", "timestamp", "binary", "str")
)


class TagProblem(Exception):
    """A scalar whose explicit tag does not fit it, or a tag the loader does not know."""


def resolve_plain(value: str) -> str:
    """The tag YAML 1.1 gives a plain (unquoted, untagged) scalar."""
    for tag, match in _RESOLVERS.get(value[:1], ()):
        if match(value):
            return tag
    return STR_TAG


def construct_tagged(tag: str, value: str) -> Any:
    """The value of a scalar written with an explicit ``tag``; TagProblem when a mapping's
    or a list's tag is on a single value, or the tag cannot hold the text."""
    if tag in MAP_TAGS or tag in SEQ_TAGS:
        raise TagProblem(misplaced_tag(tag, "a single value"))
    return construct(tag, value)


def misplaced_tag(tag: str, found: str) -> str:
    """What to say of ``tag`` written on ``found`` (a mapping, a list, a single value),
    which it does not fit."""
    if tag in MAP_TAGS:
        return wrong_kind(tag, "a mapping", found)
    if tag in SEQ_TAGS:
        return wrong_kind(tag, "a list", found)
    if tag in SCALAR_TAGS:
        return wrong_kind(tag, "a single value", found)
    return unknown_tag(tag)


def construct(tag: str, value: str) -> Any:
    """The value of a scalar with ``tag``, as PyYAML's safe loader builds it."""
    if tag in _STAYS_TEXT:
        return value
    if tag not in SCALAR_TAGS:
        raise TagProblem(unknown_tag(tag))
    node = yaml.ScalarNode(tag, value)
    try:
        result = _SAFE.yaml_constructors[tag](_SAFE, node)
    except (yaml.YAMLError, ValueError, TypeError, KeyError, IndexError, AttributeError) as exc:
        fix = "remove the tag or fix the value"
        raise TagProblem(
            f"{quote_value(cut(value))} does not fit its tag {short_tag(tag)}; {fix}"
        ) from exc
    except OverflowError as exc:
        raise TagProblem(_out_of_range(value, tag)) from exc
    if result.__class__ is int and result.bit_length() > _MAX_INT_BITS:
        raise TagProblem(_out_of_range(value, tag))
    return result


_SHOWN = 40  # characters of such a value a message quotes (a file may hold a 5 MB one)


def cut(text: str) -> str:
    """Text YAML read as something else, as a message quotes it."""
    return text if len(text) <= _SHOWN else text[:_SHOWN] + "…"


def quote_it(raw: str) -> str:
    """The advice for text YAML read as something else: the value quoted, to copy,
    when it is short enough to be shown whole."""
    return f'put it in quotes: "{escape(raw)}"' if len(raw) <= _SHOWN else "put it in quotes"


def _out_of_range(text: str, tag: str) -> str:
    return f"{quote_value(cut(text))} is out of range for {short_tag(tag)}"


def short_tag(tag: str) -> str:
    """``!!int`` for YAML's own tags, the tag as written otherwise."""
    return "!!" + tag[len(YAML_TAG) :] if tag.startswith(YAML_TAG) else tag


def unknown_tag(tag: str) -> str:
    return f"the tag {escape(short_tag(tag))} is not supported here; remove it"


def wrong_kind(tag: str, needs: str, found: str) -> str:
    return f"the tag {escape(short_tag(tag))} needs {needs}, but the value is {found}"


def kind_of(value: Any) -> str:
    """What a value is, in the words of someone who writes YAML."""
    if value is None:
        return "empty"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "text"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, datetime.datetime):
        return "a date and time"
    if isinstance(value, datetime.date):
        return "a date"
    if isinstance(value, bytes):
        return "binary data"
    return "a value of another kind"


def reading(raw: str, value: Any) -> str:
    """``NO as a boolean (false)``: how YAML read the text ``raw``, without Python reprs."""
    kind, shown = kind_of(value), escape(cut(raw))
    if isinstance(value, bool):
        return f"{shown} as {kind} ({str(value).lower()})"
    if isinstance(value, int | float) and str(value) != raw:
        return f"{shown} as {kind} ({cut(str(value))})"
    return f"{shown} as {kind}"


def key_problem(raw: str, value: Any) -> str:
    """The message for a mapping key YAML did not read as text."""
    if raw == "":
        return "a key is empty; write a field name before the `:`"
    return f"YAML reads the key {reading(raw, value)}; {quote_it(raw)}"


# -- a value written back as scalar text, in the style it was written in --------------------

# Characters a double-quoted scalar must escape: YAML reads them as breaks, or refuses them.
_UNPRINTABLE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\ufeff\ud800-\udfff\ufffe\uffff]")
# A plain scalar's first character is no indicator; inside [ ] or { } no character of
# `,[]{}` either, where in block context they are text like any other.
_PLAIN_FLOW = re.compile(r"[^\s\-?:,\[\]{}#&*!|>'\"%@`](?:[^,\[\]{}]*[^\s,\[\]{}:])?")
_PLAIN_BLOCK = re.compile(r"[^\s\-?:,\[\]{}#&*!|>'\"%@`](?:.*[^\s:])?", re.DOTALL)


def render_scalar(value: Any, style: str | None, flow: bool) -> str:
    """``value`` as a YAML scalar: in the style it was written in where that reads it back."""
    if not isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if style == "'" and not _UNPRINTABLE.search(value):
        return "'" + value.replace("'", "''") + "'"
    if style is None and _plain_ok(value, flow):
        return value
    return _double_quoted(value)


def _plain_ok(value: str, flow: bool) -> bool:
    plain = _PLAIN_FLOW if flow else _PLAIN_BLOCK
    if not plain.fullmatch(value) or ": " in value or " #" in value or "\n" in value:
        return False
    if _UNPRINTABLE.search(value):
        return False
    return resolve_plain(value) == STR_TAG


def _double_quoted(value: str) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return _UNPRINTABLE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)
