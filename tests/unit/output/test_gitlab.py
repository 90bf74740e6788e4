"""The GitLab Code Quality report: an error is `major`, a warning `minor`, each at its line."""

from __future__ import annotations

from reconciler.errors import FileProblem
from reconciler.output.gitlab import report_entry


def test_errors_are_major_and_warnings_minor() -> None:
    error = report_entry(FileProblem("a.yaml", 3, 5, "policy p: m"))
    warning = report_entry(FileProblem("a.yaml", 4, 5, "policy q: m", "warning"))
    assert (error["severity"], error["location"]["lines"]["begin"]) == ("major", 3)
    assert (warning["severity"], warning["location"]["lines"]["begin"]) == ("minor", 4)
    assert error["fingerprint"] != warning["fingerprint"]
