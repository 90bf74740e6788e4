"""The access token: fetched once, reused until near expiry, renewed once on a 401; the
token endpoint's answer read (the token bounded and carriable in a header, its lifetime
within bounds, the scope granted); its refusals in words; and every form a secret may
be echoed in, registered for redaction.

``BearerAuth`` (the run's token) follows requests' own ``HTTPDigestAuth.handle_401``: the auth
object sets the header and, when the answer is a 401, renews the token and
sends the request once more.

When the token request fails, the user is told the request, the token endpoint's own
words (RFC 6749 §5.2 ``error`` and ``error_description``, redacted, escaped and
bounded), and advice that fits the error code, about settings that exist. No token
means no request of the run can succeed: every failure there is one error for the
whole run, never the same refusal repeated for every invite.
"""

from __future__ import annotations

import base64
import json
import logging
import math
import re
import threading
from collections import deque
from collections.abc import Callable
from typing import Any, NamedTuple
from urllib.parse import quote, quote_plus

import requests
from requests.auth import AuthBase

from reconciler.api.exceptions import (
    GATEWAY_PAGE,
    ApiError,
    AuthenticationFailed,
    GatewayForbidden,
    Redirected,
    TokenRefused,
)
from reconciler.safetext import (
    MIN_SECRET_LENGTH,
    cut,
    holds_secret,
    redact_and_escape,
    register_secret,
    replace_secrets,
)
from reconciler.settings.config import Settings
from reconciler.settings.contract import SCOPE_TOKEN

log = logging.getLogger("reconciler.api")


class ClientBasicAuth(AuthBase):
    """``client_secret_basic`` (RFC 6749 §2.3.1): id and secret each percent-encoded, then
    joined by a colon and Base64-encoded into ``Authorization: Basic``.

    A space is sent as ``%20``, never as the form encoding's ``+``: a strict server
    (``unquote_plus``) and a lenient one (``unquote``, as Authlib decodes) both read
    ``%20`` as a space, while a lenient one reads ``+`` as a plus and refuses the client.
    Every other character outside the unreserved set is percent-encoded as the form
    encoding would."""

    def __init__(self, client_id: str, secret: str) -> None:
        pair = f"{quote(client_id, safe='')}:{quote(secret, safe='')}".encode()
        self._credentials = base64.b64encode(pair).decode("ascii")
        register_secret(self._credentials)  # the secret, only encoded

    def __call__(self, request: requests.PreparedRequest) -> requests.PreparedRequest:
        request.headers["Authorization"] = f"Basic {self._credentials}"
        return request

    def __repr__(self) -> str:
        return "<client credentials hidden>"


class BearerAuth(AuthBase):
    """The run's token, shared by every worker: fetched once, reused until near expiry;
    sets ``Authorization: Bearer`` and, on a 401, renews the token and resends once."""

    def __init__(self, fetch: Callable[[], Token], clock: Callable[[], float]) -> None:
        self._fetch = fetch
        self._clock = clock
        self._lock = threading.Lock()
        self._token: Token | None = None  # the token in hand; None: fetch one
        self.last: Token | None = None  # the token in hand or the last one, once issued
        self.failure: ApiError | None = None  # why no token can be had in this run, once known
        self._local = threading.local()  # per request in flight, as in HTTPDigestAuth

    def current(self) -> Token:
        with self._lock:
            if self.failure is not None:
                # Workers queued on the lock while a fetch failed after all its
                # retries must not each run a retry budget of their own.
                raise self.failure
            token = self._token
            if token is None or self._clock() >= token.refresh_at:
                try:
                    token = self._token = self.last = self._fetch()
                except ApiError as error:
                    self.failure = error
                    raise
            return token

    def renew(self, stale: Token | None) -> Token:
        """A token other than ``stale``, which the server refused."""
        with self._lock:
            if self._token is stale:
                self._token = None
        return self.current()

    def __call__(self, request: requests.PreparedRequest) -> requests.PreparedRequest:
        token = self.current()
        self._local.token = token
        request.headers["Authorization"] = f"Bearer {token.value}"
        request.hooks["response"].append(self.handle_401)  # register_hook, typed
        return request

    def handle_401(self, response: requests.Response, **kwargs: Any) -> requests.Response:
        # The contract: a 401 means expired or revoked; renew once, retry once. The
        # retry goes to the connection directly, past the response hooks, so its
        # own 401 is the answer: never a second renewal.
        if response.status_code != 401:
            return response
        # Not read: a body we throw away could be endless. The connection goes with it.
        response.close()
        log.debug("%s -> 401, renewing the token and retrying once", response.request.method)
        token = self.renew(self._local.token)
        retry = response.request.copy()
        retry.headers["Authorization"] = f"Bearer {token.value}"
        # kwargs: the same timeouts, CA bundle and proxies as the first attempt.
        answer = response.connection.send(retry, **kwargs)
        answer.history.append(response)
        return answer


_DEFAULT_LIFETIME = 300.0  # unknown lifetime: renew often rather than use a dead token


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

    def __init__(
        self,
        value: str,
        expires_in: float,
        now: float,
        granted: tuple[str, ...] | None = None,
    ) -> None:
        self.value = value
        self.granted = granted
        # Renew shortly before expiry so a request never leaves with a dying token.
        self.refresh_at = now + expires_in - min(60.0, expires_in * 0.1)

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
    if not all(SCOPE_TOKEN.fullmatch(s) and not holds_secret(s) for s in scopes):
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


# A scope the platform's refusal names ("token lacks scope kyb:invites:write"): a word
# after "scope", with a colon in it as the platform's scope names have.
_SCOPE_NAMED = re.compile(r"\bscopes?\W{0,3}([A-Za-z][\w.-]*(?::[\w.-]+)+)")


def refusal_note(grant: Grant | None, message: str, scope_said: bool, scope: str) -> str:
    """What the client knows of a 403 of the platform's (``message``: its words) and the
    scopes of the token refused (``scope``: as set); ``scope_said``: RFC 6750's
    insufficient_scope."""
    if grant is None or grant.missing or scope_said:
        granted = f"; granted: {grant.shown()}" if grant is not None else ""
        return (
            f"; the client's token does not carry the scope this needs "
            f"(asked for: {scope!r}, set with RECONCILER_SCOPE{granted})"
        )
    # The token carries every scope asked for (named, or as asked), and the refusal does
    # not say it lacks one: blaming the scope would contradict itself and send the user
    # to change a setting that is right; unless the platform names one never asked for.
    unasked = [s for s in dict.fromkeys(_SCOPE_NAMED.findall(message)) if s not in grant.asked]
    if unasked:
        return (
            f"; this command needs scope '{redact_and_escape(' '.join(unasked))}', which the "
            f"platform names and the client did not ask for: only {scope!r} was requested "
            "(set with RECONCILER_SCOPE); add that scope to it"
        )
    if grant.said is None:
        return (
            f"; the token answer named no scope, so the token was granted what was asked "
            f"for ('{redact_and_escape(' '.join(grant.granted) or 'no scope')}', set with "
            "RECONCILER_SCOPE): as far as the client can tell no scope is missing, and the "
            "platform refused this for another reason: the client's permissions on the "
            "platform (for whoever administers it to check), or this invite"
        )
    return (
        f"; the token was granted every scope asked for ({grant.shown()}, asked for with "
        "RECONCILER_SCOPE): the platform refused this for another reason (what the client "
        "may do there, or this invite): check the client's permissions on the platform"
    )


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
    if not value.isascii():
        # RFC 6750's b64token is ASCII: Latin-1 bytes on the wire would not be the token issued.
        char = next(c for c in value if not c.isascii())
        return f"it holds U+{ord(char):04X}, a character outside ASCII"
    return None


_HOW = {
    "client_secret_post": "the id and secret in the form",
    "client_secret_basic": "HTTP Basic",
}
_OTHER = {"client_secret_post": "client_secret_basic", "client_secret_basic": "client_secret_post"}


# What each RFC 6749 §5.2 error code asks the user to check, and, for a code it does
# not define or none, each status (None: any other).
_ADVICE: dict[str | int | None, str] = {
    "invalid_client": "{credentials}",
    "invalid_grant": "{credentials}",
    "invalid_scope": "the scope asked for ({scope!r}, set with RECONCILER_SCOPE) is unknown to "
    "the server or more than client id {client_id!r} was granted; ask for the scopes this "
    "client holds",
    "unauthorized_client": "client id {client_id!r} may not use the client_credentials grant; "
    "the platform must allow that grant for this client",
    "unsupported_grant_type": "this endpoint does not offer the client_credentials grant; "
    "check token_path ({token_path!r}) and {base_url}",
    "invalid_request": "the server found the request malformed; check token_path "
    "({token_path!r}) and {sent_as}",
    401: "{credentials}",
    404: "check token_path ({token_path!r}) and {base_url}",
    413: "a proxy or gateway in front of the token endpoint limits request bodies; ask its "
    "operators",
    None: "check RECONCILER_SCOPE ({scope!r}), RECONCILER_CLIENT_ID and token_path",
}


def _advice(key: str | int | None, settings: Settings) -> str:
    method = settings.token_auth_method
    sent_as = f"token_auth_method {method}: {_HOW.get(method, method)}"
    other = _OTHER.get(method, "client_secret_basic")
    credentials = (
        f"check RECONCILER_CLIENT_ID and RECONCILER_CLIENT_SECRET; they were sent with "
        f"{sent_as} (a server that takes only the other way needs token_auth_method: "
        f"{other}, or RECONCILER_TOKEN_AUTH_METHOD={other})"
    )
    return _ADVICE.get(key, _ADVICE[None]).format(
        credentials=credentials,
        sent_as=sent_as,
        scope=settings.contract.scope,
        client_id=settings.client_id,
        token_path=settings.contract.token_path,
        base_url=settings.base_url_source,
    )


def _gateway_page(error: ApiError) -> bool:
    """A 403 that is not the platform's (no envelope): a gateway's or a proxy's page."""
    return isinstance(error, GatewayForbidden) or (error.status == 403 and not error.enveloped)


def token_failure(error: ApiError, oauth: OAuthError | None, settings: Settings) -> ApiError:
    """The error a failed token request becomes (not a network failure: those name the
    host themselves)."""
    request = f"the token request (POST {settings.contract.token_path})"
    status = error.status
    if oauth is not None:
        advice = _advice(oauth.code if oauth.code in _ADVICE else status, settings)
        message = f"{request} was refused: {oauth}; {advice}"
    elif isinstance(error, Redirected):
        message = (
            f"no token from {request}: {error.message}; check {settings.base_url_source} "
            "and token_path"
        )
    elif _gateway_page(error):
        # Not the platform's answer: a gateway's page (a burst blocker's, a run started
        # inside its block, or one that refreshed a token there). No setting is wrong.
        message = f"no token from {request}: {error.message}; {GATEWAY_PAGE}"
    elif status == 401:
        message = (
            f"the token endpoint refused client id {settings.client_id!r}: {error.message}; "
            f"{_advice(401, settings)}"
        )
    elif status is not None and 400 <= status < 500 and status != 429:
        message = f"no token from {request}: {error.message}; {_advice(status, settings)}"
    else:
        # A 5xx or 429 after every retry, or an answer unreadable: the request is named,
        # the class kept (a server fault is not the credentials' fault).
        error.message = f"no token from {request}: {error.message}"
        return error
    return AuthenticationFailed(
        message,
        status=status,
        request_id=error.request_id,
        details=error.details,
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
        *encoded,
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
