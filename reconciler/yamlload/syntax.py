"""What a YAML syntax error says to the person who wrote the file: where to look (where a
bracket or quote opened, where a key began), the usual cause in words, a tab or a
space left out named as such."""

from __future__ import annotations

import re

import yaml

from reconciler.errors import FileProblem
from reconciler.safetext import escape
from reconciler.yamlload.positions import Mark


def syntax_problem(exc: yaml.MarkedYAMLError, text: str, path: str) -> FileProblem:
    context = exc.context or ""
    # An unclosed bracket or quote is best shown where it was opened, a key without
    # its `:` where the key begins (libyaml notices only on a later line).
    opened = any(words in context for words in ("flow", "quoted", "simple key"))
    mark = (exc.context_mark if opened else None) or exc.problem_mark or exc.context_mark
    where = Mark(mark.line + 1, mark.column + 1) if mark else Mark(1, 1)
    problem = " ".join(p for p in (exc.context, exc.problem) if p) or "invalid YAML"
    hint = _glued_hint(text, where.line) or next(
        (h for words, h in _SYNTAX_HINTS if words in problem), None
    )
    if hint:
        problem += f" ({hint})"
    if exc.problem_mark is not None and _char_at(text, exc.problem_mark) == "\t":
        where = Mark(exc.problem_mark.line + 1, exc.problem_mark.column + 1)
        problem = "a tab character here; YAML must be indented with spaces"
    return FileProblem(path, where.line, where.column, problem)


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


def _char_at(text: str, mark: yaml.Mark) -> str:
    lines = text.split("\n")
    if mark.line < len(lines) and mark.column < len(lines[mark.line]):
        return lines[mark.line][mark.column]
    return ""
