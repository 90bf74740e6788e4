"""The sandbox's store: which invites may change, as the client decides it."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from reconciler.errors import ReconcilerError
from reconciler.sandbox import app
from reconciler.sandbox.app import InviteStore, Refused, load_state_file


@pytest.mark.parametrize("status", ["pending", "PENDING", "Pending"])
def test_a_pending_invite_changes_whatever_the_case_of_its_status(status: str) -> None:
    store = InviteStore([{"id": "inv_1", "name": "Acme", "status": status}])

    store.update("inv_1", {"name": "Acme GmbH"})
    store.resend("inv_1")

    assert store.snapshot()["inv_1"]["name"] == "Acme GmbH"
    assert store.resends["inv_1"] == 1


@pytest.mark.parametrize("status", ["accepted", "expired", "pending "])
def test_an_invite_no_longer_pending_is_refused_and_kept(status: str) -> None:
    store = InviteStore([{"id": "inv_1", "name": "Acme", "status": status}])

    with pytest.raises(Refused) as changed:
        store.update("inv_1", {"name": "Acme GmbH"})
    with pytest.raises(Refused) as resent:
        store.resend("inv_1")

    assert changed.value.status == resent.value.status == 409

    assert store.snapshot()["inv_1"]["name"] == "Acme"
    assert store.resends["inv_1"] == 0


@pytest.mark.parametrize(
    ("make", "said"),
    [
        (lambda path: os.symlink("/dev/zero", path), "it is a device, not a regular file"),
        (os.mkfifo, "it is a FIFO (named pipe), not a regular file"),
    ],
    ids=["link-to-dev-zero", "fifo"],
)
def test_a_state_file_that_is_no_regular_file_is_refused_at_once(
    tmp_path: Path, make: Callable[[str], None], said: str
) -> None:
    # `reconcile sandbox --state /dev/zero` read for ever, its memory growing; a FIFO
    # waited for a writer in silence.
    path = tmp_path / "state.yaml"
    make(str(path))
    with pytest.raises(ReconcilerError) as refused:
        load_state_file(path)
    assert str(refused.value) == f"{path}: cannot load sandbox state: {said}"


def test_a_state_file_past_the_bound_is_refused_without_reading_it_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(app, "MAX_STATE_BYTES", 100)
    path = tmp_path / "state.yaml"
    path.write_text("invites:\n" + "  - {id: inv_1}\n" * 20, encoding="utf-8")
    with pytest.raises(ReconcilerError, match="larger than 100 bytes"):
        load_state_file(path)


@pytest.mark.parametrize(
    ("entry", "said"),
    [
        (
            "{id: inv_1, emial: a@b.example}",
            "`emial` is not a field of an invite; did you mean `email`?",
        ),
        (
            "{id: inv_1, zzz: 1}",
            "`zzz` is not a field of an invite (fields: addOns, attachments, createdAt, email, "
            "groups, id, lastSentAt, name, phone, primaryContact, status, updatedAt)",
        ),
    ],
    ids=["typo", "unknown"],
)
def test_a_state_file_field_no_invite_has_is_refused_naming_the_invite(
    tmp_path: Path, entry: str, said: str
) -> None:
    # A typo'd field was served as is, never planned: the sandbox looked as if it held
    # no e-mail for the invite.
    path = tmp_path / "state.yaml"
    path.write_text(f"invites:\n  - {{id: inv_0, name: Acme}}\n  - {entry}\n", encoding="utf-8")
    with pytest.raises(ReconcilerError) as refused:
        load_state_file(path)
    assert str(refused.value) == f"{path}: cannot load sandbox state: invite 'inv_1': {said}"
