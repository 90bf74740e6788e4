"""YAML text in, plain values with positions out, and every problem at its place: the
loader's entry point (``parse``, ``stream``, ``load_yaml``).

PyYAML silently keeps the last of two duplicate keys and turns hand-written
values such as ``+442079460000``, ``NO`` or ``12:30`` into numbers and
booleans. This loader reads libyaml's event stream (see ``builder``),
reports duplicates, keeps each value's line and column, and keeps the
original text of plain scalars that YAML resolved to something other than a
string, so a later type error can tell the user what to quote. Depth and
alias expansion are bounded for every YAML file the tool reads; a file is read
in chunks (``FileSource``), never held whole, and a syntax error is worded for
the person who wrote the file (where to look, the usual cause).

``stream`` reads a file of 200,000 invites without keeping them: each item of the
list under a chosen top-level key goes to a hook as soon as it is built, and ``None``
holds its place in the document.
"""

from __future__ import annotations

import codecs
import re
from typing import Any, BinaryIO, NamedTuple

import yaml

from reconciler.errors import FileProblem
from reconciler.files import TooLarge
from reconciler.safetext import escape
from reconciler.yamlload.builder import (
    DEPTH_LIMIT,
    Builder,
    Fatal,
    ItemHook,
    Lines,
    Located,
    Mark,
    Parser,
)

# Characters YAML does not allow in a stream (YAML 1.1 section 5.1).
_CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x84\x86-\x9f\ufffe\uffff]")


class Parsed(NamedTuple):
    document: Located | None  # None when the text cannot be read at all
    problems: list[FileProblem]


def decode_source(data: bytes, path: str) -> tuple[str | None, list[FileProblem]]:
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
        return None, [FileProblem(path, line, column, message)]


class FileSource:
    """An open file handed to libyaml in chunks, never held whole; bounded, UTF-8 only."""

    def __init__(self, stream: BinaryIO, limit: int) -> None:
        self.stream = stream
        self.limit = limit
        self.read_so_far = 0
        # Whether a value may be cut short by a comment (``comments``): looked at as the
        # bytes pass, the end of the last chunk kept for a ` #x` across two.
        self.suspect = False
        self._tail = b""

    # The default only makes this a file-like reader for type checkers: libyaml
    # always asks for a size.
    def read(self, size: int = 65536, /) -> bytes:
        data = self.stream.read(size)
        if self.read_so_far == 0 and data[:2] in _UTF16:  # libyaml would read UTF-16
            raise UnicodeDecodeError("utf-8", data, 0, 1, "a UTF-16 byte order mark")
        self.read_so_far += len(data)
        if self.read_so_far > self.limit:
            raise TooLarge(self.limit)
        if not self.suspect:
            self.suspect = suspect(self._tail + data)
            self._tail = data[-2:]
        return data


_UTF16 = (b"\xff\xfe", b"\xfe\xff")
# libyaml's own bound on nesting (0.2.6 and later), met before ours in flow style.
_LIBYAML_TOO_DEEP = "exceeded maximum nesting depth"


def stream(
    source: str | FileSource,
    path: str,
    lines: Lines,
    key: str | None = None,
    hook: ItemHook | None = None,
) -> Parsed:
    """The single document in ``source``, located, and every problem found in it; ``hook``
    is handed each item of the top-level ``key`` list in order.

    ``source`` is text or a ``FileSource``; ``lines`` reads it again (a file is decoded
    only if a problem needs a line number). Items are handed over as they are read, and
    ``None`` holds each one's place in the document. A list that came through an alias or
    a merge could not be streamed: it stays in the document, and its items are handed over
    once the file is read.
    """
    builder = Builder(lines, key, hook)
    parsed = _read(source, path, lines, builder)
    document = parsed.document
    if hook is None or builder.streamed or document is None or not isinstance(document.value, dict):
        return parsed
    items, (spot, own, _) = document.value.get(key), document.walk((key,))
    for index, item in enumerate(items if isinstance(items, list) else ()):
        # Every list built has its spot; were one missing, the list's place would do.
        at = spot.position(index) if spot is not None else None
        at = own if at is None else at
        kid = spot.kids.get(index) if spot is not None else None
        hook(index, Located(item, kid, at, lines), lines.mark(at))
    return parsed


def _read(source: str | FileSource, path: str, lines: Lines, builder: Builder) -> Parsed:
    parser = Parser(source)
    try:
        document = builder.build(parser)
    except Fatal as exc:
        return Parsed(None, [FileProblem(path, *lines.mark(exc.position), exc.message)])
    except (yaml.reader.ReaderError, UnicodeDecodeError):
        return Parsed(None, _unreadable(lines, path))
    except TooLarge as exc:
        message = f"larger than {exc.limit // 2**20} MiB; split it into several files"
        return Parsed(None, [FileProblem(path, 1, 1, message)])
    except yaml.MarkedYAMLError as exc:
        if _LIBYAML_TOO_DEEP in str(exc.problem):
            return Parsed(None, [_too_deep(exc, lines, path)])
        return Parsed(None, [_syntax_problem(exc, lines.text, path)])
    except yaml.YAMLError as exc:
        return Parsed(None, [FileProblem(path, 1, 1, f"invalid YAML: {exc}")])
    finally:
        parser.dispose()
    problems = [
        FileProblem(path, *lines.mark(at), message) for at, message in sorted(builder.problems)
    ]
    return Parsed(document, problems)


def _unreadable(lines: Lines, path: str) -> list[FileProblem]:
    """What libyaml's reader refused: bytes that are not UTF-8, or a control character."""
    text, problems = decode_source(lines.data, path)
    if text is None:
        return problems
    control = _CONTROL.search(text)
    if control is None:  # not expected: libyaml and this pattern refuse the same characters
        # (but a libyaml built otherwise may refuse more)
        return [FileProblem(path, 1, 1, "a character YAML does not allow; save the file as text")]
    message = f"control character U+{ord(control.group()):04X} is not allowed in YAML; remove it"
    return [FileProblem(path, *Lines(text).mark(control.start()), message)]


def _too_deep(exc: yaml.MarkedYAMLError, lines: Lines, path: str) -> FileProblem:
    """Where the nesting passed ``DEPTH_LIMIT``, though libyaml refused it deeper down.

    libyaml 0.2.6 stops at 1,000 levels while scanning, and in flow style
    (``[[[``) it scans that far ahead before handing out a single event, so
    the builder never saw the 101st level. The text up to libyaml's stop is
    parsed again, without streaming, to find the builder's own position.
    """
    mark = exc.problem_mark
    message = f"nested too deeply (limit {DEPTH_LIMIT})"
    if mark is None:
        return FileProblem(path, 1, 1, message)
    parser = Parser(lines.text[: mark.index])
    try:
        Builder(lines).build(parser)
    except Fatal as fatal:
        return FileProblem(path, *lines.mark(fatal.position), fatal.message)
    except yaml.YAMLError:
        pass  # the text cut short did not reach the limit: say where libyaml stopped
    finally:
        parser.dispose()
    return FileProblem(path, mark.line + 1, mark.column + 1, message)


# -- a YAML syntax error in words --------------------------------------------------------------


def _syntax_problem(exc: yaml.MarkedYAMLError, text: str, path: str) -> FileProblem:
    """What a syntax error says to the person who wrote the file: where to look (where a
    bracket or quote opened, where a key began), the usual cause in words, a tab or a
    space left out named as such."""
    at = exc.problem_mark
    if at is not None and text[at.index : at.index + 1] == "\t":  # libyaml's index: characters
        message = "a tab character here; YAML must be indented with spaces"
        return FileProblem(path, at.line + 1, at.column + 1, message)
    where = _syntax_mark(exc)
    problem = " ".join(p for p in (exc.context, exc.problem) if p) or "invalid YAML"
    hint = (
        _conflict_hint(text, where.line)
        or _glued_hint(text, where.line)
        or (_colon_hint(text, where.line) if "mapping values" in problem else None)
        or next((h for words, h in _SYNTAX_HINTS if words in problem), None)
    )
    if hint:
        problem += f" ({hint})"
    return FileProblem(path, where.line, where.column, problem)


def _syntax_mark(exc: yaml.MarkedYAMLError) -> Mark:
    """An unclosed bracket or quote is best shown where it was opened, a key without
    its `:` where the key begins (libyaml notices only on a later line)."""
    context = exc.context or ""
    opened = any(words in context for words in ("flow", "quoted", "simple key"))
    mark = (exc.context_mark if opened else None) or exc.problem_mark or exc.context_mark
    return Mark(mark.line + 1, mark.column + 1) if mark else Mark(1, 1)


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
    ("did not find expected ','", "a bracket is not closed, or two items lack a `,` between them"),
)


# `name:Acme` (one plain scalar to YAML, so no key) and `-id: x` (a key `-id`, so no
# list item): the two ways of writing a mapping or a list without the space YAML needs.
_GLUED_KEY = re.compile(r"\s*(?:-\s+)?([A-Za-z_][\w-]*):(?=[^\s:/])")


_GLUED_DASH = re.compile(r"\s*-(?=[A-Za-z_])")


# What git writes into a file it could not merge: `<<<<<<< HEAD`, `|||||||` (diff3),
# `=======`, `>>>>>>> branch`, each at the start of a line.
_CONFLICT_MARKER = re.compile(r"^(<{7}|\|{7}|={7}|>{7})(?:[ \t]|\r?$)", re.MULTILINE)


def _conflict_hint(text: str, line: int) -> str | None:
    """A merge left unresolved: the first of git's conflict markers, by its line."""
    marker = _CONFLICT_MARKER.search(text)
    if marker is None:
        return None
    number = text.count("\n", 0, marker.start()) + 1
    where = "this line is" if number == line else f"line {number} is"
    return (
        f"{where} a git merge-conflict marker, `{marker.group(1)}`: a merge left "
        "unresolved; keep the lines meant and remove the `<<<<<<<`, `=======` and "
        "`>>>>>>>` lines"
    )


# `name: Acme: Holdings`: a plain value that holds `: ` (YAML reads a second key).
_KEY_AND_VALUE = re.compile(r"\s*(?:-\s+)?([A-Za-z_][\w-]*):\s+(.*)")


def _colon_hint(text: str, line: int) -> str | None:
    lines = text.split("\n", line)[:line]
    found = _KEY_AND_VALUE.fullmatch(lines[-1]) if len(lines) == line else None
    key, value = (found.group(1), found.group(2).rstrip()) if found else ("", "")
    # Only a short plain value is quoted back: one that starts with a quote, a bracket,
    # an anchor or a comment is some other mistake.
    if not 0 < len(value) <= 60 or ": " not in value or value[0] in "'\"[{&*!|>#":
        return None
    quoted = escape(value.replace("\\", "\\\\").replace('"', '\\"'))
    return f'a value holding `: ` needs quotes, as in `{escape(key)}: "{quoted}"`'


def _glued_hint(text: str, line: int) -> str | None:
    """What a space left out near ``line`` (1-based) did, when that is the likely cause."""
    lines = text.split("\n", line)[:line]
    here = lines[-1] if len(lines) == line else ""
    if glued := _GLUED_KEY.match(here):
        key = escape(glued.group(1))
        return f"`{key}:` needs a space after its `:`, as in `{key}: value`"
    for number in (line, line - 1):  # the dash's line, or the one before the error
        if 0 < number <= len(lines) and _GLUED_DASH.match(lines[number - 1]):
            return f"line {number}: a list item needs a space after its `-`, as in `- id: ...`"
    return None


# -- the interface reconciler.settings.config reads reconciler.yaml through -----------------------


class MarkedDict(dict):  # type: ignore[type-arg]
    """A top-level mapping with the positions of its keys and values."""

    def __init__(self, located: Located) -> None:
        super().__init__(located.value)
        self.located = located

    @property
    def key_marks(self) -> dict[Any, Mark]:
        keys = self.located.spot.keys if self.located.spot else None
        return {key: self.located.lines.mark(at) for key, at in (keys or {}).items()}


class LoadedYaml(NamedTuple):
    document: Any  # None when the text is empty or cannot be parsed
    problems: list[FileProblem]


def load_yaml(text: str, path: str) -> LoadedYaml:
    """The single document in ``text`` (a ``MarkedDict`` when a mapping), and its problems."""
    document, problems = stream(text, path, Lines(text))
    if document is None:
        return LoadedYaml(None, problems)
    value = MarkedDict(document) if isinstance(document.value, dict) else document.value
    return LoadedYaml(value, problems)


def to_plain(value: Any) -> Any:
    """Loaded containers as fresh ordinary dicts and lists (depth is bounded on load)."""
    if isinstance(value, dict):
        return {key: to_plain(item) for key, item in value.items()}
    if isinstance(value, list):
        return [to_plain(item) for item in value]
    return value


# A plain value cut short by a comment: `name: Store #12` is the name `Store`.
#
# YAML starts a comment at a `#` after a space, in a value as anywhere: the value ends before it,
# with no error. Almost always a `#` right before other text (`#12`, `#1 SARL`) was meant as part
# of the value, and the plan would then propose the shortened value. Found here as libyaml reads
# it: only plain values (a quoted one keeps its `#`), on the value's own line.
#
# Looked for in a file only when its bytes hold ` #` right before something that is not a space
# (``suspect``): almost no file does, and those are parsed once more.

# A space (or tab) then `#` then not a space: the start of such a comment, anywhere. Written
# `#` first, so the search goes from `#` to `#` instead of trying each space of the file.
SUSPECT = re.compile(rb"#(?<=[ \t]#)[^\s#]")
_AFTER_VALUE = re.compile(r"[ \t]+(#\S.*)")
_SHOWN = 80  # characters of the value and comment quoted


class CutValue(NamedTuple):
    """A plain value followed on its line by a comment starting right before text."""

    line: int  # 1-based, of the `#`
    column: int
    value: str  # what YAML reads
    written: str  # the value and the comment as written, to be quoted if meant as one


def suspect(data: bytes) -> bool:
    """Whether ``data`` holds the start of a comment right before text (`` #12``)."""
    return SUSPECT.search(data) is not None


def _cut_value(event: yaml.Event, lines: list[str]) -> CutValue | None:
    """The plain value of ``event``, when a comment on its line cuts it short."""
    if not isinstance(event, yaml.ScalarEvent) or event.style or not event.value:
        return None
    start, end = event.start_mark, event.end_mark
    if start is None or end is None or end.line >= len(lines) or start.line != end.line:
        return None  # a plain value over several lines: its comment is on the last
    line = lines[end.line]
    after = _AFTER_VALUE.match(line, end.column)
    if after is None:
        return None
    written = line[start.column : after.end()].rstrip()
    if len(written) > _SHOWN:
        written = written[:_SHOWN] + "…"
    return CutValue(end.line + 1, after.start(1) + 1, event.value, written)


def cut_values(text: str, most: int = 100) -> list[CutValue]:
    """The plain values of ``text`` (YAML that parsed) that a comment cuts short, the
    first ``most`` of them: a file of a million is refused for its first few."""
    lines = text.split("\n")
    found = []
    loader = Parser(text)
    try:
        while (event := loader.get_event()) is not None:
            cut = _cut_value(event, lines)
            if cut is not None:
                found.append(cut)
                if len(found) >= most:
                    break
    except yaml.YAMLError:
        return found  # the loader reported the file's own problem already
    finally:
        loader.dispose()
    return found
