"""A plain value cut short by a comment: `name: Store #12` is the name `Store`.

YAML starts a comment at a `#` after a space, in a value as anywhere: the value
ends before it, with no error. Almost always a `#` right before other text (`#12`,
`#1 SARL`) was meant as part of the value, and the plan would then propose the
shortened value. Found here as libyaml reads it: only plain values (a quoted one
keeps its `#`), on the value's own line.

Looked for in a file only when its bytes hold ` #` right before something that is
not a space (``suspect``): almost no file does, and those are parsed once more.
"""

from __future__ import annotations

import re
from typing import NamedTuple

import yaml

from reconciler.yamlload.builder import Parser

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


def cut_values(text: str, most: int = 100) -> list[CutValue]:
    """The plain values of ``text`` (YAML that parsed) that a comment cuts short, the
    first ``most`` of them: a file of a million is refused for its first few."""
    lines = text.split("\n")
    found = []
    loader = Parser(text)
    try:
        while (event := loader.get_event()) is not None:
            if not isinstance(event, yaml.ScalarEvent) or event.style or not event.value:
                continue
            start, end = event.start_mark, event.end_mark
            if start is None or end is None or end.line >= len(lines) or start.line != end.line:
                continue  # a plain value over several lines: its comment is on the last
            line = lines[end.line]
            after = _AFTER_VALUE.match(line, end.column)
            if after is not None:
                written = line[start.column : after.end()].rstrip()
                if len(written) > _SHOWN:
                    written = written[:_SHOWN] + "…"
                found.append(CutValue(end.line + 1, after.start(1) + 1, event.value, written))
                if len(found) >= most:
                    break
    except yaml.YAMLError:
        return found  # the loader reported the file's own problem already
    finally:
        loader.dispose()
    return found
