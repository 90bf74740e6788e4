"""A token endpoint's answer read: the access token (bounded, carriable in a header), its
lifetime within bounds, the scope granted, and an RFC 6749 error in words."""

from __future__ import annotations

import logging
import math
import re
from typing import Any, NamedTuple

from reconciler.api.exceptions import TokenRefused
from reconciler.api.http.secret_forms import IssuedTokens
from reconciler.safetext import (
    MIN_SECRET_LENGTH,
    cut,
    holds_secret,
    redact_and_escape,
)

_DEFAULT_LIFETIME = 300.0  # unknown lifetime: renew often rather than use a dead token

log = logging.getLogger("reconciler.api")


# The lifetime used is kept within these bounds whatever expires_in says: below the
# floor (`expires_in: 0.001`, or 0), a token per request; a token truly that short
# gets a 401, which renews it. Above the ceiling (a 400-digit number), a day will do.
MIN_LIFETIME = 10.0


MAX_LIFETIME = 86400.0


_MAX_SHOWN = 300  # characters of a token endpoint's error_description shown


class Token:
    """Holds the access token; repr and str never show it. ``granted``: the scopes the
    token answer says were granted, None when it says nothing (RFC 6749 §5.1: then the
    scope asked for) or nothing readable."""

    __slots__ = ("expires_at", "granted", "refresh_at", "value")

    def __init__(
        self,
        value: str,
        expires_in: float,
        now: float,
        granted: tuple[str, ...] | None = None,
    ) -> None:
        self.value = value
        self.granted = granted
        self.expires_at = now + expires_in
        # Renew shortly before expiry so a request never leaves with a dying token.
        self.refresh_at = self.expires_at - min(60.0, expires_in * 0.1)

    def __repr__(self) -> str:
        return "<token hidden>"


def token_from_payload(data: Any, body: Any, now: float, issued: IssuedTokens) -> Token:
    """The token of a token answer: the envelope's ``data``, or a bare RFC 6749 body."""
    payload = data if isinstance(data, dict) and "access_token" in data else body
    value = payload.get("access_token") if isinstance(payload, dict) else None
    if not isinstance(value, str):
        raise TokenRefused("the token endpoint's answer has no access_token")
    if len(value) > MAX_TOKEN_LENGTH:
        # Refused before it becomes a redaction pattern: every text shown would be searched
        # for megabytes of it. No gateway carries such a header (nginx: 8 KiB a line).
        raise TokenRefused(
            f"the token endpoint issued an access token of {len(value):,} characters, longer "
            f"than {MAX_TOKEN_LENGTH // 1024} KiB; it was not used, so no request was sent with it"
        )
    issued.add(value)  # redacted before anything else could show it
    problem = _uncarriable(value)
    if problem:
        raise TokenRefused(
            f"the token endpoint issued an access token that cannot be sent in an HTTP "
            f"header ({problem}); it was not used, so no request was sent with it"
        )
    token_type = payload.get("token_type")
    # RFC 6749 §7.1: a token of another type (DPoP, mac) used as a bearer token would be
    # refused, or worse, accepted without the proof its type calls for.
    if token_type is not None and (
        not isinstance(token_type, str) or token_type.lower() != "bearer"
    ):
        shown = redact_and_escape(cut(str(token_type), 40))
        raise TokenRefused(
            f"the token endpoint issued a token of type {shown!r}, not Bearer; this tool "
            "sends only bearer tokens (RFC 6750), so it was not used and no request was "
            "sent with it; ask the platform for Bearer tokens for this client"
        )
    lifetime = token_lifetime(payload.get("expires_in"))
    granted = granted_scope(payload.get("scope"))
    log.debug("obtained an access token, used for %gs", lifetime)
    return Token(value, lifetime, now, granted)


# RFC 6749 §3.3: scope-token = 1*NQCHAR, NQCHAR = %x21 / %x23-5B / %x5D-7E.
_SCOPE_TOKEN = re.compile(r"[\x21\x23-\x5b\x5d-\x7e]{1,200}")


_MAX_SCOPES = 64


def granted_scope(said: Any) -> tuple[str, ...] | None:
    """The scopes a token answer's ``scope`` names, in order; None when it names none
    readably (absent, not text, too many, or anything but space-delimited scope tokens:
    a server's control characters or its echo of a secret are never taken as a scope)."""
    if not isinstance(said, str) or len(said) > _MAX_SCOPES * 201:
        return None
    scopes = tuple(dict.fromkeys(said.split(" ")))
    scopes = tuple(s for s in scopes if s)
    if not scopes or len(scopes) > _MAX_SCOPES:
        return None
    if not all(_SCOPE_TOKEN.fullmatch(s) for s in scopes) or any(holds_secret(s) for s in scopes):
        log.debug("the token answer's scope is not a list of scope tokens; not read")
        return None
    return scopes


class Grant(NamedTuple):
    """What the token request asked for and what the token answer says was granted."""

    asked: tuple[str, ...]
    said: tuple[str, ...] | None  # None: the answer named no scope (so: as asked)

    @property
    def granted(self) -> tuple[str, ...]:
        return self.asked if self.said is None else self.said

    @property
    def missing(self) -> tuple[str, ...]:
        """Scopes asked for and not granted."""
        return tuple(s for s in self.asked if s not in self.granted)

    def shown(self) -> str:
        granted = " ".join(self.granted) if self.granted else "no scope"
        if self.said is None:
            return f"'{redact_and_escape(granted)}' (as asked: the token answer named no scope)"
        return f"'{redact_and_escape(granted)}' (so the token answer said)"


def token_lifetime(expires_in: Any) -> float:
    """Seconds a token is used: what ``expires_in`` says, within MIN and MAX_LIFETIME."""
    if isinstance(expires_in, str) and expires_in.isdigit() and len(expires_in) <= 12:
        expires_in = int(expires_in)  # some servers send the number as a string
    if isinstance(expires_in, bool) or not isinstance(expires_in, int | float):
        return _DEFAULT_LIFETIME
    if isinstance(expires_in, float) and not math.isfinite(expires_in):
        return _DEFAULT_LIFETIME
    # Compared, never converted: float() of a 400-digit integer raises OverflowError.
    if expires_in > MAX_LIFETIME:
        return MAX_LIFETIME
    if expires_in < MIN_LIFETIME:
        return MIN_LIFETIME
    return float(expires_in)


class OAuthError(NamedTuple):
    """An RFC 6749 §5.2 error body: its ``error`` code and ``error_description``, redacted
    and escaped."""

    code: str
    description: str | None

    @classmethod
    def of(cls, body: Any) -> OAuthError | None:
        code = body.get("error") if isinstance(body, dict) else None
        if not isinstance(code, str) or not code.strip():
            return None
        text = body.get("error_description")
        description = None
        if isinstance(text, str) and text.strip():
            description = redact_and_escape(cut(text, _MAX_SHOWN * 2))
            if len(description) > _MAX_SHOWN:
                description = description[:_MAX_SHOWN] + "…"
        return cls(redact_and_escape(cut(code, 80))[:80], description)

    def __str__(self) -> str:
        return self.code + (f" ({self.description})" if self.description else "")


MAX_TOKEN_LENGTH = 64 * 1024  # characters of an access token, at most


def _uncarriable(value: str) -> str | None:
    if not value:
        return "it is empty"
    if len(value) < MIN_SECRET_LENGTH:
        # It could not be kept out of output: it would be found inside ordinary words.
        return f"it is shorter than {MIN_SECRET_LENGTH} characters, too short to keep out of output"
    if any(c in "\r\n" for c in value):
        return "it holds a line break"
    if any(c.isspace() for c in value):
        return "it holds whitespace"
    if not value.isprintable():
        return "it holds a control character"
    try:
        value.encode("latin-1")
    except UnicodeEncodeError:
        return "it holds a character outside Latin-1"
    return None
