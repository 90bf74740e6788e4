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
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from reconciler.errors import ReconcilerError

SCHEME = "hmac-sha256:"
_KEY_PURPOSE = b"invite-reconciler plan v1"


class SignatureCheck:
    """Outcomes of checking a plan document's signature."""

    VALID = "valid"
    UNSIGNED = "unsigned"
    INVALID = "invalid"


def canonical_bytes(document: Mapping[str, Any]) -> bytes:
    """The bytes that are signed: the document without its signature, canonically."""
    return "".join(_canonical_pieces(document)).encode("utf-8", "surrogatepass")


def _key(secret: str) -> bytes:
    return hmac.new(secret.encode("utf-8"), _KEY_PURPOSE, hashlib.sha256).digest()


def _mac(document: Mapping[str, Any] | Iterable[tuple[str, Any]], secret: str) -> str:
    mac = hmac.new(_key(secret), digestmod=hashlib.sha256)
    for piece in _canonical_pieces(document):
        mac.update(piece.encode("utf-8", "surrogatepass"))
    return SCHEME + mac.hexdigest()


def signature_for(document: Mapping[str, Any] | Iterable[tuple[str, Any]], secret: str) -> str:
    """The signature of ``document``: a dict, or its (key, value) pairs.

    Given as pairs (``Plan.document_parts``), a value that is an iterator of records
    is hashed as the list it stands for, one record at a time.
    """
    try:
        return _mac(document, secret)
    except ValueError:  # NaN or Infinity: no reader would parse back what was signed
        raise ReconcilerError(
            "cannot sign the plan: it holds a number JSON cannot represent (NaN or Infinity)"
        ) from None


def _canonical_pieces(document: Mapping[str, Any] | Iterable[tuple[str, Any]]) -> Iterator[str]:
    """The one canonical form, in pieces: sorted keys, no whitespace, ``signature`` left
    out; a list (or an iterator standing for one) at the top a record at a time."""
    items = document.items() if isinstance(document, Mapping) else document
    fields = sorted((item for item in items if item[0] != "signature"), key=lambda item: item[0])
    opening = "{"
    for key, value in fields:
        yield f"{opening}{_canonical(key)}:"
        opening = ","
        if isinstance(value, Iterator | list):
            bracket = "["
            for record in value:
                yield bracket + _canonical(record)
                bracket = ","
            yield "[]" if bracket == "[" else "]"
        else:
            yield _canonical(value)
    yield "{}" if opening == "{" else "}"


def _canonical(value: Any) -> str:
    # Through JSON and back first, so what is signed is exactly what a reader will parse
    # (tuples become lists, non-string keys become strings).
    parsed = json.loads(json.dumps(value, allow_nan=False))
    return json.dumps(parsed, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def check(document: dict[str, Any], secret: str) -> str:
    """VALID, UNSIGNED or INVALID for this secret, in constant time for the comparison."""
    claimed = document.get("signature")
    if not isinstance(claimed, str) or not claimed:
        return SignatureCheck.UNSIGNED
    try:
        expected = _mac(document, secret)
    except ValueError:  # NaN or Infinity: never in a plan this tool signed
        return SignatureCheck.INVALID
    if hmac.compare_digest(claimed.encode("utf-8", "replace"), expected.encode("ascii")):
        return SignatureCheck.VALID
    return SignatureCheck.INVALID
