"""The adopt service: the platform's values written into the very text of the files,
what changed in git since the ref left alone, a secret never written."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.fake_platform import IDS, SECRET, SERVER, FakePlatform, write_invites

from reconciler.desired.state import Selection
from reconciler.service.adopt import Adopted, Adoption, adopt, read_for_adopt
from reconciler.service.online import open_service
from reconciler.settings.config import Settings


def _adopt(settings: Settings, adoption: Adoption) -> Adopted:
    with open_service(settings) as service:
        return adopt(service, adoption)


def test_the_platforms_values_are_written_in_place(
    settings: Settings, platform: FakePlatform, tmp_path: Path
) -> None:
    invites = write_invites(tmp_path / "invites")
    path = invites / "apac-latam.yaml"
    adopted = _adopt(settings, read_for_adopt([str(invites)]))
    text = path.read_text(encoding="utf-8")
    for fields in SERVER.values():
        assert f"email: {fields['email']}" in text
    assert "# Three APAC/LATAM invites" in text  # the rest of the file as it was
    ((where, edited),) = adopted.files
    assert where == str(path) and not edited.removed
    assert len(edited.edits) == 4  # three e-mails and the name's accents
    assert adopted.failed == [] and adopted.held == []
    assert platform.writes() == []  # never writes to the API


def test_only_the_chosen_invites_are_read_and_edited(
    settings: Settings, platform: FakePlatform, tmp_path: Path
) -> None:
    invites = write_invites(tmp_path / "invites")
    adopted = _adopt(settings, read_for_adopt([str(invites)], Selection((IDS[0],), ())))
    ((_, edited),) = adopted.files
    assert {edit.id for edit in edited.edits} == {IDS[0]}
    reads = [r.url for r in platform.mock.request_history if r.method == "GET"]
    assert len(reads) == 1 and reads[0].endswith(IDS[0])


def test_a_value_holding_the_client_secret_is_never_written(
    settings: Settings, platform: FakePlatform, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    invites = write_invites(tmp_path / "invites")
    platform.held[IDS[0]]["email"] = f"{SECRET}@leak.example"
    adopted = _adopt(settings, read_for_adopt([str(invites)]))
    assert SECRET not in (invites / "apac-latam.yaml").read_text(encoding="utf-8")
    (failed,) = adopted.failed
    assert failed.id == IDS[0] and "holds the client secret or a token" in failed.message
