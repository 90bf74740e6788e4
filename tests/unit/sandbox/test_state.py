"""The sandbox's store: which invites may change, as the client decides it."""

from __future__ import annotations

import pytest

from reconciler.sandbox.refusals import NotPending
from reconciler.sandbox.state import InviteStore


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

    with pytest.raises(NotPending):
        store.update("inv_1", {"name": "Acme GmbH"})
    with pytest.raises(NotPending):
        store.resend("inv_1")

    assert store.snapshot()["inv_1"]["name"] == "Acme"
    assert store.resends["inv_1"] == 0
