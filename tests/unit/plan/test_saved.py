"""Saved plan files: written whole, read back exactly, and trusted for nothing they claim."""

from __future__ import annotations

import copy
import hashlib
import hmac
import json
import math
import os
import re
import signal
import unicodedata
from collections.abc import Iterator, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.values import held, typed

import reconciler.plan.saved
from reconciler.api.concurrency import Stop
from reconciler.api.exceptions import NotFound
from reconciler.apply.applier import saved_plan_state
from reconciler.errors import ReconcilerError
from reconciler.files import write_output as write_text_replacing
from reconciler.model.invite import (
    Contact,
    ContactKind,
    CurrentInvite,
    FieldValue,
    IdentifierSet,
    SetKind,
    SourceLocation,
    field_kinds,
)
from reconciler.output import JsonRenderer
from reconciler.plan import saved
from reconciler.plan.model import FailedInvite, InviteChange, NotUpdatable, OutsideChange, Plan
from reconciler.plan.saved import (
    SignatureCheck,
    check,
    document_chunks,
    document_json,
    document_parts,
    load_signed_plan,
    loads_bounded,
    plan_digest,
    plan_from_document,
    read_bounded_text,
    read_plan_document,
    save_plan,
    shown_document,
    sign_plan,
    signature_for,
)
from reconciler.safetext import _REDACTOR, NON_ASCII_UNSAFE, escape, register_secret

SECRET = "s3cr3t-for-the-plan-job"
BASE = "https://api.example.com"


def at(where: str) -> SourceLocation:
    file, line = where.rsplit(":", 1)
    return SourceLocation(file, int(line))


def sample_plan() -> Plan:
    acme_before = held({"email": "old@acme.example", "groups": ["emea"]})
    acme_after = typed({"email": "new@acme.example", "groups": ["emea", "vip"]})
    return Plan(
        base_url=BASE,
        changes=[
            InviteChange(
                "inv_acme",
                at("invites/acme.yaml:3"),
                "株式会社サクラ商事",
                acme_before,
                acme_after,
                True,
            ),
            InviteChange(
                "inv_b", at("invites/b.yaml:2"), None, {"name": "B"}, {"name": "Bee"}, False
            ),
        ],
        failed=[FailedInvite("inv_gone", at("invites/z.yaml:9"), "HTTP 404: not found", 404, "r1")],
        unchanged=12,
        max_changes=50,
        not_updatable=[
            NotUpdatable(
                "inv_done", at("invites/d.yaml:4"), "Done", {"name": "X"}, {"name": "Y"}, "accepted"
            )
        ],
    )


def to_document(plan: Plan) -> dict[str, Any]:
    """The saved plan document whole: its parts, each list of records made."""
    return {k: list(v) if isinstance(v, Iterator) else v for k, v in document_parts(plan)}


def load_plan(path: str) -> Plan:
    """The saved plan as `show` reads it: checked for everything but its signature."""
    return plan_from_document(read_plan_document(path), path)


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
    assert plan_digest(again) == plan_digest(plan)
    assert list(tmp_path.iterdir()) == [tmp_path / "plan.json"]  # no temporary file left
    # It names every invite and its contacts: not for other users of a shared runner.
    assert (tmp_path / "plan.json").stat().st_mode & 0o777 == 0o600


# Where a plan's requests go when reconciler.yaml sets the paths (issue 51, row 5).
URLS = {
    "read": BASE + "/kyb/v2/invites/{inviteId}",
    "update": BASE + "/kyb/v2/invites/{inviteId}",
    "resend": BASE + "/kyb/v2/invites/inv_2/resend/{inviteId}",
}


def test_a_plan_names_its_invite_urls_signed_and_reads_them_back(tmp_path):
    plan = sample_plan()
    plan.invite_urls = dict(URLS)
    sign_plan(plan, SECRET)
    save_plan(plan, str(tmp_path / "plan.json"))
    document = json.loads((tmp_path / "plan.json").read_text(encoding="utf-8"))
    assert document["invite_urls"] == URLS
    again = load_signed_plan(str(tmp_path / "plan.json"), SECRET)
    assert again == plan and again.invite_urls == URLS
    # Part of what is signed: a re-send pointed elsewhere after review is refused.
    document["invite_urls"]["resend"] = BASE + "/kyb/v2/invites/{inviteId}/resend"
    with pytest.raises(ReconcilerError, match="altered"):
        load_signed_plan(write(tmp_path / "edited.json", document), SECRET)


def test_a_plan_at_the_contracts_paths_has_no_invite_urls_and_reads_as_before(tmp_path):
    plan = sample_plan()
    assert "invite_urls" not in to_document(plan)
    save_plan(plan, str(tmp_path / "plan.json"))
    assert load_plan(str(tmp_path / "plan.json")).invite_urls is None
    document = to_document(plan)
    document["invite_urls"] = {"read": URLS["read"], "update": URLS["update"]}
    assert "invite_urls: 'resend' is a required property" in refusal(
        write(tmp_path / "half.json", document)
    )


def test_a_saved_plan_is_applied_only_at_the_invite_paths_it_names():
    # Reviewed at the contract's paths, applied after reconciler.yaml moved the re-send
    # elsewhere (or the other way round): refused whole, nothing read, nothing written.
    nothing = FakeServer({})  # a read would be drift of its own ("cannot re-read it")
    moved = saved_plan_state(sample_plan(), BASE, nothing.read, 4, invite_urls=dict(URLS))
    assert moved.drift == [
        "the plan's invite paths are the contract's own, but this run's are "
        f"read {URLS['read']}, resend {URLS['resend']}, update {URLS['update']} "
        "(reconciler.yaml changed since the plan was made)"
    ]
    named = two_change_plan()
    named.invite_urls = dict(URLS)
    assert saved_plan_state(named, BASE, nothing.read, 4).drift == [
        f"the plan's invite paths are read {URLS['read']}, resend {URLS['resend']}, "
        f"update {URLS['update']}, but this run's are the contract's own "
        "(reconciler.yaml changed since the plan was made)"
    ]
    server = FakeServer(as_planned())
    assert saved_plan_state(named, BASE, server.read, 4, invite_urls=dict(URLS)).drift == []


def test_a_plan_naming_an_invite_twice_is_refused_even_when_signed(tmp_path):
    document = to_document(sample_plan())
    document["changes"].append(copy.deepcopy(document["changes"][0]))
    document["signature"] = signature_for(document, SECRET)
    with pytest.raises(ReconcilerError, match="inv_acme more than once"):
        load_signed_plan(write(tmp_path / "twice.json", document), SECRET)
    across = to_document(sample_plan())
    across["errors"][0]["id"] = "inv_b"
    with pytest.raises(ReconcilerError, match="inv_b more than once"):
        load_plan(write(tmp_path / "across.json", across))
    across = to_document(sample_plan())
    across["not_updatable"][0]["id"] = "inv_b"  # both changed and not updatable
    assert "it names inv_b more than once" in refusal(write(tmp_path / "both.json", across))


def test_a_version_1_plan_can_be_shown_but_never_applied(tmp_path):
    document = to_document(sample_plan())
    del document["not_updatable"]
    document["format_version"] = 1
    path = write(tmp_path / "v1.json", document)
    assert len(load_plan(path).changes) == 2
    assert to_document(load_plan(path))["format_version"] == 1  # and shown as version 1
    with pytest.raises(ReconcilerError, match=r"not signed \(format_version 1\)"):
        load_signed_plan(path, SECRET)


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
    assert refusal(str(tmp_path / "latin1.json")) == (
        f"{tmp_path / 'latin1.json'}: not a plan file (not UTF-8 text)"
    )


def test_deep_nesting_is_refused_before_parsing_with_its_place(tmp_path):
    path = tmp_path / "deep.json"
    path.write_text('{"changes":\n' + "[" * 100_000, encoding="utf-8")
    with pytest.raises(ReconcilerError) as raised:
        load_plan(str(path))
    assert str(raised.value) == f"{path}:2:64: nested too deeply (limit 64)"
    # Brackets inside strings are text, not nesting.
    document = to_document(sample_plan())
    document["changes"][0]["name"] = "[" * 5000 + "{" * 5000
    name = load_plan(write(tmp_path / "brackets.json", document)).changes[0].name
    assert name is not None and name.startswith("[[")


def test_a_change_whose_before_after_and_patch_disagree_is_refused_as_damaged(tmp_path):
    document = json.loads(json.dumps(to_document(sample_plan())))  # as read from a file
    document["changes"][0]["patch"]["email"] = "evil@attacker.example"  # `after` not edited
    with pytest.raises(ReconcilerError, match="edited by hand or is damaged"):
        load_plan(write(tmp_path / "edited.json", document))
    document = to_document(sample_plan())
    document["changes"][0]["before"] = {"email": "old@acme.example"}  # `groups` dropped
    with pytest.raises(ReconcilerError, match=r"changes/0 \(inv_acme\)"):
        load_plan(write(tmp_path / "before.json", document))


def test_an_oversized_file_is_refused_without_reading_it_all(tmp_path, monkeypatch):
    monkeypatch.setattr(saved, "MAX_PLAN_BYTES", 1000)
    document = to_document(sample_plan())
    document["changes"][1]["name"] = "x" * 2000
    with pytest.raises(ReconcilerError, match="larger than 1,000 bytes: too large for a plan"):
        load_plan(write(tmp_path / "big.json", document))


def test_an_id_with_a_trailing_newline_is_not_an_id(tmp_path):
    document = to_document(sample_plan())
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


def two_change_plan(base_url: str = BASE) -> Plan:
    sakura = held({"name": "株式会社サクラ", "groups": ["emea", "vip"]})
    sakura_kk = typed({"name": "Sakura KK", "groups": ["emea"]})
    return Plan(
        base_url=base_url,
        changes=[
            InviteChange("inv_a", at("invites/a.yaml:3"), "Acme", sakura, sakura_kk, False),
            InviteChange(
                "inv_b", at("invites/b.yaml:2"), None, {"name": "B"}, {"name": "Bee"}, False
            ),
        ],
    )


def as_planned() -> dict[str, CurrentInvite]:
    return {
        "inv_a": CurrentInvite(
            "inv_a", "pending", typed({"name": "株式会社サクラ", "groups": ["emea", "vip"]})
        ),
        "inv_b": CurrentInvite("inv_b", "pending", typed({"name": "B"})),
    }


def refusal(path: str) -> str:
    with pytest.raises(ReconcilerError) as caught:
        load_plan(path)
    return str(caught.value)


# --- drift ---------------------------------------------------------------------------------


def _now(invite_id: str, fields: dict[str, Any], status: str = "pending") -> CurrentInvite:
    return CurrentInvite(invite_id, status, typed(fields))


SAKURA = {"name": "株式会社サクラ", "groups": ["emea", "vip"]}
ACCEPTED = {"inv_b": _now("inv_b", {"name": "B"}, "accepted")}
SAID_ACCEPTED = "inv_b (invites/b.yaml:2): is now accepted, not pending"
VANISHED = "inv_a (invites/a.yaml:3): cannot re-read it: HTTP 404: invite inv_a not found"
WAS = "inv_a (invites/a.yaml:3): `{}` was {} when planned, is now {}"
MOVED = {  # the server's invites that differ from the planned ones (None: gone)
    "as-planned": ({}, []),
    "groups-in-another-order": (
        {"inv_a": _now("inv_a", {**SAKURA, "groups": ["vip", "emea"]})},
        [],
    ),
    "accepted": (ACCEPTED, [SAID_ACCEPTED]),
    "vanished": ({"inv_a": None}, [VANISHED + " (requestId req-9)"]),
    "all-named-after-one-vanished": (
        {"inv_a": None, **ACCEPTED},
        [VANISHED + " (requestId req-9)", SAID_ACCEPTED],
    ),
    "changed": (
        {"inv_a": _now("inv_a", {**SAKURA, "groups": ["apac"]})},
        [WAS.format("groups", '["emea", "vip"]', '["apac"]')],
    ),
    "shown-as-written": (
        {"inv_a": _now("inv_a", {**SAKURA, "name": "株式会社モミジ"})},
        [WAS.format("name", '"株式会社サクラ"', '"株式会社モミジ"')],
    ),
}


@pytest.mark.parametrize(("moved", "drift"), MOVED.values(), ids=MOVED)
def test_what_moved_on_the_server_since_the_plan_is_drift(moved, drift):
    invites = {key: now for key, now in {**as_planned(), **moved}.items() if now is not None}
    assert saved_plan_state(two_change_plan(), BASE, FakeServer(invites).read, 2).drift == drift


API = "https://api.example.com/api"
ADDRESSES = {  # planned, this run's, the same server
    "a-trailing-slash-on-the-plan": (BASE + "/", BASE, True),
    "a-trailing-slash-on-the-run": (BASE, BASE + "/", True),
    "differs-only-in-its-last-letter": (API + "X", API, False),
    "a-run-with-one-more-letter": (API, API + "X", False),
    "another-host": (BASE, "https://other.test", False),
}


@pytest.mark.parametrize(("planned", "run", "same"), ADDRESSES.values(), ids=ADDRESSES)
def test_another_address_is_another_server(planned, run, same):
    drift = saved_plan_state(two_change_plan(planned), run, FakeServer(as_planned()).read, 2).drift
    assert drift == (
        [] if same else [f"the plan was made against {planned}, but this run talks to {run}"]
    )


def test_an_interrupt_while_checking_the_plan_says_nothing_was_changed():
    stop = Stop()
    stop.set("interrupted")
    read_ids: list[str] = []

    def read(invite_id: str) -> CurrentInvite:
        read_ids.append(invite_id)
        return as_planned()[invite_id]

    with pytest.raises(ReconcilerError) as caught:
        saved_plan_state(two_change_plan(), BASE, read, parallelism=2, stop=stop)

    assert str(caught.value) == "interrupted while checking the plan; nothing was changed"
    assert read_ids == []


# --- refused files ------------------------------------------------------------------------


def _eleven_changes_two_bad(document: dict) -> None:
    one = document["changes"][1]
    document["changes"] = [{**copy.deepcopy(one), "id": f"inv_{n}"} for n in range(11)]
    document["changes"][9]["resend"] = "yes"
    document["changes"][10]["resend"] = "no"


ONE_VERSION = "(it reads version 2); make the plan with the same version of the tool"
WRONG = {  # how the document is edited, how its refusal ends
    "another-version": (
        lambda d: d.update(format_version=99),
        f"format_version 99 is not supported by this reconcile {ONE_VERSION}",
    ),
    "a-top-level-part-missing": (
        lambda d: d.pop("changes"),
        "(top level: 'changes' is a required property)",
    ),
    # Named by the order of their places (here: key names), not the schema's order.
    "of-several-the-same-each-run": (
        lambda d: d.update(max_changes="x", base_url=7, created_at=7),
        "(base_url: 7 is not of type 'string')",
    ),
    # Change 9 comes before change 10, as a reader counts, not as text sorts.
    "of-several-changes-the-first": (
        _eleven_changes_two_bad,
        "(changes/9/resend: 'yes' is not of type 'boolean')",
    ),
}


@pytest.mark.parametrize(("edit", "ending"), WRONG.values(), ids=WRONG)
def test_a_refused_plan_says_what_is_wrong_where(tmp_path, edit, ending):
    document = to_document(two_change_plan())
    edit(document)
    assert refusal(write(tmp_path / "bad.json", document)).endswith(ending)


def test_many_repeated_invites_are_named_ten_at_most_in_order(tmp_path):
    document = to_document(two_change_plan())
    one = document["changes"][1]
    ids = [f"inv_{n:02d}" for n in range(12)]
    document["changes"] = [{**copy.deepcopy(one), "id": i} for i in ids for _ in range(2)]

    message = refusal(write(tmp_path / "repeats.json", document))

    assert f"it names {', '.join(ids[:10])} more than once, which" in message
    assert "inv_10" not in message and "inv_11" not in message


def test_without_a_client_secret_the_signature_cannot_be_checked(tmp_path):
    path = write(tmp_path / "plan.json", to_document(two_change_plan()))

    with pytest.raises(ReconcilerError) as caught:
        load_signed_plan(path, None)

    assert str(caught.value).endswith(
        "cannot check the plan's signature: no client secret is set "
        "(RECONCILER_CLIENT_SECRET); nothing was changed"
    )


def test_a_long_schema_complaint_is_cut_to_three_hundred_characters(tmp_path):
    document = to_document(two_change_plan())
    document["base_url"] = list(range(1000))

    message = refusal(write(tmp_path / "long.json", document))

    shown = message.split("(base_url: ", 1)[1].removesuffix(")")
    assert shown.startswith("[0, 1, 2, 3") and len(shown) == 300


# From test_plan_streaming.py:
# A plan is signed, saved and printed a record at a time, with the same result as whole.
#
# The streamed JSON must be the text ``json.dumps(document, indent=2)`` gives, and
# the streamed signature the HMAC of the whole canonical document, for any plan;
# a write stopped half-way (an error, Ctrl-C, SIGTERM) leaves no temporary file
# and the previous file as it was.
# The characters the JSON writer escapes, from their one definition.
_UNSAFE = re.compile(f"[{NON_ASCII_UNSAFE}]")


PLANS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# Any code point, with the ones a server can slip in often: hypothesis leaves lone
# surrogates out unless asked, and a JSON "\ud800" from a server makes one.
awkward = st.sampled_from("\ud800\udcff\x00\x1b\u2028\u200b\U0001f600é")


text = st.text(st.characters(exclude_categories=()) | awkward, max_size=12)


def values_of(kind: object) -> st.SearchStrategy[Any]:
    """Any value a field of ``kind`` may hold, whatever text is in it."""
    if isinstance(kind, SetKind):
        return st.lists(text, max_size=3).map(IdentifierSet)
    if isinstance(kind, ContactKind):
        return st.dictionaries(text, st.none() | text, max_size=3).map(Contact)
    return text


fields = st.fixed_dictionaries(
    {}, optional={name: values_of(kind) for name, kind in field_kinds().items()}
)


sources = st.builds(SourceLocation, text, st.integers(0, 10**6))


changes = st.builds(InviteChange, text, sources, st.none() | text, fields, fields, st.booleans())


stale = st.builds(NotUpdatable, text, sources, st.none() | text, fields, fields, text)


problems = st.builds(
    FailedInvite, text, sources, text, st.none() | st.integers(100, 599), st.none() | text
)


plans = st.builds(
    Plan,
    base_url=text,
    changes=st.lists(changes, max_size=4),
    failed=st.lists(problems, max_size=3),
    unchanged=st.integers(0, 10**6),
    max_changes=st.none() | st.integers(0, 1000),
    not_updatable=st.lists(stale, max_size=3),
    signature=st.none() | text,
)


def whole_document_json(plan: Plan) -> str:
    """The saved plan as it was written before streaming: one json.dumps of the document."""
    dumped = json.dumps(to_document(plan), indent=2, ensure_ascii=False, allow_nan=False)
    return _UNSAFE.sub(_utf16_escapes, dumped) + "\n"


def _utf16_escapes(match: re.Match[str]) -> str:
    """JSON's own escape of a character: a \\u escape per UTF-16 code unit."""
    units = match.group().encode("utf-16-be", "surrogatepass")
    return "".join(f"\\u{units[i]:02x}{units[i + 1]:02x}" for i in range(0, len(units), 2))


def whole_document_signature(plan: Plan) -> str:
    """The signature as it was made before streaming: over the whole canonical document."""
    key = hmac.new(SECRET.encode(), b"invite-reconciler plan v1", hashlib.sha256).digest()
    parsed = json.loads(json.dumps(to_document(plan), ensure_ascii=False))
    parsed.pop("signature", None)
    canonical = json.dumps(parsed, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    signed = canonical.encode("utf-8", "surrogatepass")
    return "hmac-sha256:" + hmac.new(key, signed, hashlib.sha256).hexdigest()


@PLANS
@given(plan=plans)
def test_the_streamed_json_is_the_whole_documents_text(plan: Plan) -> None:
    streamed = "".join(JsonRenderer().chunks(plan))
    assert streamed == whole_document_json(plan)
    assert json.loads(streamed) == json.loads(whole_document_json(plan))


@PLANS
@given(plan=plans)
def test_the_streamed_signature_is_the_whole_documents(plan: Plan) -> None:
    signature = signature_for(document_parts(plan), SECRET)
    assert signature == whole_document_signature(plan)
    document = {**to_document(plan), "signature": signature}
    assert check(json.loads(json.dumps(document)), SECRET) == SignatureCheck.VALID


_SHOWN_CATEGORIES = {"Cc", "Cf", "Cs", "Zl", "Zp"}


_HANGUL_FILLERS = "\u115f\u1160\u3164\uffa0"


def _characters_a_terminal_may_not_show() -> list[str]:
    chars = [chr(code) for code in range(0x110000)]
    picked = [c for c in chars if unicodedata.category(c) in _SHOWN_CATEGORIES]
    return picked + list(_HANGUL_FILLERS) + ["a", "é", "\u4e2d", "\U0001f600"]


def test_json_escapes_exactly_the_characters_the_terminal_output_escapes() -> None:
    frame_start, frame_end = '{\n  "v": "', '"\n}\n'
    for char in _characters_a_terminal_may_not_show():
        written = document_json({"v": char})
        assert written.startswith(frame_start) and written.endswith(frame_end)
        raw_in_json = written[len(frame_start) : -len(frame_end)] == char
        raw_on_terminal = escape(char) == char
        assert raw_in_json == raw_on_terminal, f"U+{ord(char):04X}"
        assert json.loads(written) == {"v": char}


def test_a_tag_character_is_written_as_its_json_surrogate_pair() -> None:
    written = document_json({"name": "Acme\U000e0049 Ltd"})
    assert '"Acme\\udb40\\udc49 Ltd"' in written
    assert json.loads(written) == {"name": "Acme\U000e0049 Ltd"}


def a_plan(count: int) -> Plan:
    changes = [
        InviteChange(
            f"inv_{n}",
            at(f"invites/a.yaml:{n}"),
            "Müller",
            {"email": "a@x"},
            {"email": "b@x"},
            False,
        )
        for n in range(count)
    ]
    return Plan(base_url="https://api.example.test", changes=changes)


# A typed plan holds no number; the writers' guard stays, for any document given them.
def test_a_nan_in_a_plan_is_refused_when_signing_not_a_crash() -> None:
    parts = [*document_parts(a_plan(1)), ("n", math.nan)]
    with pytest.raises(ReconcilerError) as refused:
        signature_for(parts, SECRET)
    assert str(refused.value) == (
        "cannot sign the plan: it holds a number JSON cannot represent (NaN or Infinity)"
    )


def test_a_nan_stops_the_save_and_leaves_the_old_file(tmp_path: Path) -> None:
    target = tmp_path / "plan.json"
    target.write_text("the reviewed plan\n", encoding="utf-8")
    parts = [*document_parts(a_plan(3000)), ("n", math.inf)]
    with pytest.raises(ReconcilerError, match="cannot write the plan as JSON"):
        write_text_replacing(str(target), document_chunks(parts), "plan file", private=True)
    assert target.read_text(encoding="utf-8") == "the reviewed plan\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["plan.json"]


def pieces_then(stop: BaseException | int) -> Iterator[str]:
    for n in range(100):
        yield f"piece {n}\n" * 1000
        if n == 50:
            if isinstance(stop, int):
                os.kill(os.getpid(), stop)
            else:
                raise stop


@pytest.mark.parametrize(
    "stop", [KeyboardInterrupt(), RuntimeError("boom")], ids=["ctrl-c", "error"]
)
def test_a_write_stopped_half_way_leaves_no_temporary_file(
    tmp_path: Path, stop: BaseException
) -> None:
    target = tmp_path / "plan.json"
    target.write_text("old\n", encoding="utf-8")
    with pytest.raises(type(stop)):
        write_text_replacing(str(target), pieces_then(stop), "plan file")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["plan.json"]
    assert target.read_text(encoding="utf-8") == "old\n"


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP], ids=["term", "hup"])
def test_a_signal_during_a_write_exits_and_leaves_no_temporary_file(
    tmp_path: Path, signum: int
) -> None:
    target = tmp_path / "plan.json"
    # A runner started under nohup ignores HUP; this test is about the default.
    inherited = signal.signal(signum, signal.SIG_DFL)
    try:
        with pytest.raises(SystemExit) as stopped:
            write_text_replacing(str(target), pieces_then(signum), "plan file")
        assert signal.getsignal(signum) == signal.SIG_DFL  # the handler was put back
    finally:
        signal.signal(signum, inherited)
    assert stopped.value.code == 128 + signum  # 143 for TERM, 129 for HUP, as a shell reports
    assert list(tmp_path.iterdir()) == []


def test_a_hangup_ignored_by_nohup_stays_ignored_and_the_write_completes(tmp_path: Path) -> None:
    target = tmp_path / "plan.json"
    before = signal.signal(signal.SIGHUP, signal.SIG_IGN)
    try:
        write_text_replacing(str(target), pieces_then(signal.SIGHUP), "plan file")
        assert signal.getsignal(signal.SIGHUP) == signal.SIG_IGN
    finally:
        signal.signal(signal.SIGHUP, before)
    assert target.read_text(encoding="utf-8").count("piece 99\n") == 1000


def test_a_plan_up_to_what_readers_accept_is_saved_and_one_byte_more_is_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "plan.json"
    plan = a_plan(5000)  # a little over 1 MiB of JSON, "Müller" counted in bytes
    size = len(whole_document_json(plan).encode("utf-8"))
    assert 2**20 < size < 2**21
    monkeypatch.setattr(reconciler.plan.saved, "MAX_PLAN_BYTES", size)
    save_plan(plan, str(target))
    assert target.stat().st_size == size

    monkeypatch.setattr(reconciler.plan.saved, "MAX_PLAN_BYTES", size - 1)
    with pytest.raises(ReconcilerError) as refused:
        save_plan(plan, str(target))
    assert str(refused.value) == (
        f"{target}: plan not saved: it is over 1 MiB, more than `apply --plan` and `show` "
        "read; plan fewer invites at a time (--target, --changed-since, or one folder of "
        "files per run)"
    )
    assert target.stat().st_size == size  # the plan saved before is left as it was


def _contact(patch: Mapping[str, FieldValue]) -> Contact:
    contact = patch["primaryContact"]
    assert isinstance(contact, Contact)
    return contact


# Values as written: the drift check compares exact values; a redacted one only where
# the saved plan shows it so, and apply then sends the server's value, never the word.
def _contact_plan(before: dict, patch: dict) -> Plan:
    change = InviteChange(
        "inv_c", SourceLocation("c.yaml", 1), None, held(before), typed(patch), False
    )
    return Plan(base_url=BASE, changes=[change])


def test_two_names_that_only_a_bearer_pattern_made_alike_are_drift():
    plan = _contact_plan({"name": "Flag Bearer Ltd."}, {"name": "Flag Bearer 2 Ltd."})
    server = FakeServer(
        {"inv_c": CurrentInvite("inv_c", "pending", typed({"name": "Flag Bearer Co."}))}
    )
    (drift,) = saved_plan_state(plan, BASE, server.read, parallelism=1).drift
    assert '`name` was "Flag Bearer Ltd." when planned, is now "Flag Bearer Co."' in drift


def test_nfc_and_nfd_of_one_name_are_no_drift():
    plan = _contact_plan({"name": "Caf\u00e9"}, {"name": "Caf\u00e9 2"})
    server = FakeServer({"inv_c": CurrentInvite("inv_c", "pending", typed({"name": "Cafe\u0301"}))})
    assert saved_plan_state(plan, BASE, server.read, parallelism=1).drift == []


def test_a_sub_field_the_plan_shows_redacted_is_sent_as_the_server_holds_it():
    secret = "saved-echoed-secret-99"
    register_secret(secret)
    held = {"name": "Jane", "email": "j@x.example", "title": f"echo {secret}"}
    wanted = {**held, "name": "Jane Q."}
    saved = plan_from_document(
        to_document(_contact_plan({"primaryContact": held}, {"primaryContact": wanted})), "p.json"
    )
    (change,) = saved.changes
    assert _contact(change.patch)["title"] == "echo [redacted]"  # as saved and shown
    server = FakeServer(
        {"inv_c": CurrentInvite("inv_c", "pending", typed({"primaryContact": held}))}
    )
    assert saved_plan_state(saved, BASE, server.read, parallelism=1).drift == []
    (restored,) = saved.changes
    assert restored.patch["primaryContact"] == wanted  # what apply sends
    assert _contact(restored.redacted().patch)["title"] == "echo [redacted]"
    # Another value behind the redaction is drift, and nothing is restored.
    moved = {**held, "title": "echo something else"}
    again = plan_from_document(
        to_document(_contact_plan({"primaryContact": held}, {"primaryContact": wanted})), "p.json"
    )
    server = FakeServer(
        {"inv_c": CurrentInvite("inv_c", "pending", typed({"primaryContact": moved}))}
    )
    (drift,) = saved_plan_state(again, BASE, server.read, parallelism=1).drift
    assert secret not in drift and "[redacted]" in drift
    assert _contact(again.changes[0].patch)["title"] == "echo [redacted]"


# -- every record of a plan, saved and read back ---------------------------------------------


def _scoped_plan(secret: str) -> Plan:
    """A plan of a change: an invite out of its scope, one no longer pending; the server's
    values (and status) echoing ``secret``."""
    before = held({"email": "old@r.example", "name": None})
    after = typed({"email": "new@r.example", "name": "Ray"})
    extra: dict[str, Any] = {"recipient": "new@r.example", "resend_on": ("email",)}
    extra["conflicts"] = typed({"name": "Raymond"})
    ray = InviteChange("inv_r", at("invites/r.yaml:5"), "Ray", before, after, True, **extra)
    echo = held({"name": f"Echo {secret}", "groups": ["a"]})
    oh = typed({"name": "Oh", "groups": ["a", "b"]})
    done = held({"name": f"X {secret}"})
    return Plan(
        base_url=BASE,
        changes=[ray],
        not_updatable=[
            NotUpdatable(
                "inv_done",
                at("invites/d.yaml:4"),
                "Done",
                done,
                {"name": "Y"},
                f"accepted by {secret}",
            )
        ],
        changed_since="main",
        outside_change=[OutsideChange("inv_o", at("invites/o.yaml:7"), "Oh", echo, oh)],
        not_read=3,
    )


def test_a_plan_of_a_change_is_saved_redacted_and_read_back_record_by_record(tmp_path):
    secret = "scoped-echoed-secret-77"
    register_secret(secret)
    plan = _scoped_plan(secret)
    sign_plan(plan, SECRET)
    save_plan(plan, str(tmp_path / "plan.json"))
    document = json.loads((tmp_path / "plan.json").read_text(encoding="utf-8"))
    assert secret not in json.dumps(document)
    assert document["out_of_scope"] == [
        {
            "id": "inv_o",
            "name": "Oh",
            "source": "invites/o.yaml:7",
            "before": {"name": "Echo [redacted]", "groups": ["a"]},
            "after": {"name": "Oh", "groups": ["a", "b"]},
        }
    ]
    assert document["not_updatable"][0]["status"] == "accepted by [redacted]"
    assert (document["summary"]["out_of_scope"], document["summary"]["not_read"]) == (1, 3)
    # A plan of a change that left no file unread says 0, not nothing.
    assert to_document(Plan(base_url=BASE, changed_since="main"))["summary"]["not_read"] == 0
    assert document["not_updatable"][0]["before"] == {"name": "X [redacted]"}
    loaded = load_signed_plan(str(tmp_path / "plan.json"), SECRET)
    assert loaded.outside_change == [
        OutsideChange(
            "inv_o",
            SourceLocation("invites/o.yaml", 7),
            "Oh",
            held({"name": "Echo [redacted]", "groups": ["a"]}),
            typed({"name": "Oh", "groups": ["a", "b"]}),
        )
    ]
    (change,) = loaded.changes
    assert change == plan.changes[0]  # the recipient, the conflicts, resend_on, a null before
    assert (change.recipient, change.resend_on, change.before["name"]) == (
        "new@r.example",
        ("email",),
        None,
    )
    assert loaded.not_updatable[0].status == "accepted by [redacted]"


def test_the_sub_fields_a_contact_keeps_are_read_as_saved_or_worked_out_for_older_plans(tmp_path):
    before = {"name": "Jane", "email": "j@x.example", "phone": "+15550000000", "title": None}
    after = {"name": "Jane", "email": "jq@x.example", "phone": "+15550000000", "title": None}
    plan = Plan(
        base_url=BASE,
        changes=[
            InviteChange(
                "inv_c",
                SourceLocation("invites/c.yaml", 2),
                None,
                held({"primaryContact": before}),
                typed({"primaryContact": after}),
                False,
                kept={"primaryContact": ("phone",)},
            )
        ],
    )
    document = to_document(plan)
    assert document["changes"][0]["kept"] == {"primaryContact": ["phone"]}
    assert load_plan(write(tmp_path / "kept.json", document)).changes[0].kept == {
        "primaryContact": ("phone",)
    }
    # Saved before plans said: what the PATCH carries at the platform's value (not null).
    del document["changes"][0]["kept"]
    older = load_plan(write(tmp_path / "older.json", document)).changes[0]
    assert older.kept == {"primaryContact": ("name", "phone")}
    # The platform held no contact: it carries nothing from it.
    document["changes"][0]["before"]["primaryContact"] = None
    assert load_plan(write(tmp_path / "none.json", document)).changes[0].kept == {}
    # Saved sub-fields of a field the change does not patch as a contact are not kept.
    document = to_document(plan)
    document["changes"][0]["kept"] = {"primaryContact": ["phone"], "name": ["x"], "groups": ["y"]}
    document["changes"][0]["before"]["name"] = "A"
    document["changes"][0]["after"]["name"] = document["changes"][0]["patch"]["name"] = "B"
    assert load_plan(write(tmp_path / "others.json", document)).changes[0].kept == {
        "primaryContact": ("phone",)
    }


def test_a_saved_kept_sub_field_the_patch_changes_is_not_read_as_kept(tmp_path):
    # Kept means carried at the platform's value: one the PATCH changes is a change (a
    # stored-otherwise of it is diverged, not only noted), whatever a signed plan says.
    before = {"name": "Jane", "email": "j@x.example", "phone": "+15550000000"}
    after = {"name": "Jane", "email": "jq@x.example", "phone": "+15559999999"}
    change = InviteChange(
        "inv_c",
        SourceLocation("invites/c.yaml", 2),
        None,
        held({"primaryContact": before}),
        typed({"primaryContact": after}),
        False,
        kept={"primaryContact": ("name",)},
    )
    document = to_document(Plan(base_url=BASE, changes=[change]))
    document["changes"][0]["kept"] = {"primaryContact": ["phone", "name", "email"]}
    loaded = load_plan(write(tmp_path / "p.json", document)).changes[0]
    assert loaded.kept == {"primaryContact": ("name",)}
    document["changes"][0]["kept"] = {"primaryContact": ["phone"]}
    assert load_plan(write(tmp_path / "q.json", document)).changes[0].kept == {}


def test_a_source_that_names_no_line_is_shown_as_saved(tmp_path):
    document = to_document(sample_plan())
    document["changes"][1]["source"] = "moved elsewhere"
    document["not_updatable"][0]["source"] = "invites/d.yaml:0"
    plan = load_plan(write(tmp_path / "p.json", document))
    assert str(plan.changes[1].source) == "moved elsewhere"
    assert str(plan.not_updatable[0].source) == "invites/d.yaml:0"


@pytest.mark.parametrize(
    ("part", "where"),
    [
        (("changes", 1, "patch"), "changes/1/patch/name"),
        (("changes", 1, "before"), "changes/1/before/name"),
        (("changes", 0, "conflicts"), "changes/0/conflicts/name"),
        (("not_updatable", 0, "after"), "not_updatable/0/after/name"),
        (("not_updatable", 0, "before"), "not_updatable/0/before/name"),
        (("out_of_scope", 0, "after"), "out_of_scope/0/after/name"),
        (("out_of_scope", 0, "before"), "out_of_scope/0/before/name"),
    ],
)
def test_a_value_its_field_cannot_hold_is_refused_naming_where(tmp_path, part, where):
    document = to_document(_scoped_plan("unused-secret-value-1"))
    document["changes"].append(to_document(sample_plan())["changes"][1])
    record = document[part[0]][part[1]]
    record[part[2]]["name"] = 5
    if part[2] == "patch":
        record["after"]["name"] = 5
    path = write(tmp_path / "bad.json", document)
    with pytest.raises(ReconcilerError) as refused:
        load_plan(path)
    assert str(refused.value) == (
        f"{path}: not a plan file saved by `reconcile plan --out` ({where}: not a value it holds)"
    )


def test_a_signed_plan_holding_a_value_no_field_holds_is_refused_naming_the_file(tmp_path):
    document = to_document(sample_plan())
    document["changes"][1]["before"]["name"] = 5
    document["signature"] = signature_for(document, SECRET)
    path = write(tmp_path / "signed.json", document)
    with pytest.raises(ReconcilerError) as refused:
        load_signed_plan(path, SECRET)
    assert str(refused.value).startswith(f"{path}: not a plan file saved by `reconcile plan")


def test_conflicts_may_name_every_patched_field_and_no_other(tmp_path):
    document = to_document(_scoped_plan("unused-secret-value-3"))
    document["changes"][0]["conflicts"] = {"name": "Raymond", "email": "r@r.example"}
    assert set(load_plan(write(tmp_path / "all.json", document)).changes[0].conflicts) == {
        "name",
        "email",
    }
    document["changes"][0]["conflicts"] = {"groups": ["a"]}
    with pytest.raises(ReconcilerError, match=r"changes/0 \(inv_r\): `before`, `after` and"):
        load_plan(write(tmp_path / "other.json", document))


def test_a_failed_invites_message_and_request_id_are_saved_redacted():
    secret = "failed-echoed-secret-55"
    register_secret(secret)
    plan = Plan(
        base_url=BASE,
        failed=[
            FailedInvite(
                "inv_x", SourceLocation("invites/x.yaml", 3), f"HTTP 400: {secret}", 400, secret
            )
        ],
    )
    (error,) = to_document(plan)["errors"]
    assert (error["message"], error["request_id"]) == ("HTTP 400: [redacted]", "[redacted]")


# Reading a JSON file from outside (a saved plan): size, UTF-8, depth, keys.

WHAT = "a plan file"


def json_refusal(text: str, max_depth: int = 3, path: str = "plan.json") -> str:
    with pytest.raises(ReconcilerError) as refused:
        loads_bounded(text, path, max_depth, WHAT)
    return str(refused.value)


def test_a_file_of_exactly_the_limit_is_read_and_one_byte_more_is_not(tmp_path: Path) -> None:
    plan = tmp_path / "plan.json"
    plan.write_bytes(b"[" + b" " * 998 + b"]")
    assert read_bounded_text(str(plan), 1000, WHAT) == "[" + " " * 998 + "]"
    plan.write_bytes(b"[" + b" " * 999 + b"]")
    with pytest.raises(ReconcilerError) as refused:
        read_bounded_text(str(plan), 1000, WHAT)
    assert str(refused.value) == f"{plan}: larger than 1,000 bytes: too large for a plan file"
    plan.write_bytes(b" " * (1048576 + 1))  # a limit of whole mebibytes is said in MiB
    with pytest.raises(ReconcilerError, match=r": larger than 1 MiB: too large for a plan file$"):
        read_bounded_text(str(plan), 1048576, WHAT)


def test_a_file_name_with_control_characters_is_shown_escaped(tmp_path: Path) -> None:
    message = json_refusal("[", path="evil\x1b]0;PWNED\x07.json")
    assert "\x1b" not in message and "\x07" not in message
    assert message.startswith("evil\\x1b]0;PWNED\\x07.json:")


READ = {
    "nesting-up-to-the-limit": ('{"a": [[1]], "b": [[2], {"c": 3}]}', 3),
    "side-by-side-is-not-depth": ("[" + ",".join(["[[]]"] * 500) + "]", 3),
    "closed-no-longer-counts": ("[[[]], [[1]], {}]", 3),
    "brackets-in-strings-are-text": ('{"n": "A [[[{{{ \\"q [[[ \\" }}}", "g": ["a[", "]]]]b"]}', 2),
    "same-key-in-two-objects": ('[{"id": 1}, {"id": 2}]', 3),
}


@pytest.mark.parametrize(("text", "max_depth"), READ.values(), ids=READ)
def test_json_within_the_limits_is_read(text: str, max_depth: int) -> None:
    assert loads_bounded(text, "plan.json", max_depth, WHAT) == json.loads(text)


DEEP = "nested too deeply (limit {})"
REFUSED = {
    "one-past-the-limit": ('{\n  "changes": [\n    {"patch": {"g": [\n]}}]}', 3, "3:15: " + DEEP),
    # Depth 3 closed, then depth 4: refused where the fourth level opens.
    "closed-then-deeper": ("[[[]], [[[1]]]]", 3, "1:10: " + DEEP),
    # Depth 4, down to 2, then up past 4: refused at the bracket that makes 5.
    "down-then-up-again": ("[[[[]], [[[1]]]]]", 4, "1:11: " + DEEP),
    "a-blank-line-counts": ("\n[[[[1]]]]", 3, "2:4: " + DEEP),
    "deep-after-a-string-of-brackets": ('["[[[[", "\\"[[", [[[1]]]]', 3, "1:20: " + DEEP),
    "invalid-json": (
        '{\n  "a": 1,\n  "b": }',
        3,
        "3:8: not a plan file (invalid JSON: Expecting value)",
    ),
    "key-twice": ('{"c": [], "c": []}', 3, ' not a plan file (top level: key "c" appears twice)'),
    "key-twice-named-by-its-field": (
        '{"changes": [{"id": 1}, {"patch": {"e": 1, "f": 2, "e": 3}}]}',
        4,
        ' not a plan file (changes/1/patch: key "e" appears twice)',
    ),
    "key-twice-escaped": (
        '{"\\u001b[31m": 1, "\\u001b[31m": 2}',
        3,
        ' not a plan file (top level: key "\\u001b[31m" appears twice)',
    ),
    "key-twice-as-written": (
        '{"Müller": 1, "Müller": 2}',
        3,
        ' not a plan file (top level: key "Müller" appears twice)',
    ),
    "too-long-a-number": (
        # Digits in a string and a fraction are no integer: the place is the integer's.
        '[1,\n "' + "2" * 5000 + '", 0.' + "3" * 5000 + ", -" + "1" * 5000 + "]",
        3,
        "2:10010: not a plan file (a number of more than 4,300 digits)",
    ),
}


@pytest.mark.parametrize(("text", "max_depth", "message"), REFUSED.values(), ids=REFUSED)
def test_json_past_the_limits_is_refused_naming_where(text, max_depth, message) -> None:
    assert json_refusal(text, max_depth) == "plan.json:" + message.format(max_depth)


# Plan signatures: HMAC-SHA256 over canonical JSON, keyed by a key derived from the secret.

DOCUMENT: dict[str, Any] = {
    "format_version": 2,
    "created_at": "2026-11-22T10:00:00.000Z",
    "base_url": "https://api.example.com",
    "max_changes": 20,
    "changes": [
        {
            "id": "inv_8f2k1",
            "name": "Müller & Söhne GmbH",
            "source": "invites/acme.yaml:3",
            "before": {"email": "old@acme.example"},
            "after": {"email": "new@acme.example"},
            "patch": {"email": "new@acme.example"},
            "resend": False,
        }
    ],
    "not_updatable": [],
    "errors": [],
    "summary": {"update": 1, "unchanged": 12, "error": 0},
}


def signed(document: dict, secret: str = SECRET) -> dict:
    return {**document, "signature": signature_for(document, secret)}


def test_the_signature_is_the_documented_hmac_of_the_canonical_json():
    key = hmac.new(SECRET.encode(), b"invite-reconciler plan v1", hashlib.sha256).digest()
    canonical = json.dumps(DOCUMENT, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    expected = hmac.new(key, canonical.encode("utf-8"), hashlib.sha256).hexdigest()
    # UTF-8, not \u escapes ("Müller"); the signature itself left out of what is signed.
    assert signature_for(DOCUMENT, SECRET) == f"hmac-sha256:{expected}"
    assert signature_for(signed(DOCUMENT), SECRET) == f"hmac-sha256:{expected}"
    text = json.dumps(signed(DOCUMENT))  # neither the secret nor the key in the signed plan
    assert SECRET not in text and key.hex() not in text


def test_a_signed_plan_verifies_only_with_the_same_secret():
    document = signed(DOCUMENT)
    assert re.fullmatch(r"hmac-sha256:[0-9a-f]{64}", document["signature"])
    assert check(document, SECRET) == SignatureCheck.VALID
    assert check(document, SECRET + "x") == SignatureCheck.INVALID
    # Key order and whitespace in the file do not matter; values do.
    reordered = json.loads(json.dumps(dict(reversed(list(document.items()))), indent=4))
    assert check(reordered, SECRET) == SignatureCheck.VALID


def test_any_edit_breaks_the_signature():
    edits = [
        lambda d: d["changes"][0]["patch"].update(email="evil@attacker.example"),
        lambda d: d["changes"][0].update(resend=True),
        lambda d: d["changes"].append(copy.deepcopy(d["changes"][0])),
        lambda d: d["changes"][0].update(id="inv_other"),
        lambda d: d.update(max_changes=None),
        lambda d: d.update(base_url="https://api.example.com/"),
        lambda d: d["summary"].update(unchanged=13),
    ]
    for edit in edits:
        # A deep copy: an edit must not reach DOCUMENT, or a later run in this process
        # (mutmut runs pytest several times in one) would sign the edited form.
        document = signed(copy.deepcopy(DOCUMENT))
        edit(document)
        assert check(document, SECRET) == SignatureCheck.INVALID


def test_unsigned_and_oddly_signed_plans_are_told_apart():
    assert check(DOCUMENT, SECRET) == SignatureCheck.UNSIGNED
    assert check({**DOCUMENT, "signature": ""}, SECRET) == SignatureCheck.UNSIGNED
    assert check({**DOCUMENT, "signature": 7}, SECRET) == SignatureCheck.UNSIGNED
    assert check({**DOCUMENT, "signature": "hmac-sha256:ŧ\udcff"}, SECRET) == "invalid"


def test_what_is_signed_is_what_a_reader_parses():
    # Tuples and non-string keys become lists and strings in the file: sign that form.
    document = {**DOCUMENT, "extra": (1, 2), "odd": {10: "a", 9: "b"}}
    on_disk = json.loads(json.dumps(signed(document)))
    assert check(on_disk, SECRET) == SignatureCheck.VALID


def test_signing_field_by_field_agrees_with_the_check_even_with_no_fields():
    # Plans are signed as they stream, field by field; apply checks the parsed file.
    assert check({"signature": signature_for([], SECRET)}, SECRET) == SignatureCheck.VALID
    pairs = iter([("summary", {"update": 0}), ("changes", iter([]))])
    document = {"summary": {"update": 0}, "changes": []}
    assert check({**document, "signature": signature_for(pairs, SECRET)}, SECRET) == "valid"


def test_a_lone_surrogate_sent_by_a_server_is_signed_and_checked():
    # JSON's "\\ud800" parses to a lone surrogate, which UTF-8 cannot encode as is.
    document = copy.deepcopy(DOCUMENT)
    document["changes"][0]["before"]["email"] = "old\ud800@acme.example"
    on_disk = json.loads(json.dumps(signed(document)))
    assert check(on_disk, SECRET) == SignatureCheck.VALID
    on_disk["changes"][0]["before"]["email"] = "old\udfff@acme.example"
    assert check(on_disk, SECRET) == SignatureCheck.INVALID


def test_a_nan_in_a_read_document_does_not_verify_and_is_no_crash():
    # json.loads reads NaN; nothing this tool signs holds one (signing refuses it).
    document = {**signed(DOCUMENT), "max_changes": float("nan")}
    assert check(document, SECRET) == SignatureCheck.INVALID


def test_a_contact_change_keeping_no_sub_field_reads_back_keeping_none(tmp_path):
    # A plan whose file manages the whole contact: `show` and `apply --plan` must not take
    # the sub-fields the PATCH carries unchanged for ones kept from the platform.
    before = {"name": "José Nuñez", "email": "jose@nunez.example", "phone": None, "title": None}
    after = {**before, "phone": "+15550000000"}
    change = InviteChange(
        "inv_c",
        SourceLocation("invites/c.yaml", 2),
        None,
        held({"primaryContact": before}),
        typed({"primaryContact": after}),
        False,
    )
    document = to_document(Plan(base_url=BASE, changes=[change]))
    assert document["changes"][0]["kept"] == {}
    assert load_plan(write(tmp_path / "p.json", document)).changes[0].kept == {}
    # A change patching no contact is saved as it always was.
    plain = replace(change, before=held({"name": "A"}), patch=typed({"name": "B"}))
    assert "kept" not in to_document(Plan(base_url=BASE, changes=[plain]))["changes"][0]


@pytest.mark.parametrize("secret", ["changes", "resend", "before"])
def test_show_reads_a_plan_by_its_own_names_whatever_the_secret(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, secret: str
) -> None:
    # A secret that is part of a name the plan is read by (`changes`, `resend`) once made
    # `show` print "No changes" of a plan of two, or end in a KeyError.
    for part in ("_secrets", "_pattern"):  # put back after: no later test redacts it
        monkeypatch.setattr(_REDACTOR, part, getattr(_REDACTOR, part))
    document = to_document(sample_plan())
    document[f"note-{secret}"] = f"a {secret} here"  # a name of the editor's own
    register_secret(secret)
    shown = shown_document(json.loads(json.dumps(document)))
    assert len(plan_from_document(shown, "p.json").changes) == 2
    assert set(document) - set(shown) == {f"note-{secret}"}
    assert shown["note-[redacted]"] == "a [redacted] here"
