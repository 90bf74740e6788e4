"""`reconcile plan` in-process against a mocked platform: what its output shows."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from support.fake_platform import INVITES, FakePlatform, envelope, reconcile, serve, write_invites

# From test_output_attacks.py:
# Attack findings on output: each stays fixed.
#
# A server that puts a lone surrogate ("\ud800" in its JSON) or an invisible
# character in a value must not crash the output half-way nor hide text from a
# reviewer; a reader that stops early (`reconcile plan | head -1`) ends the run
# quietly.
HOSTILE_NAME = "Sakura\ud800 Shoji\u200b\u2060\ufeff\xad\u061c"


SHOWN_NAME = "Sakura\\ud800 Shoji\\u200b\\u2060\\ufeff\\xad\\u061c"


# Markdown writes the backslash of each escape as a reference, so no sign acts.
SHOWN_IN_MARKDOWN = SHOWN_NAME.replace("\\", "&#92;")


@pytest.fixture
def platform(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[FakePlatform]:
    with serve(monkeypatch, tmp_path) as fake:
        invite = {"id": "inv_6p3j9", "status": "pending", "name": HOSTILE_NAME}
        invite["email"] = "kyb@sakura-shoji.example"
        # requests-mock writes JSON with ASCII escapes: the surrogate arrives as "\ud800".
        fake.mock.get(INVITES + "inv_6p3j9", json=envelope(invite))
        yield fake


@pytest.mark.parametrize("output_format", ["text", "markdown"])
def test_a_lone_surrogate_from_the_server_is_shown_escaped_not_crashing(
    platform: FakePlatform, tmp_path: Path, capsys: pytest.CaptureFixture[str], output_format: str
) -> None:
    invites = write_invites(tmp_path / "invites")
    code = reconcile("plan", "--format", output_format, str(invites))
    out, err = capsys.readouterr()
    assert code == 0, err
    out.encode("utf-8")  # what a terminal or pipe would need; raised before the fix
    assert (SHOWN_IN_MARKDOWN if output_format == "markdown" else SHOWN_NAME) in out
    assert "Traceback" not in err


def test_the_step_summary_is_written_whole_despite_a_lone_surrogate(
    platform: FakePlatform,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    summary = tmp_path / "summary.md"
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    invites = write_invites(tmp_path / "invites")
    assert reconcile("plan", str(invites)) == 0
    written = summary.read_text(encoding="utf-8")
    assert SHOWN_IN_MARKDOWN in written
    assert written.startswith("### Invite plan: 3 to update")
    capsys.readouterr()


def test_a_saved_plan_is_said_with_how_to_apply_it(
    platform: FakePlatform, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "plan.json"
    assert reconcile("plan", "--out", str(out), str(write_invites(tmp_path / "invites"))) == 0
    assert capsys.readouterr().err.splitlines()[-1] == (
        f"Saved the plan to {out}; apply it, with the same client, with: "
        f"reconcile apply --plan {out}"
    )
