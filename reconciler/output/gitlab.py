"""GitLab Code Quality reports: input errors shown on the merge request's diff.

https://docs.gitlab.com/ci/testing/code_quality/#code-quality-report-format
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from reconciler.errors import FileProblem, InputError
from reconciler.files import refuse_special_file, write_output
from reconciler.git import repo_relative
from reconciler.safetext import redact_and_escape

CHECK_NAME = "invite-reconciler/validate"


def report_entry(problem: FileProblem) -> dict[str, Any]:
    path, message = (
        redact_and_escape(repo_relative(problem.path)),
        redact_and_escape(problem.message),
    )
    # Same problem at the same place, same fingerprint: GitLab compares reports by it.
    digest = hashlib.sha256(f"{path}\0{problem.line}\0{message}".encode()).hexdigest()
    return {
        "description": message,
        "check_name": CHECK_NAME,
        "fingerprint": digest,
        "severity": "major" if problem.is_error else "minor",
        "location": {"path": path, "lines": {"begin": max(problem.line, 1)}},
    }


def render_report(problems: Iterable[FileProblem]) -> str:
    return json.dumps([report_entry(p) for p in problems], indent=2, ensure_ascii=False) + "\n"


def write_report(path: str, problems: Iterable[FileProblem]) -> None:
    """The report, written whole by rename; a FIFO or device at ``path`` is refused at once."""
    write_output(path, render_report(problems), "the Code Quality report")


@contextmanager
def writing_codequality(path: str | None) -> Iterator[list[FileProblem]]:
    """Write a Code Quality report of the input errors raised inside, with the warnings
    put in the list it gives (an empty report if none).

    A FIFO or device at ``path`` is refused before anything is read.
    """
    if path:
        refuse_special_file(path, "the Code Quality report")
    warnings: list[FileProblem] = []
    try:
        yield warnings
    except InputError as error:
        if path:
            write_report(path, error.problems)
        raise
    if path:
        write_report(path, warnings)
