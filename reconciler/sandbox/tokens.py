"""HS256 JWT-form access tokens, signed with a key made fresh for each sandbox."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
import time
from typing import Any


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class TokenAuthority:
    def __init__(self) -> None:
        self._key = secrets.token_bytes(32)

    def issue(self, client_id: str, scopes: list[str], ttl: float) -> str:
        now = time.time()
        header = {"alg": "HS256", "typ": "JWT"}
        claims = {
            "sub": client_id,
            "scope": " ".join(scopes),
            "iat": int(now),
            "exp": now + ttl,
            "jti": secrets.token_hex(8),
        }
        signing_input = f"{_b64(json.dumps(header).encode())}.{_b64(json.dumps(claims).encode())}"
        signature = hmac.new(self._key, signing_input.encode("ascii"), hashlib.sha256).digest()
        return f"{signing_input}.{_b64(signature)}"

    def verify(self, token: str) -> tuple[dict[str, Any] | None, str]:
        """The token's claims, or None and why it is refused."""
        try:
            header, claims, signature = token.split(".")
            signing_input = f"{header}.{claims}".encode("ascii")
            expected = hmac.new(self._key, signing_input, hashlib.sha256).digest()
            if not hmac.compare_digest(expected, _unb64(signature)):
                return None, "invalid access token (bad signature)"
            payload = json.loads(_unb64(claims))
        except (ValueError, UnicodeError):
            return None, "invalid access token (malformed)"
        if not isinstance(payload, dict) or time.time() >= float(payload.get("exp", 0)):
            return None, "access token expired"
        return payload, ""
