"""The one fatal-error type of the tool: the CLI turns it into exit code 1."""

from __future__ import annotations

from typing import NamedTuple


class ReconcilerError(Exception):
    """A failure the user has to act on. Its text is shown as is, never a traceback."""


class ConfigError(ReconcilerError):
    """Settings are missing, contradictory or unsafe."""


class SourceError(NamedTuple):
    """One problem in an input file, at a 1-based line and column."""

    path: str
    line: int
    column: int
    message: str

    def __str__(self) -> str:
        if self.line == 0:  # about the path itself, not a place in it
            return f"{self.path}: {self.message}"
        return f"{self.path}:{self.line}:{self.column}: {self.message}"


class InputError(ReconcilerError):
    """Every problem found in the input files of one run, reported together."""

    def __init__(self, problems: list[SourceError]) -> None:
        self.problems = sorted(problems)
        super().__init__("\n".join(str(p) for p in self.problems))
