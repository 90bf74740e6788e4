"""What CI shows. GitHub's workflow commands: every outside string escaped, so none ends a
command early or starts another. The guard in front of stdout and stderr under GitHub
Actions: outside text never speaks to the runner, whatever pieces it is written in; the
tool's own commands do. The GitLab Code Quality report: an error is `major`, a warning
`minor`, each at its line."""

from __future__ import annotations

import io
import json

import pytest

from reconciler.errors import FileProblem
from reconciler.model.invite import SourceLocation
from reconciler.output.ci import (
    RunnerGuard,
    error_command,
    escape_property,
    github_enabled,
    input_error_commands,
    invite_error_commands,
    render_report,
)


def test_each_problem_and_failed_invite_is_one_command_at_its_place() -> None:
    problems = [
        FileProblem("invites/emea.yaml", 12, 7, "`email` must be text, not a number"),
        FileProblem("invites", 0, 0, "no such file or directory"),  # the path itself: no line
        FileProblem("a.yaml", 2, 3, "m ##[group]x", "warning"),
    ]
    assert input_error_commands(problems) == [
        "::error file=invites/emea.yaml,line=12,col=7,title=invite-reconciler::"
        "`email` must be text, not a number",
        "::error file=invites,title=invite-reconciler::no such file or directory",
        "::warning file=a.yaml,line=2,col=3,title=invite-reconciler::m #\\u0023[group]x",
    ]
    source = SourceLocation("invites/a,b:c.yaml", 12)  # a failed invite: at its entry, if any
    assert invite_error_commands([("inv_1", "HTTP 404", source), ("inv_1", "HTTP 404", None)]) == [
        "::error file=invites/a%2Cb%3Ac.yaml,line=12,title=inv_1::HTTP 404",
        "::error title=inv_1::HTTP 404",
    ]


def test_values_cannot_end_the_command_early_or_start_another() -> None:
    command = error_command(
        "50% done\nmore\r::warning::x",
        file="invites/a,b:c.yaml",
        line=3,
        col=1,
        title="inv_x, ok: yes",
    )
    assert "\n" not in command and "\r" not in command
    assert (
        command.startswith("::error file=") and command.index("::", 2) == command.index("yes::") + 3
    )
    assert "file=invites/a%2Cb%3Ac.yaml" in command
    assert "title=inv_x%2C ok%3A yes" in command
    assert command.endswith("::50%25 done%0Amore%0A::warning::x")
    assert escape_property("%") == "%25"


@pytest.mark.parametrize(
    ("choice", "env", "expected"),
    [
        ("auto", {"GITHUB_ACTIONS": "true"}, True),
        ("auto", {}, False),
        ("auto", {"GITHUB_ACTIONS": "false"}, False),
        ("github", {}, True),
        ("none", {"GITHUB_ACTIONS": "true"}, False),
    ],
)
def test_annotations_follow_the_option_then_github_actions(
    choice: str, env: dict[str, str], expected: bool
) -> None:
    assert github_enabled(choice, env) is expected


@pytest.mark.parametrize(
    ("pieces", "command", "log"),
    [
        # A line that starts with a command is marked, even written in pieces, after spaces.
        ((":", ":stop-commands::", "x:1: a\nok\n"), None, "| ::stop-commands::x:1: a\nok\n"),
        (("   ::warning::forged\r\n",), None, "|    ::warning::forged\r\n"),
        # The legacy form is escaped anywhere in a line, even split across writes.
        (("name: #", "#[set-output name=x;]1\n"), None, "name: #\\u0023[set-output name=x;]1\n"),
        # The tool's own command gets a line of its own.
        (("Reading ",), "::error title=t::m", "Reading \n::error title=t::m\n"),
        # A line still open at the end is passed on, marked.
        (("::no newline",), None, "| ::no newline"),
    ],
)
def test_outside_text_never_speaks_to_the_runner_and_the_tools_commands_do(
    pieces: tuple[str, ...], command: str | None, log: str
) -> None:
    out = io.StringIO()
    guard = RunnerGuard(out)
    for piece in pieces:
        guard.write(piece)
        guard.flush()
    if command:
        guard.write_command(command)
    guard.finish()
    assert out.getvalue() == log


def test_code_quality_report_has_the_fields_gitlab_reads() -> None:
    problems = [
        FileProblem("invites/emea.yaml", 4, 5, "invite id `inv_a` is already defined"),
        FileProblem("invites/emea.yaml", 9, 5, "invite id `inv_a` is already defined"),
        FileProblem("invites", 0, 0, "no such file or directory"),
        FileProblem("invites/emea.yaml", 4, 5, "name `A` is used twice", "warning"),
    ]
    report = json.loads(render_report(problems))
    assert [entry["location"] for entry in report] == [
        {"path": "invites/emea.yaml", "lines": {"begin": 4}},
        {"path": "invites/emea.yaml", "lines": {"begin": 9}},
        {"path": "invites", "lines": {"begin": 1}},
        {"path": "invites/emea.yaml", "lines": {"begin": 4}},
    ]
    assert [entry["severity"] for entry in report] == ["major", "major", "major", "minor"]
    assert all(entry["description"] and entry["check_name"] for entry in report)
    fingerprints = [entry["fingerprint"] for entry in report]
    assert len(set(fingerprints)) == 4
    assert json.loads(render_report(problems))[0]["fingerprint"] == fingerprints[0]
    assert json.loads(render_report([])) == []  # an empty report is an empty list
