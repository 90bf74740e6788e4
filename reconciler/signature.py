"""Signed plans: only a holder of the client secret can make a plan apply accepts.

The signature is HMAC-SHA256 over the plan's canonical JSON (sorted keys, no
whitespace, UTF-8, the ``signature`` field left out), keyed by
HMAC-SHA256(client secret, "invite-reconciler plan v1"). The key is derived
for this one purpose, so the signature reveals nothing usable elsewhere, and
it is never stored.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from typing import Any

SCHEME = "hmac-sha256:"
_KEY_PURPOSE = b"invite-reconciler plan v1"


class SignatureCheck:
    """Outcomes of checking a plan document's signature."""

    VALID = "valid"
    UNSIGNED = "unsigned"
    INVALID = "invalid"


def canonical_bytes(document: dict[str, Any]) -> bytes:
    """The bytes that are signed: the document without its signature, canonically."""
    unsigned = {key: value for key, value in document.items() if key != "signature"}
    text = json.dumps(unsigned, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return text.encode("utf-8", "surrogatepass")


def _key(secret: str) -> bytes:
    return hmac.new(secret.encode("utf-8"), _KEY_PURPOSE, hashlib.sha256).digest()


def signature_for(document: dict[str, Any], secret: str) -> str:
    # Through JSON and back first, so what is signed is exactly what a reader will parse
    # (tuples become lists, non-string keys become strings).
    parsed = json.loads(json.dumps(document, ensure_ascii=False))
    mac = hmac.new(_key(secret), canonical_bytes(parsed), hashlib.sha256)
    return SCHEME + mac.hexdigest()


def check(document: dict[str, Any], secret: str) -> str:
    """VALID, UNSIGNED or INVALID for this secret, in constant time for the comparison."""
    claimed = document.get("signature")
    if not isinstance(claimed, str) or not claimed:
        return SignatureCheck.UNSIGNED
    mac = hmac.new(_key(secret), canonical_bytes(document), hashlib.sha256)
    expected = SCHEME + mac.hexdigest()
    if hmac.compare_digest(claimed.encode("utf-8", "replace"), expected.encode("ascii")):
        return SignatureCheck.VALID
    return SignatureCheck.INVALID
