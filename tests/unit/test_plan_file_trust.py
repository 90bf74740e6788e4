"""What `apply --plan` tells a user about a plan file it refuses, or a server that moved.

Each message is the user's only guide to what to do next, so its words are
asserted whole where they carry the advice; the drift check must name every
invite that moved, and nothing that did not.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from test_planfile import FakeServer

from reconciler.api.client import CurrentInvite
from reconciler.errors import ReconcilerError
from reconciler.plan.changes import InviteChange
from reconciler.plan.model import Plan
from reconciler.plan.saved import find_drift, load_plan, load_signed_plan, save_plan
from reconciler.stop import Stop

BASE = "https://api.example.com"


def two_change_plan(base_url: str = BASE) -> Plan:
    return Plan(
        base_url=base_url,
        changes=[
            InviteChange(
                "inv_a",
                "invites/a.yaml:3",
                "Acme",
                {"name": "株式会社サクラ", "groups": ["emea", "vip"]},
                {"name": "Sakura KK", "groups": ["emea"]},
                False,
            ),
            InviteChange("inv_b", "invites/b.yaml:2", None, {"name": "B"}, {"name": "Bee"}, False),
        ],
    )


def as_planned() -> dict[str, CurrentInvite]:
    return {
        "inv_a": CurrentInvite(
            "inv_a", "pending", {"name": "株式会社サクラ", "groups": ["emea", "vip"]}
        ),
        "inv_b": CurrentInvite("inv_b", "pending", {"name": "B"}),
    }


def write(path: Path, document: Any) -> str:
    path.write_text(json.dumps(document, ensure_ascii=False), encoding="utf-8")
    return str(path)


def refusal(path: str) -> str:
    with pytest.raises(ReconcilerError) as caught:
        load_plan(path)
    return str(caught.value)


# --- drift --------------------------------------------------------------------------------


def test_groups_the_server_now_lists_in_another_order_are_no_drift():
    invites = as_planned()
    invites["inv_a"].fields["groups"] = ["vip", "emea"]

    assert find_drift(two_change_plan(), BASE, FakeServer(invites).read, parallelism=2) == []


def test_every_invite_that_moved_is_named_even_after_one_that_vanished():
    invites = as_planned()
    del invites["inv_a"]
    invites["inv_b"] = CurrentInvite("inv_b", "accepted", {"name": "B"})

    drift = find_drift(two_change_plan(), BASE, FakeServer(invites).read, parallelism=1)

    assert drift == [
        "inv_a (invites/a.yaml:3): cannot re-read it: "
        "HTTP 404: invite inv_a not found (requestId req-9)",
        "inv_b (invites/b.yaml:2): is now accepted, not pending",
    ]


def test_a_changed_name_is_shown_as_written_not_as_escapes():
    invites = as_planned()
    invites["inv_a"].fields["name"] = "株式会社モミジ"

    drift = find_drift(two_change_plan(), BASE, FakeServer(invites).read, parallelism=2)

    assert drift == [
        'inv_a (invites/a.yaml:3): `name` was "株式会社サクラ" when planned, '
        'is now "株式会社モミジ"'
    ]


def test_a_trailing_slash_on_either_address_is_the_same_server():
    server = FakeServer(as_planned())

    assert find_drift(two_change_plan(BASE + "/"), BASE, server.read, parallelism=2) == []
    assert find_drift(two_change_plan(BASE), BASE + "/", server.read, parallelism=2) == []


def test_an_address_that_differs_only_in_its_last_letter_is_another_server():
    plan = two_change_plan("https://api.example.com/apiX")

    drift = find_drift(plan, "https://api.example.com/api", FakeServer(as_planned()).read, 2)

    assert drift == [
        "the plan was made against https://api.example.com/apiX, "
        "but this run talks to https://api.example.com/api"
    ]


def test_a_run_against_an_address_with_one_more_letter_is_another_server():
    plan = two_change_plan("https://api.example.com/api")

    drift = find_drift(plan, "https://api.example.com/apiX", FakeServer(as_planned()).read, 2)

    assert drift == [
        "the plan was made against https://api.example.com/api, "
        "but this run talks to https://api.example.com/apiX"
    ]


def test_a_saved_plan_is_readable_by_its_owner_only(tmp_path):
    # It names every invite and its contacts: not for other users of a shared runner.
    path = tmp_path / "plan.json"

    save_plan(two_change_plan(), str(path))

    assert path.stat().st_mode & 0o777 == 0o600


def test_an_interrupt_while_checking_the_plan_says_nothing_was_changed():
    stop = Stop()
    stop.set("interrupted")
    read_ids: list[str] = []

    def read(invite_id: str) -> CurrentInvite:
        read_ids.append(invite_id)
        return as_planned()[invite_id]

    with pytest.raises(ReconcilerError) as caught:
        find_drift(two_change_plan(), BASE, read, parallelism=2, stop=stop)

    assert str(caught.value) == "interrupted while checking the plan; nothing was changed"
    assert read_ids == []


# --- refused files ------------------------------------------------------------------------


def test_a_plan_from_another_version_says_to_use_the_same_version(tmp_path):
    document = two_change_plan().to_document()
    document["format_version"] = 99

    message = refusal(write(tmp_path / "v99.json", document))

    assert message.endswith(
        "plan format_version 99 is not supported by this reconcile (it reads version 2); "
        "make the plan with the same version of the tool"
    )


def test_a_plan_missing_a_top_level_part_says_where(tmp_path):
    document = two_change_plan().to_document()
    del document["changes"]

    message = refusal(write(tmp_path / "cut.json", document))

    assert message.endswith("(top level: 'changes' is a required property)")


def test_of_several_problems_the_same_one_is_named_on_every_run(tmp_path):
    document = two_change_plan().to_document()
    document["max_changes"] = "x"
    document["base_url"] = 7
    document["created_at"] = 7

    message = refusal(write(tmp_path / "many.json", document))

    # Named by the order of their places (here: key names), not the schema's checking order.
    assert message.endswith("(base_url: 7 is not of type 'string')")


def test_of_several_bad_changes_the_first_by_position_is_named(tmp_path):
    document = two_change_plan().to_document()
    one = document["changes"][1]
    document["changes"] = [{**copy.deepcopy(one), "id": f"inv_{n}"} for n in range(11)]
    document["changes"][9]["resend"] = "yes"
    document["changes"][10]["resend"] = "no"

    message = refusal(write(tmp_path / "nine.json", document))

    # Change 9 comes before change 10, as a reader counts, not as text sorts.
    assert message.endswith("(changes/9/resend: 'yes' is not of type 'boolean')")


def test_an_invite_both_changed_and_not_updatable_is_refused(tmp_path):
    document = two_change_plan().to_document()
    document["not_updatable"] = [
        {
            "id": "inv_b",
            "name": None,
            "source": "invites/b.yaml:2",
            "status": "accepted",
            "before": {"name": "B"},
            "after": {"name": "Bee"},
        }
    ]

    message = refusal(write(tmp_path / "both.json", document))

    assert "it names inv_b more than once" in message


def test_many_repeated_invites_are_named_ten_at_most_in_order(tmp_path):
    document = two_change_plan().to_document()
    one = document["changes"][1]
    ids = [f"inv_{n:02d}" for n in range(12)]
    document["changes"] = [{**copy.deepcopy(one), "id": i} for i in ids for _ in range(2)]

    message = refusal(write(tmp_path / "repeats.json", document))

    assert f"it names {', '.join(ids[:10])} more than once, which" in message
    assert "inv_10" not in message and "inv_11" not in message


def test_without_a_client_secret_the_signature_cannot_be_checked(tmp_path):
    path = write(tmp_path / "plan.json", two_change_plan().to_document())

    with pytest.raises(ReconcilerError) as caught:
        load_signed_plan(path, None)

    assert str(caught.value).endswith(
        "cannot check the plan's signature: no client secret is set "
        "(RECONCILER_CLIENT_SECRET); nothing was changed"
    )


def test_a_file_that_is_not_json_is_called_not_a_plan_file(tmp_path):
    path = tmp_path / "notes.json"
    path.write_text("changes: all of them\n", encoding="utf-8")

    message = refusal(str(path))

    assert message.startswith(f"{path}:1:1: not a plan file (invalid JSON: ")


def test_a_long_schema_complaint_is_cut_to_three_hundred_characters(tmp_path):
    document = two_change_plan().to_document()
    document["base_url"] = list(range(1000))

    message = refusal(write(tmp_path / "long.json", document))

    shown = message.split("(base_url: ", 1)[1].removesuffix(")")
    assert shown.startswith("[0, 1, 2, 3") and len(shown) == 300
