"""apply and resend ask the same way: yes on a terminal, or --auto-approve; never silence."""

from __future__ import annotations

import io
import sys
from pathlib import Path

import pytest
from support.fake_platform import FakePlatform, reconcile, write_invites

from reconciler.commands.options import confirm
from reconciler.errors import ReconcilerError


class TerminalInput(io.StringIO):
    """What a person types at a terminal."""

    def isatty(self) -> bool:
        return True


def at_a_terminal(monkeypatch: pytest.MonkeyPatch, typed: TerminalInput) -> None:
    """A person at a terminal: what they type on stdin, the plan on stdout, stderr shown."""
    monkeypatch.setattr(sys, "stdin", typed)
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True)
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    monkeypatch.setenv("NO_COLOR", "1")


@pytest.fixture(params=["apply", "resend"])
def command(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[list[str], str]:
    """Each command that asks first: its arguments, and the action its refusal names."""
    if request.param == "apply":
        return ["apply", str(write_invites(tmp_path / "invites", resend=True))], "apply"
    return ["resend", "inv_6p3j9", "inv_2b6n3"], "re-send"


def test_without_a_terminal_both_refuse_and_send_nothing(
    platform: FakePlatform,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    command: tuple[list[str], str],
) -> None:
    monkeypatch.setattr(sys, "stdin", io.StringIO("y\n"))  # piped, not typed: not an answer
    args, action = command
    assert reconcile(*args) == 1
    err = capsys.readouterr().err
    assert f"refusing to {action} without confirmation: standard input is not a terminal" in err
    assert "pass --auto-approve" in err
    assert platform.writes() == []
    # apply points to a reviewed plan as the other way.
    other = "or save the plan with `reconcile plan --out FILE`, read it (`reconcile show FILE`)"
    assert (other in err) is (action == "apply")


def test_typed_at_a_terminal_with_the_output_in_files_both_refuse_before_any_request(
    platform: FakePlatform,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    command: tuple[list[str], str],
) -> None:
    # `reconcile apply > apply.txt 2> errors.txt` at a terminal: the plan (or the list of
    # whom resend e-mails) would go unseen into a file, and the question with it
    # (issue 39, row 5).
    monkeypatch.setattr(sys, "stdin", TerminalInput("y\n"))
    args, action = command
    assert reconcile(*args) == 1
    out, err = capsys.readouterr()
    assert err.splitlines()[-1].startswith(
        f"error: refusing to {action} without confirmation: neither stdout nor stderr is a "
        "terminal, so what you would be asked about could not be seen; pass --auto-approve"
    )
    if action == "apply":
        assert err.splitlines()[-1].endswith(
            ", or save the plan with `reconcile plan --out FILE`, read it "
            "(`reconcile show FILE`) and apply it with `reconcile apply --plan FILE`"
        )
    assert "[y/N]" not in err and out == ""
    assert platform.mock.request_history == []  # not even a token: nothing was read


def test_on_a_terminal_no_sends_nothing(
    platform: FakePlatform,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    command: tuple[list[str], str],
) -> None:
    at_a_terminal(monkeypatch, TerminalInput("n\n"))
    args, action = command
    assert reconcile(*args) == 1
    err = capsys.readouterr().err
    question = "Apply these changes?" if action == "apply" else "E-mail 2 invitations again?"
    assert f"{question} [y/N]" in err
    assert "cancelled; nothing was changed" in err
    assert platform.writes() == []


class InterruptedInput(TerminalInput):
    """A person pressing Ctrl-C at the prompt."""

    # A text stream's readline returns str; typeshed's StringIO also inherits _IOBase's,
    # typed bytes, and ignores the clash on its own _TextIOBase.readline the same way.
    def readline(self, size: int | None = -1, /) -> str:  # type: ignore[override]
        raise KeyboardInterrupt


@pytest.mark.parametrize("typed", [InterruptedInput(), TerminalInput("")], ids=["ctrl-c", "eof"])
def test_ctrl_c_at_the_prompt_says_what_happened_not_a_bare_aborted(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], typed: TerminalInput
) -> None:
    # confirm() itself: apply and resend both ask through it (issue 39, row 7).
    monkeypatch.setattr(sys, "stdin", typed)
    with pytest.raises(ReconcilerError) as cancelled:
        confirm("Apply these changes?", action="apply")
    assert str(cancelled.value) == (
        "apply cancelled at the prompt (Ctrl-C or end of input); nothing was changed"
    )
    err = capsys.readouterr().err
    assert err == "Apply these changes? [y/N]: \n"  # the prompt's line ended, no `Aborted.`


def test_with_stderr_in_a_file_the_question_is_asked_on_the_terminal(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # `reconcile apply 2> errors.txt` at a terminal: the plan was shown, then the question
    # went into the file and the run waited in silence for an answer to it.
    monkeypatch.setattr(sys, "stdin", TerminalInput("y\n"))
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True)
    confirm("Apply these changes?", action="apply")
    out, err = capsys.readouterr()
    assert out == "Apply these changes? [y/N]: " and err == ""


def test_on_a_terminal_yes_goes_ahead(
    platform: FakePlatform, monkeypatch: pytest.MonkeyPatch, command: tuple[list[str], str]
) -> None:
    at_a_terminal(monkeypatch, TerminalInput("y\n"))
    args, action = command
    assert reconcile(*args) == 0
    posts = [w for w in platform.writes() if w[0] == "POST"]
    assert posts == [("POST", "inv_6p3j9"), ("POST", "inv_2b6n3")] + (
        [("POST", "inv_8d2s4")] if action == "apply" else []
    )
