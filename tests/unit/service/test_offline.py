"""The service offline: outputs refused before any work, the files read and narrowed."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.fake_platform import IDS, write_invites

from reconciler.desired.state import Selection
from reconciler.errors import ReconcilerError
from reconciler.service.offline import check_writable, read_desired
from reconciler.settings.config import Settings


def test_an_output_that_could_not_be_written_is_refused_before_anything_is_read(tmp_path) -> None:
    check_writable(None, "write plan file")  # none given: nothing to check
    check_writable(str(tmp_path / "plan.json"), "write plan file")
    with pytest.raises(ReconcilerError, match=r"cannot write plan file: .*no directory"):
        check_writable(str(tmp_path / "missing" / "plan.json"), "write plan file")
    with pytest.raises(ReconcilerError, match="cannot open the audit log: Is a directory"):
        check_writable(str(tmp_path), "open the audit log")


def test_the_invites_read_are_those_selected(tmp_path: Path) -> None:
    invites = str(write_invites(tmp_path / "invites"))
    everything = read_desired(Settings(), (invites,))
    assert [i.id for i in everything.invites] == IDS
    narrowed = read_desired(Settings(), (invites,), Selection((IDS[1],), ()))
    assert [i.id for i in narrowed.invites] == [IDS[1]]
    excluded = read_desired(Settings(), (invites,), Selection((), (IDS[1],)))
    assert [i.id for i in excluded.invites] == [IDS[0], IDS[2]]
    with pytest.raises(ReconcilerError):
        read_desired(Settings(), (invites,), Selection(("not an id",), ()))
