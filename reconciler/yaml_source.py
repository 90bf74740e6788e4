"""A YAML loader that remembers where every value came from.

PyYAML silently keeps the last of two duplicate keys and turns hand-written
values such as ``+442079460000``, ``NO`` or ``12:30`` into numbers and
booleans. This loader reports duplicates, keeps each value's line and column,
and keeps the original text of plain scalars that YAML resolved to something
other than a string, so a later type error can tell the user what to quote.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import yaml

from reconciler.errors import SourceError

_STR_TAG = "tag:yaml.org,2002:str"


class Mark(NamedTuple):
    line: int  # 1-based
    column: int  # 1-based


def _mark(node: yaml.Node) -> Mark:
    return Mark(node.start_mark.line + 1, node.start_mark.column + 1)


class MarkedDict(dict):
    """A mapping with the position of each key and value."""

    def __init__(self, mark: Mark) -> None:
        super().__init__()
        self.mark = mark
        self.key_marks: dict[Any, Mark] = {}
        self.value_marks: dict[Any, Mark] = {}
        # Original text of plain scalars that YAML did not read as a string.
        self.raw: dict[Any, str] = {}


class MarkedList(list):
    """A sequence with the position of each item."""

    def __init__(self, mark: Mark) -> None:
        super().__init__()
        self.mark = mark
        self.item_marks: list[Mark] = []
        self.raw: dict[int, str] = {}


def _non_string_plain(node: yaml.Node) -> str | None:
    # A plain scalar has style None (pure-Python parser) or "" (libyaml).
    if isinstance(node, yaml.ScalarNode) and not node.style and node.tag != _STR_TAG:
        return str(node.value)
    return None


# libyaml's parser when PyYAML was built with it (the wheels are): several
# times faster, and its nodes carry the same marks.
_BaseLoader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _MarkedLoader(_BaseLoader):  # type: ignore[misc, valid-type]
    def __init__(self, stream: str, path: str) -> None:
        super().__init__(stream)
        self.path = path
        self.problems: list[SourceError] = []

    def problem(self, mark: Mark, message: str) -> None:
        self.problems.append(SourceError(self.path, mark.line, mark.column, message))


def _construct_mapping(loader: _MarkedLoader, node: yaml.MappingNode) -> MarkedDict:
    loader.flatten_mapping(node)  # resolves `<<` merge keys
    result = MarkedDict(_mark(node))
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=True)
        key_mark = _mark(key_node)
        if not isinstance(key, str):
            loader.problem(
                key_mark,
                f"key {key_node.value!r} is read by YAML as {type(key).__name__} "
                f"{key!r}; put it in quotes",
            )
            key = str(key_node.value)
        if key in result:
            first = result.key_marks[key]
            loader.problem(
                key_mark,
                f"duplicate key `{key}` (first set on line {first.line}); "
                "YAML would silently keep only the last one",
            )
            continue
        result[key] = loader.construct_object(value_node, deep=True)
        result.key_marks[key] = key_mark
        result.value_marks[key] = _mark(value_node)
        raw = _non_string_plain(value_node)
        if raw is not None:
            result.raw[key] = raw
    return result


def _construct_sequence(loader: _MarkedLoader, node: yaml.SequenceNode) -> MarkedList:
    result = MarkedList(_mark(node))
    for index, item_node in enumerate(node.value):
        result.append(loader.construct_object(item_node, deep=True))
        result.item_marks.append(_mark(item_node))
        raw = _non_string_plain(item_node)
        if raw is not None:
            result.raw[index] = raw
    return result


_MarkedLoader.add_constructor("tag:yaml.org,2002:map", _construct_mapping)
_MarkedLoader.add_constructor("tag:yaml.org,2002:seq", _construct_sequence)
_MarkedLoader.add_constructor("tag:yaml.org,2002:omap", _construct_sequence)


def decode_source(data: bytes, path: str) -> tuple[str | None, list[SourceError]]:
    """UTF-8 text of a file, or the position of its first undecodable byte."""
    try:
        return data.decode("utf-8-sig"), []
    except UnicodeDecodeError as exc:
        before = data[: exc.start]
        line = before.count(b"\n") + 1
        column = exc.start - (before.rfind(b"\n") + 1) + 1
        byte = data[exc.start : exc.start + 1].hex()
        message = f"not valid UTF-8 (byte 0x{byte}); save the file as UTF-8"
        return None, [SourceError(path, line, column, message)]


def load_yaml(text: str, path: str) -> tuple[Any, list[SourceError]]:
    """The single document in ``text`` with marks, and every problem found.

    Returns ``(None, problems)`` when the text cannot be parsed at all.
    """
    loader = _MarkedLoader(text, path)
    try:
        document = loader.get_single_data()
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line, column = (mark.line + 1, mark.column + 1) if mark else (1, 1)
        problem = " ".join(p for p in (exc.context, exc.problem) if p) or "invalid YAML"
        if "expected a single document" in problem:
            problem = "holds more than one YAML document; keep one document per file"
        return None, [SourceError(path, line, column, problem)]
    except yaml.YAMLError as exc:  # e.g. a reader error on control characters
        return None, [SourceError(path, 1, 1, f"invalid YAML: {exc}")]
    finally:
        loader.dispose()
    return document, loader.problems


def locate(document: Any, path: tuple[Any, ...] | list[Any]) -> Mark:
    """The position of the value at ``path`` (keys and indexes) in ``document``."""
    node = document
    mark = getattr(document, "mark", Mark(1, 1))
    for step in path:
        if isinstance(node, MarkedDict) and step in node:
            mark = node.value_marks[step]
            node = node[step]
        elif isinstance(node, MarkedList) and isinstance(step, int) and step < len(node):
            mark = node.item_marks[step]
            node = node[step]
        else:
            break
    return mark


def raw_text(document: Any, path: tuple[Any, ...] | list[Any]) -> str | None:
    """The original text of a plain scalar that YAML read as a non-string."""
    if not path:
        return None
    parent = document
    for step in path[:-1]:
        try:
            parent = parent[step]
        except (KeyError, IndexError, TypeError):
            return None
    raw = getattr(parent, "raw", None)
    return raw.get(path[-1]) if raw is not None else None


def to_plain(value: Any) -> Any:
    """Marked containers turned into ordinary dicts and lists."""
    if isinstance(value, dict):
        return {key: to_plain(item) for key, item in value.items()}
    if isinstance(value, list):
        return [to_plain(item) for item in value]
    return value
