"""Apply, not only plan, survives what a hostile server puts in an invite's values."""

from __future__ import annotations

from pathlib import Path

import pytest
from fake_platform import INVITES, envelope, reconcile, serve, write_invites


def test_apply_writes_despite_a_lone_surrogate_in_the_servers_name(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with serve(monkeypatch, tmp_path) as fake:
        # requests-mock writes JSON with ASCII escapes: the surrogate arrives as "\ud800".
        invite = {"id": "inv_2b6n3", "status": "pending", "name": "Nunez \ud800 S.A."}
        invite["email"] = "cumplimiento@nunez.example"
        fake.mock.get(INVITES + "inv_2b6n3", json=envelope(invite))
        code = reconcile("apply", "--auto-approve", str(write_invites(tmp_path / "invites")))
        out, err = capsys.readouterr()
        assert code == 0, err
        assert "Traceback" not in err
        assert "Nunez \\ud800 S.A." in out  # shown escaped, and the plan's digest was made
        assert ("PATCH", "inv_2b6n3") in fake.writes()
