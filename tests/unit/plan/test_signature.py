"""Plan signatures: HMAC-SHA256 over canonical JSON, keyed by a key derived from the secret."""

from __future__ import annotations

import copy
import hashlib
import hmac
import json
import re
from typing import Any

from reconciler.plan.signature import SignatureCheck, canonical_bytes, check, signature_for

SECRET = "s3cr3t-for-the-plan-job"
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
    assert signature_for(DOCUMENT, SECRET) == f"hmac-sha256:{expected}"
    assert canonical_bytes(signed(DOCUMENT)) == canonical.encode("utf-8")
    assert "Müller".encode() in canonical_bytes(DOCUMENT)  # UTF-8, not \u escapes


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


def test_neither_the_secret_nor_the_key_is_in_the_signed_plan():
    key = hmac.new(SECRET.encode(), b"invite-reconciler plan v1", hashlib.sha256).hexdigest()
    text = json.dumps(signed(DOCUMENT))
    assert SECRET not in text and key not in text


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
