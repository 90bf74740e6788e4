"""The one fatal-error type of the tool: the CLI turns it into exit code 1."""

from __future__ import annotations

from typing import Literal, NamedTuple

from reconciler.safetext import escape


class ReconcilerError(Exception):
    """A failure the user has to act on. Its text is shown as is, never a traceback."""


class ConfigError(ReconcilerError):
    """Settings are missing, contradictory or unsafe."""


class FileProblem(NamedTuple):
    """One problem in an input file, at a 1-based line and column.

    A warning (a policy or a built-in check of that severity) is reported with the
    errors, as ``path:line:column: warning: message``, and fails nothing.
    """

    path: str
    line: int
    column: int
    message: str
    severity: Literal["error", "warning"] = "error"

    def __str__(self) -> str:
        # File names and values from files are shown escaped: a name holding
        # ESC or a newline must neither drive the terminal nor split the line.
        path, message = escape(self.path), escape(self.message)
        if self.severity == "warning":
            message = f"warning: {message}"
        if self.line == 0:  # about the path itself, not a place in it
            return f"{path}: {message}"
        return f"{path}:{self.line}:{self.column}: {message}"

    @property
    def is_error(self) -> bool:
        return self.severity == "error"


class InputError(ReconcilerError):
    """Every problem found in the input files of one run, reported together."""

    def __init__(self, problems: list[FileProblem]) -> None:
        self.problems = sorted(problems)  # warnings among them, reported with the errors
        super().__init__("\n".join(str(p) for p in self.problems))

    @property
    def errors(self) -> list[FileProblem]:
        return [p for p in self.problems if p.is_error]
