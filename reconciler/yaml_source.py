"""A YAML loader that remembers where every value came from.

PyYAML silently keeps the last of two duplicate keys and turns hand-written
values such as ``+442079460000``, ``NO`` or ``12:30`` into numbers and
booleans. This loader reports duplicates, keeps each value's line and column,
and keeps the original text of plain scalars that YAML resolved to something
other than a string, so a later type error can tell the user what to quote.
"""

from __future__ import annotations

import codecs
import re
from typing import Any, NamedTuple

import yaml

from reconciler.errors import SourceError

_STR_TAG = "tag:yaml.org,2002:str"
_MERGE_TAG = "tag:yaml.org,2002:merge"
# Characters YAML does not allow in a stream (YAML 1.1 section 5.1).
_CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x84\x86-\x9f\ufffe\uffff]")


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

        self.current_node: yaml.Node | None = None

    def problem(self, mark: Mark, message: str) -> None:
        self.problems.append(SourceError(self.path, mark.line, mark.column, message))

    def construct_object(self, node: yaml.Node, deep: bool = False) -> Any:
        # Remembered so that a value that does not fit an explicit tag
        # (`!!int twelve`) can be reported where it stands.
        self.current_node = node
        return super().construct_object(node, deep=deep)


def _expect(node: yaml.Node, kind: type[yaml.Node], what: str) -> None:
    if not isinstance(node, kind):
        tag = node.tag.rsplit(":", 1)[-1]
        raise yaml.constructor.ConstructorError(
            None,
            None,
            f"the tag !!{tag} needs {what}, but the value is {getattr(node, 'id', 'another kind')}",
            node.start_mark,
        )


def _construct_mapping(loader: _MarkedLoader, node: yaml.MappingNode) -> MarkedDict:
    _expect(node, yaml.MappingNode, "a mapping")
    explicit = sum(1 for key_node, _ in node.value if key_node.tag != _MERGE_TAG)
    loader.flatten_mapping(node)  # puts the `<<` merged pairs first
    merged = len(node.value) - explicit
    result = MarkedDict(_mark(node))
    explicit_keys: set[Any] = set()
    for index, (key_node, value_node) in enumerate(node.value):
        key = loader.construct_object(key_node, deep=True)
        key_mark = _mark(key_node)
        if not isinstance(key, str):
            loader.problem(
                key_mark,
                f"key {key_node.value!r} is read by YAML as {type(key).__name__} "
                f"{key!r}; put it in quotes",
            )
            key = str(key_node.value)
        # A key written in the mapping overrides one merged in with `<<`.
        from_merge = index < merged
        if not from_merge and key in explicit_keys:
            first = result.key_marks[key]
            loader.problem(
                key_mark,
                f"duplicate key `{key}` (first set on line {first.line}); "
                "YAML would silently keep only the last one",
            )
            continue
        if not from_merge:
            explicit_keys.add(key)
        result[key] = loader.construct_object(value_node, deep=True)
        result.key_marks[key] = key_mark
        result.value_marks[key] = _mark(value_node)
        raw = _non_string_plain(value_node)
        if raw is not None:
            result.raw[key] = raw
    return result


def _construct_sequence(loader: _MarkedLoader, node: yaml.SequenceNode) -> MarkedList:
    _expect(node, yaml.SequenceNode, "a list")
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
    # The BOM is stripped by hand: the utf-8-sig codec reports error offsets
    # that do not match the bytes given to it.
    if data.startswith(codecs.BOM_UTF8):
        data = data[len(codecs.BOM_UTF8) :]
    try:
        return data.decode("utf-8"), []
    except UnicodeDecodeError as exc:
        before = data[: exc.start]
        line = before.count(b"\n") + 1
        line_start = before.rfind(b"\n") + 1
        # Columns count characters everywhere else, so count them here too.
        column = len(data[line_start : exc.start].decode("utf-8", "replace")) + 1
        byte = data[exc.start : exc.start + 1].hex()
        message = f"not valid UTF-8 (byte 0x{byte}); save the file as UTF-8"
        return None, [SourceError(path, line, column, message)]


class LoadedYaml(NamedTuple):
    document: Any  # None when the text is empty or cannot be parsed
    problems: list[SourceError]
    mark: Mark  # where the document starts


def _position(text: str, index: int) -> Mark:
    return Mark(text.count("\n", 0, index) + 1, index - (text.rfind("\n", 0, index) + 1) + 1)


def load_yaml(text: str, path: str) -> LoadedYaml:
    """The single document in ``text`` with marks, and every problem found."""
    control = _CONTROL.search(text)
    if control:
        message = (
            f"control character U+{ord(control.group()):04X} is not allowed in YAML; remove it"
        )
        mark = _position(text, control.start())
        return LoadedYaml(None, [SourceError(path, *mark, message)], mark)
    loader = _MarkedLoader(text, path)
    try:
        node = loader.get_single_node()
        if node is None:
            return LoadedYaml(None, loader.problems, Mark(1, 1))
        document = loader.construct_document(node)
        return LoadedYaml(document, loader.problems, _mark(node))
    except yaml.MarkedYAMLError as exc:
        return LoadedYaml(None, [_syntax_problem(exc, text, path)], Mark(1, 1))
    except yaml.YAMLError as exc:
        return LoadedYaml(None, [SourceError(path, 1, 1, f"invalid YAML: {exc}")], Mark(1, 1))
    except (ValueError, TypeError, KeyError, IndexError, AttributeError, OverflowError) as exc:
        # PyYAML's constructors raise plain errors for a value its explicit tag
        # cannot hold, such as `!!int twelve` or `!!timestamp 2024-13-45`.
        return LoadedYaml(None, [_tag_problem(loader.current_node, exc, path)], Mark(1, 1))
    except RecursionError:
        return LoadedYaml(None, [SourceError(path, 1, 1, "nested too deeply")], Mark(1, 1))
    finally:
        loader.dispose()


def _syntax_problem(exc: yaml.MarkedYAMLError, text: str, path: str) -> SourceError:
    context = exc.context or ""
    # An unclosed bracket or quote is best shown where it was opened.
    opened = "flow" in context or "quoted" in context
    mark = (exc.context_mark if opened else None) or exc.problem_mark or exc.context_mark
    where = Mark(mark.line + 1, mark.column + 1) if mark else Mark(1, 1)
    problem = " ".join(p for p in (exc.context, exc.problem) if p) or "invalid YAML"
    hint = next((h for words, h in _SYNTAX_HINTS if words in problem), None)
    if hint:
        problem += f" ({hint})"
    if "expected a single document" in problem:
        problem = "holds more than one YAML document; keep one document per file"
    elif exc.problem_mark is not None and _char_at(text, exc.problem_mark) == "\t":
        where = Mark(exc.problem_mark.line + 1, exc.problem_mark.column + 1)
        problem = "a tab character here; YAML must be indented with spaces"
    return SourceError(path, where.line, where.column, problem)


# PyYAML's wording for common hand-writing mistakes, and what usually causes them.
_SYNTAX_HINTS = (
    (
        "mapping values are not allowed",
        "often a missing space after `:`, or a line indented wrongly",
    ),
    (
        "did not find expected '-' indicator",
        "check the indentation: an entry's keys line up, and each entry starts with `- `",
    ),
    ("did not find expected key", "check the indentation of this line against the one above"),
    ("could not find expected ':'", "a key needs a `:` after it"),
    ("found unexpected end of stream", "a quote or bracket is not closed"),
    ("found undefined alias", "an `*alias` needs an `&anchor` earlier in the file"),
)


def _char_at(text: str, mark: Any) -> str:
    lines = text.split("\n")
    if mark.line < len(lines) and mark.column < len(lines[mark.line]):
        return lines[mark.line][mark.column]
    return ""


def _tag_problem(node: yaml.Node | None, exc: Exception, path: str) -> SourceError:
    if node is None:
        return SourceError(path, 1, 1, f"cannot read a value: {type(exc).__name__}")
    tag = node.tag.rsplit(":", 1)[-1]
    value = node.value if isinstance(node, yaml.ScalarNode) else getattr(node, "id", "node")
    message = f"{value!r} does not fit its tag !!{tag}; remove the tag or fix the value"
    return SourceError(path, *_mark(node), message)


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


def locate_key(document: Any, path: tuple[Any, ...] | list[Any]) -> Mark:
    """The position of the key naming the value at ``path``, else of the value."""
    if path and isinstance(path[-1], str):
        parent = document
        for step in path[:-1]:
            try:
                parent = parent[step]
            except (KeyError, IndexError, TypeError):
                break
        else:
            if isinstance(parent, MarkedDict) and path[-1] in parent.key_marks:
                return parent.key_marks[path[-1]]
    return locate(document, path)


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
