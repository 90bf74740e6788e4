"""Saved plan files: written whole, read back exactly, and trusted for nothing they claim."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reconciler.api.client import CurrentInvite
from reconciler.api.exceptions import NotFound
from reconciler.errors import ReconcilerError
from reconciler.plan import saved as planfile
from reconciler.plan.model import InviteChange, InviteProblem, NotUpdatable, Plan
from reconciler.plan.saved import find_drift, load_plan, load_signed_plan, save_plan, sign_plan
from reconciler.plan.signature import signature_for

SECRET = "s3cr3t-for-the-plan-job"
BASE = "https://api.example.com"


def sample_plan() -> Plan:
    return Plan(
        base_url=BASE,
        changes=[
            InviteChange(
                "inv_acme",
                "invites/acme.yaml:3",
                "株式会社サクラ商事",
                {"email": "old@acme.example", "groups": ["emea"]},
                {"email": "new@acme.example", "groups": ["emea", "vip"]},
                True,
            ),
            InviteChange("inv_b", "invites/b.yaml:2", None, {"name": "B"}, {"name": "Bee"}, False),
        ],
        errors=[InviteProblem("inv_gone", "invites/z.yaml:9", "HTTP 404: not found", 404, "r1")],
        unchanged=12,
        max_changes=50,
        not_updatable=[
            NotUpdatable(
                "inv_done", "invites/d.yaml:4", "Done", "accepted", {"name": "X"}, {"name": "Y"}
            )
        ],
    )


def write(path: Path, document: Any) -> str:
    path.write_text(json.dumps(document, ensure_ascii=False), encoding="utf-8")
    return str(path)


def test_a_saved_plan_loads_back_exactly_and_signed(tmp_path):
    plan = sample_plan()
    sign_plan(plan, SECRET)
    save_plan(plan, str(tmp_path / "plan.json"))
    text = (tmp_path / "plan.json").read_text(encoding="utf-8")
    assert "株式会社サクラ商事" in text and '\n  "changes": [' in text  # readable JSON
    assert json.loads(text)["format_version"] == 2
    assert json.loads(text)["signature"].startswith("hmac-sha256:")
    assert SECRET not in text
    again = load_signed_plan(str(tmp_path / "plan.json"), SECRET)
    assert again == plan
    assert again.digest() == plan.digest()
    assert list(tmp_path.iterdir()) == [tmp_path / "plan.json"]  # no temporary file left


def test_a_plan_with_a_bad_signature_or_none_is_refused(tmp_path):
    plan = sample_plan()
    sign_plan(plan, "another-credential")
    save_plan(plan, str(tmp_path / "other.json"))
    with pytest.raises(ReconcilerError, match="altered, or made with another credential"):
        load_signed_plan(str(tmp_path / "other.json"), SECRET)
    unsigned = sample_plan()
    save_plan(unsigned, str(tmp_path / "unsigned.json"))
    with pytest.raises(ReconcilerError, match="not signed"):
        load_signed_plan(str(tmp_path / "unsigned.json"), SECRET)
    with pytest.raises(ReconcilerError, match="RECONCILER_CLIENT_SECRET"):
        load_signed_plan(str(tmp_path / "other.json"), None)


def test_a_plan_naming_an_invite_twice_is_refused_even_when_signed(tmp_path):
    document = sample_plan().to_document()
    document["changes"].append(copy.deepcopy(document["changes"][0]))
    document["signature"] = signature_for(document, SECRET)
    with pytest.raises(ReconcilerError, match="inv_acme more than once"):
        load_signed_plan(write(tmp_path / "twice.json", document), SECRET)
    across = sample_plan().to_document()
    across["errors"][0]["id"] = "inv_b"
    with pytest.raises(ReconcilerError, match="inv_b more than once"):
        load_plan(write(tmp_path / "across.json", across))


def test_a_version_1_plan_can_be_shown_but_never_applied(tmp_path):
    document = sample_plan().to_document()
    del document["not_updatable"]
    document["format_version"] = 1
    path = write(tmp_path / "v1.json", document)
    assert len(load_plan(path).changes) == 2
    with pytest.raises(ReconcilerError, match=r"not signed \(format_version 1\)"):
        load_signed_plan(path, SECRET)
    document["format_version"] = 3
    with pytest.raises(ReconcilerError, match="format_version 3 is not supported"):
        load_plan(write(tmp_path / "v3.json", document))


def test_an_unwritable_destination_is_a_clear_error(tmp_path):
    missing_dir = tmp_path / "no" / "such" / "plan.json"
    with pytest.raises(ReconcilerError) as raised:
        save_plan(sample_plan(), str(missing_dir))
    assert str(raised.value).startswith(f"{missing_dir}: cannot write plan file:")
    with pytest.raises(ReconcilerError, match="cannot write plan file"):
        save_plan(sample_plan(), str(tmp_path))  # a directory


def test_an_unreadable_plan_file_is_a_clear_error(tmp_path):
    with pytest.raises(ReconcilerError) as raised:
        load_plan(str(tmp_path / "missing.json"))
    assert str(raised.value) == (
        f"{tmp_path / 'missing.json'}: cannot read a plan file: No such file or directory"
    )
    with pytest.raises(ReconcilerError, match="cannot read a plan file"):
        load_plan(str(tmp_path))
    (tmp_path / "latin1.json").write_bytes(b'{"name": "M\xfcller"}')
    with pytest.raises(ReconcilerError, match="not UTF-8"):
        load_plan(str(tmp_path / "latin1.json"))


def test_deep_nesting_is_refused_before_parsing_with_its_place(tmp_path):
    path = tmp_path / "deep.json"
    path.write_text('{"changes":\n' + "[" * 100_000, encoding="utf-8")
    with pytest.raises(ReconcilerError) as raised:
        load_plan(str(path))
    assert str(raised.value) == f"{path}:2:64: nested too deeply (limit 64)"
    # Brackets inside strings are text, not nesting.
    document = sample_plan().to_document()
    document["changes"][0]["name"] = "[" * 5000 + "{" * 5000
    assert load_plan(write(tmp_path / "brackets.json", document)).changes[0].name.startswith("[[")


def test_nesting_up_to_the_limit_is_parsed_and_one_more_level_is_not(tmp_path):
    at_limit = tmp_path / "64.json"
    at_limit.write_text("[" * 64 + "]" * 64, encoding="utf-8")
    with pytest.raises(ReconcilerError, match="not a plan file saved by"):  # parsed, then schema
        load_plan(str(at_limit))
    past = tmp_path / "65.json"
    past.write_text("[" * 65 + "]" * 65, encoding="utf-8")
    with pytest.raises(ReconcilerError, match=r"65.json:1:65: nested too deeply \(limit 64\)"):
        load_plan(str(past))


def test_a_change_whose_before_after_and_patch_disagree_is_refused_as_damaged(tmp_path):
    document = json.loads(json.dumps(sample_plan().to_document()))  # as read from a file
    document["changes"][0]["patch"]["email"] = "evil@attacker.example"  # `after` not edited
    with pytest.raises(ReconcilerError, match="edited by hand or is damaged"):
        load_plan(write(tmp_path / "edited.json", document))
    document = sample_plan().to_document()
    document["changes"][0]["before"] = {"email": "old@acme.example"}  # `groups` dropped
    with pytest.raises(ReconcilerError, match=r"changes/0 \(inv_acme\)"):
        load_plan(write(tmp_path / "before.json", document))


def test_an_oversized_file_is_refused_without_reading_it_all(tmp_path, monkeypatch):
    monkeypatch.setattr(planfile, "MAX_PLAN_BYTES", 1000)
    document = sample_plan().to_document()
    document["changes"][1]["name"] = "x" * 2000
    with pytest.raises(ReconcilerError, match="larger than 1,000 bytes: too large for a plan"):
        load_plan(write(tmp_path / "big.json", document))


def test_a_duplicate_key_is_refused(tmp_path):
    path = tmp_path / "dup.json"
    text = json.dumps(sample_plan().to_document())
    path.write_text(text.replace('"resend": true', '"resend": false, "resend": true'), "utf-8")
    with pytest.raises(ReconcilerError, match='key "resend" appears twice'):
        load_plan(str(path))


def test_an_id_with_a_trailing_newline_is_not_an_id(tmp_path):
    document = sample_plan().to_document()
    document["changes"][1]["id"] = "inv_acme\n"
    with pytest.raises(ReconcilerError, match="changes/1/id") as raised:
        load_plan(write(tmp_path / "newline.json", document))
    assert "\n" not in str(raised.value)


text_pieces = st.sampled_from(
    ["[", "]", "{", "}", '"', "\\", ":", ",", "1", "null", '"a"', "\x1b]0;x\x07", "\u202e", " "]
)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pieces=st.lists(text_pieces, max_size=200), depth=st.integers(0, 3000))
def test_any_text_loads_or_is_refused_naming_the_file(tmp_path_factory, pieces, depth):
    path = tmp_path_factory.mktemp("fuzz") / "plan.json"
    path.write_text("[" * depth + "".join(pieces), encoding="utf-8")
    try:
        plan = load_plan(str(path))
    except ReconcilerError as exc:
        assert str(exc).startswith(str(path))
        assert "\x1b" not in str(exc) and "\u202e" not in str(exc)
    else:
        assert isinstance(plan, Plan)


class FakeServer:
    def __init__(self, invites: dict[str, CurrentInvite]) -> None:
        self.invites = invites

    def read(self, invite_id: str) -> CurrentInvite:
        if invite_id not in self.invites:
            raise NotFound(f"invite {invite_id} not found", status=404, request_id="req-9")
        return self.invites[invite_id]


def _server_as_planned() -> dict[str, CurrentInvite]:
    return {
        "inv_acme": CurrentInvite(
            "inv_acme", "pending", {"email": "old@acme.example", "groups": ["emea"]}
        ),
        "inv_b": CurrentInvite("inv_b", "pending", {"name": "B"}),
    }


def test_a_server_as_planned_is_no_drift():
    server = FakeServer(_server_as_planned())
    assert find_drift(sample_plan(), BASE + "/", server.read, parallelism=4) == []


def test_an_invite_accepted_since_the_plan_is_drift():
    invites = _server_as_planned()
    invites["inv_b"] = CurrentInvite("inv_b", "accepted", {"name": "B"})
    drift = find_drift(sample_plan(), BASE, FakeServer(invites).read, parallelism=4)
    assert drift == ["inv_b (invites/b.yaml:2): is now accepted, not pending"]


def test_an_invite_that_vanished_since_the_plan_is_drift():
    invites = _server_as_planned()
    del invites["inv_acme"]
    drift = find_drift(sample_plan(), BASE, FakeServer(invites).read, parallelism=4)
    assert drift == [
        "inv_acme (invites/acme.yaml:3): cannot re-read it: "
        "HTTP 404: invite inv_acme not found (requestId req-9)"
    ]


def test_a_changed_value_and_another_server_are_drift():
    invites = _server_as_planned()
    invites["inv_acme"] = CurrentInvite(
        "inv_acme", "pending", {"email": "old@acme.example", "groups": ["apac"]}
    )
    drift = find_drift(sample_plan(), BASE, FakeServer(invites).read, parallelism=4)
    assert drift == [
        'inv_acme (invites/acme.yaml:3): `groups` was ["emea"] when planned, is now ["apac"]'
    ]
    elsewhere = find_drift(sample_plan(), "https://other.test", FakeServer({}).read, 4)
    assert elsewhere == [
        f"the plan was made against {BASE}, but this run talks to https://other.test"
    ]
