"""What CI shows. The guard in front of stdout and stderr under GitHub Actions: outside
text never speaks to the runner, whatever pieces it is written in; the tool's own commands
do. The GitLab Code Quality report: an error is `major`, a warning `minor`, each at its
line."""

from __future__ import annotations

import io

from reconciler.errors import FileProblem
from reconciler.model.invite import SourceLocation
from reconciler.output.ci import RunnerGuard, invite_error_commands, report_entry


def guarded(*pieces: str, command: str | None = None) -> str:
    log = io.StringIO()
    guard = RunnerGuard(log)
    for piece in pieces:
        guard.write(piece)
        guard.flush()
    if command:
        guard.write_command(command)
    guard.finish()
    return log.getvalue()


def test_a_line_starting_with_a_command_is_marked_even_written_in_pieces() -> None:
    assert guarded(":", ":stop-commands::", "x.yaml:1:1: bad\nok\n") == (
        "| ::stop-commands::x.yaml:1:1: bad\nok\n"
    )
    assert guarded("   ::warning::forged\r\n") == "|    ::warning::forged\r\n"


def test_the_legacy_form_is_escaped_anywhere_even_split_across_writes() -> None:
    assert guarded("name: #", "#[set-output name=x;]1\n") == "name: #\\u0023[set-output name=x;]1\n"


def test_the_tools_own_command_gets_a_line_of_its_own() -> None:
    out = guarded("Reading ", command="::error title=t::m")
    assert out == "Reading \n::error title=t::m\n"


def test_an_open_line_is_passed_on_at_the_end() -> None:
    assert guarded("::no newline") == "| ::no newline"


def test_an_invite_error_is_annotated_at_its_entry() -> None:
    source = SourceLocation("invites/a,b:c.yaml", 12)
    (command,) = invite_error_commands([("inv_1", "HTTP 404", source)])
    assert command == "::error file=invites/a%2Cb%3Ac.yaml,line=12,title=inv_1::HTTP 404"
    (no_entry,) = invite_error_commands([("inv_1", "HTTP 404", None)])
    assert no_entry == "::error title=inv_1::HTTP 404"


def test_a_warning_is_a_warning_command_and_carries_no_legacy_command() -> None:
    from reconciler.errors import FileProblem
    from reconciler.output.ci import input_error_commands

    [command] = input_error_commands([FileProblem("a.yaml", 2, 3, "m ##[group]x", "warning")])
    assert command.startswith("::warning file=a.yaml,line=2,col=3,title=invite-reconciler::m ")
    assert "##[" not in command


def test_errors_are_major_and_warnings_minor() -> None:
    error = report_entry(FileProblem("a.yaml", 3, 5, "policy p: m"))
    warning = report_entry(FileProblem("a.yaml", 4, 5, "policy q: m", "warning"))
    assert (error["severity"], error["location"]["lines"]["begin"]) == ("major", 3)
    assert (warning["severity"], warning["location"]["lines"]["begin"]) == ("minor", 4)
    assert error["fingerprint"] != warning["fingerprint"]
