"""A plan is signed, saved and printed a record at a time, with the same result as whole.

The streamed JSON must be the text ``json.dumps(document, indent=2)`` gives, and
the streamed signature the HMAC of the whole canonical document, for any plan;
a write stopped half-way (an error, Ctrl-C, SIGTERM) leaves no temporary file
and the previous file as it was.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import math
import os
import re
import signal
import unicodedata
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import reconciler.plan.saved
from reconciler.errors import ReconcilerError
from reconciler.output.json import JsonRenderer, document_json
from reconciler.plan.changes import FailedInvite, InviteChange, NotUpdatable
from reconciler.plan.model import Plan
from reconciler.plan.saved import load_signed_plan, save_plan, sign_plan
from reconciler.plan.signature import SignatureCheck, canonical_bytes, check, signature_for
from reconciler.safefile import write_text_replacing
from reconciler.safetext import NON_ASCII_UNSAFE, escape

# The characters the JSON writer escapes, from their one definition.
_UNSAFE = re.compile(f"[{NON_ASCII_UNSAFE}]")

SECRET = "s3cr3t-for-the-streaming-tests"
PLANS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# Any code point, with the ones a server can slip in often: hypothesis leaves lone
# surrogates out unless asked, and a JSON "\ud800" from a server makes one.
awkward = st.sampled_from("\ud800\udcff\x00\x1b\u2028\u200b\U0001f600é")
text = st.text(st.characters(exclude_categories=()) | awkward, max_size=12)
values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(text, inner, max_size=3),
    max_leaves=8,
)
fields = st.dictionaries(text, values, max_size=3)
changes = st.builds(InviteChange, text, text, st.none() | text, fields, fields, st.booleans())
stale = st.builds(NotUpdatable, text, text, st.none() | text, text, fields, fields)
problems = st.builds(
    FailedInvite, text, text, text, st.none() | st.integers(100, 599), st.none() | text
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
    dumped = json.dumps(plan.to_document(), indent=2, ensure_ascii=False, allow_nan=False)
    return _UNSAFE.sub(_utf16_escapes, dumped) + "\n"


def _utf16_escapes(match: re.Match[str]) -> str:
    """JSON's own escape of a character: a \\u escape per UTF-16 code unit."""
    units = match.group().encode("utf-16-be", "surrogatepass")
    return "".join(f"\\u{units[i]:02x}{units[i + 1]:02x}" for i in range(0, len(units), 2))


def whole_document_signature(plan: Plan) -> str:
    """The signature as it was made before streaming: over the whole canonical document."""
    key = hmac.new(SECRET.encode(), b"invite-reconciler plan v1", hashlib.sha256).digest()
    parsed = json.loads(json.dumps(plan.to_document(), ensure_ascii=False))
    return "hmac-sha256:" + hmac.new(key, canonical_bytes(parsed), hashlib.sha256).hexdigest()


@PLANS
@given(plan=plans)
def test_the_streamed_json_is_the_whole_documents_text(plan: Plan) -> None:
    streamed = "".join(JsonRenderer().chunks(plan))
    assert streamed == whole_document_json(plan)
    assert json.loads(streamed) == json.loads(whole_document_json(plan))


@PLANS
@given(plan=plans)
def test_the_streamed_signature_is_the_whole_documents(plan: Plan) -> None:
    signature = signature_for(plan.document_parts(), SECRET)
    assert signature == whole_document_signature(plan)
    document = {**plan.to_document(), "signature": signature}
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
    return Plan(
        base_url="https://api.example.test",
        changes=[
            InviteChange(
                f"inv_{n}",
                f"invites/a.yaml:{n}",
                "Müller",
                {"email": "a@x"},
                {"email": "b@x"},
                False,
            )
            for n in range(count)
        ],
    )


def test_a_saved_streamed_plan_loads_and_verifies(tmp_path: Path) -> None:
    plan = a_plan(500)
    sign_plan(plan, SECRET)
    save_plan(plan, str(tmp_path / "plan.json"))
    loaded = load_signed_plan(str(tmp_path / "plan.json"), SECRET)
    assert [c.id for c in loaded.changes] == [c.id for c in plan.changes]
    assert (tmp_path / "plan.json").read_text(encoding="utf-8") == whole_document_json(plan)


def test_a_nan_in_a_plan_is_refused_when_signing_not_a_crash() -> None:
    plan = a_plan(1)
    plan.changes.append(InviteChange("inv_nan", "a.yaml:9", None, {"n": 1}, {"n": math.nan}, False))
    with pytest.raises(ReconcilerError) as refused:
        sign_plan(plan, SECRET)
    assert str(refused.value) == (
        "cannot sign the plan: it holds a number JSON cannot represent (NaN or Infinity)"
    )
    assert plan.signature is None


def test_a_nan_stops_the_save_and_leaves_the_old_file(tmp_path: Path) -> None:
    target = tmp_path / "plan.json"
    target.write_text("the reviewed plan\n", encoding="utf-8")
    plan = a_plan(3000)
    plan.changes.append(InviteChange("inv_nan", "a.yaml:9", None, {"n": 1}, {"n": math.inf}, False))
    with pytest.raises(ReconcilerError, match="cannot write the plan as JSON"):
        save_plan(plan, str(target))
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
