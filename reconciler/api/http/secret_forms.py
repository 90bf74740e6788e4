"""Every form a secret may be echoed in (URL- and form-encoded, base64 inside a Basic
header or a JWT), registered for redaction, and the tokens a run was issued."""

from __future__ import annotations

import base64
import json
from collections import deque
from urllib.parse import quote, quote_plus

from reconciler.safetext import (
    register_secret,
    replace_secrets,
)


def secret_forms(secret: str) -> set[str]:
    """The secret as sent (form-encoded, JSON-escaped) is as secret as the secret."""
    return {
        secret,
        quote_plus(secret),
        quote(secret, safe=""),
        json.dumps(secret)[1:-1],
        json.dumps(secret, ensure_ascii=False)[1:-1],  # as the text output shows values
    }


def client_secret_forms(secret: str) -> set[str]:
    """The client secret's forms, and what a server that echoes the token request makes of
    them: percent-encoded once more or with ``/`` kept (``quote``'s default), or
    Base64-encoded, alone or inside a longer text such as the form body. (Only the client
    secret's: each adds to what every redaction searches, and a token, issued anew each
    run, is never in a form a server could re-encode before it is used.)"""
    encoded = {quote_plus(secret), quote(secret, safe=""), quote(secret)}
    return secret_forms(secret) | {
        quote(secret),
        *(quote(form, safe="") for form in encoded),
        *(core for form in (secret, *encoded) for core in _base64_cores(form)),
    }


def _base64_cores(secret: str) -> set[str]:
    """The Base64 characters that depend on the secret's bytes alone, at each of the three
    offsets it can start at in an encoded text: one of them is in any Base64 (standard or
    URL-safe) of a text holding the secret, such as an echoed request body."""
    data = secret.encode("utf-8")
    cores = set()
    for offset in range(3):
        start, end = -(-8 * offset // 6), 8 * (offset + len(data)) // 6
        for encode in (base64.b64encode, base64.urlsafe_b64encode):
            cores.add(encode(bytes(offset) + data).decode("ascii")[start:end])
    return cores


def register_secret_forms(secret: str) -> None:
    for form in client_secret_forms(secret):
        register_secret(form)


class IssuedTokens:
    """The tokens redaction knows: the current one and the one before it (a request sent
    with it may still be answered). Older ones are dropped, so a server issuing a token
    per request costs a run no more than one issuing a token a day."""

    KEPT = 2

    def __init__(self) -> None:
        self._values: deque[str] = deque()

    def add(self, value: str) -> None:
        dropped = self._values.popleft() if len(self._values) >= self.KEPT else None
        self._values.append(value)
        old = secret_forms(dropped) if dropped is not None and dropped not in self._values else ()
        replace_secrets(old, secret_forms(value))
