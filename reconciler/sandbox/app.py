"""The sandbox's behaviour, request in and response out, with no socket code.

Faithful to ../shared/spec/api-contract.md: the envelope on every JSON answer,
every status code of the contract, scopes, expiring signed tokens. Knobs in
SandboxOptions add the trouble a real network and API cause.
"""

from __future__ import annotations

import itertools
import json
import math
import random
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, NamedTuple
from urllib.parse import parse_qs, unquote, urlsplit

from jsonschema import Draft202012Validator

from reconciler.config import UPDATABLE_FIELDS
from reconciler.sandbox.state import InviteStore, now_iso
from reconciler.sandbox.tokens import TokenAuthority
from reconciler.schema import FORMAT_CHECKER, invite_schema

SANDBOX_CLIENT_ID = "sandbox-client"
SANDBOX_CLIENT_SECRET = "sandbox-secret"  # fixed and documented: not a secret
READ_SCOPE = "kyb:invites:read"
WRITE_SCOPE = "kyb:invites:write"
KNOWN_SCOPES = (READ_SCOPE, WRITE_SCOPE)
INVITES_PREFIX = "/public-api/v1/kyb/invites/"

_HINTS = {
    200: "The request succeeded.",
    201: "This kind of response is used when a new entity is created.",
    400: "The request body or parameters are invalid.",
    401: "Authentication is missing, invalid or expired.",
    403: "The access token lacks a scope this operation needs.",
    404: "The requested resource does not exist.",
    409: "The request conflicts with the resource's current state.",
    413: "The request body is too large.",
    429: "Too many requests; wait for Retry-After seconds.",
    503: "The service is temporarily unavailable.",
}


@dataclass
class SandboxOptions:
    """Test knobs. Shares are between 0 and 1; times are in seconds."""

    latency: float = 0.0  # added to every answer
    error_rate: float = 0.0  # share answered 503 with an envelope
    html_error_rate: float = 0.0  # share answered 502 with a gateway's HTML page
    drop_rate: float = 0.0  # share whose connection is closed with no answer
    slow_rate: float = 0.0  # share answered only after slow_seconds
    slow_seconds: float = 0.0
    rate_limit: float | None = None  # requests per second, then 429 + Retry-After
    token_ttl: float = 86400.0
    seed: int | None = None


class Response(NamedTuple):
    status: int
    body: bytes
    headers: dict[str, str]


DROP = Response(0, b"", {})  # close the connection without answering


class RecordedRequest(NamedTuple):
    method: str
    path: str
    body: Any
    status: int
    arrived: float = 0.0  # time.monotonic() when the request was read


@dataclass
class SandboxStats:
    """What the sandbox saw; tests and benchmarks read it."""

    statuses: Counter[int] = field(default_factory=Counter)
    started: Counter[str] = field(default_factory=Counter)  # requests begun, by method
    requests: list[RecordedRequest] = field(default_factory=list)  # recorded as they end
    in_flight: int = 0
    max_in_flight: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def begin(self, method: str) -> None:
        with self.lock:
            self.started[method] += 1
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)

    def end(self, record: RecordedRequest) -> None:
        with self.lock:
            self.in_flight -= 1
            self.statuses[record.status] += 1
            self.requests.append(record)

    def calls(self, method: str, path_prefix: str = "") -> list[RecordedRequest]:
        with self.lock:
            return [
                r
                for r in self.requests
                if r.method == method and r.path.startswith(path_prefix) and r.status
            ]

    @property
    def total(self) -> int:
        with self.lock:
            return sum(self.statuses.values())


class _TokenBucket:
    def __init__(self, rate: float) -> None:
        self.rate = rate
        self.capacity = max(1.0, rate)  # one second's worth of burst
        self.tokens = self.capacity
        self.updated = time.monotonic()
        self.lock = threading.Lock()

    def take(self) -> float:
        """0 if allowed, else the seconds until a request would be."""
        with self.lock:
            now = time.monotonic()
            self.tokens = min(self.capacity, self.tokens + (now - self.updated) * self.rate)
            self.updated = now
            if self.tokens >= 1:
                self.tokens -= 1
                return 0.0
            return (1 - self.tokens) / self.rate


def _patch_validator() -> Draft202012Validator:
    schema = invite_schema()
    invite = schema["$defs"]["invite"]
    properties = {k: v for k, v in invite["properties"].items() if k in UPDATABLE_FIELDS}
    patch_schema = {
        "$defs": schema["$defs"],
        "type": "object",
        "additionalProperties": False,
        "properties": properties,
    }
    return Draft202012Validator(patch_schema, format_checker=FORMAT_CHECKER)


class SandboxApp:
    def __init__(self, invites: list[dict[str, Any]], options: SandboxOptions) -> None:
        self.store = InviteStore(invites)
        self.options = options
        self.stats = SandboxStats()
        self.tokens = TokenAuthority()
        self._random = random.Random(options.seed)
        self._random_lock = threading.Lock()
        self._request_ids = itertools.count(100001)
        self._bucket = _TokenBucket(options.rate_limit) if options.rate_limit else None
        self._patch_validator = _patch_validator()

    # -- entry point ----------------------------------------------------------

    def handle(self, method: str, target: str, headers: Any, body: bytes) -> Response:
        path = urlsplit(target).path
        arrived = time.monotonic()
        self.stats.begin(method)
        response = DROP
        try:
            response = self._with_trouble(method, path, headers, body)
            return response
        finally:
            record = RecordedRequest(method, path, _decoded(body), response.status, arrived)
            self.stats.end(record)

    def _chance(self, share: float) -> bool:
        if share <= 0:
            return False
        with self._random_lock:
            return self._random.random() < share

    def _with_trouble(self, method: str, path: str, headers: Any, body: bytes) -> Response:
        options = self.options
        if options.latency:
            time.sleep(options.latency)
        if self._bucket is not None:
            wait = self._bucket.take()
            if wait:
                response = self._envelope(429, "rate limit exceeded", None)
                response.headers["Retry-After"] = str(max(1, math.ceil(wait)))
                return response
        if self._chance(options.drop_rate):
            return DROP
        if self._chance(options.slow_rate):
            time.sleep(options.slow_seconds)
        if self._chance(options.error_rate):
            return self._envelope(503, "service temporarily unavailable", None)
        if self._chance(options.html_error_rate):
            page = b"<html><body><h1>502 Bad Gateway</h1></body></html>"
            return Response(502, page, {"Content-Type": "text/html"})
        return self._route(method, path, headers, body)

    # -- routing --------------------------------------------------------------

    def _route(self, method: str, path: str, headers: Any, body: bytes) -> Response:
        if path == "/oauth/token":
            if method != "POST":
                return self._envelope(405, "use POST", None)
            return self._issue_token(headers, body)
        if path == "/public-api/v1/accounts" and method == "GET":
            _, refused = self._authorize(headers, READ_SCOPE)
            return refused or self._envelope(200, "accounts", [{"id": "acc_sandbox"}])
        if path.startswith(INVITES_PREFIX):
            rest = path[len(INVITES_PREFIX) :]
            invite_id, _, action = rest.partition("/")
            invite_id = unquote(invite_id)
            if method == "GET" and not action:
                return self._get_invite(headers, invite_id)
            if method == "PATCH" and not action:
                return self._update_invite(headers, invite_id, body)
            if method == "POST" and action == "resend":
                return self._resend_invite(headers, invite_id)
        return self._envelope(404, f"no endpoint {method} {path}", None)

    def _issue_token(self, headers: Any, body: bytes) -> Response:
        if "application/x-www-form-urlencoded" not in headers.get("Content-Type", ""):
            return self._envelope(400, "token request must be form-encoded", None)
        form = {k: v[0] for k, v in parse_qs(body.decode("utf-8", "replace")).items()}
        if form.get("grant_type") != "client_credentials":
            return self._envelope(400, "grant_type must be client_credentials", None)
        if (
            form.get("client_id") != SANDBOX_CLIENT_ID
            or form.get("client_secret") != SANDBOX_CLIENT_SECRET
        ):
            return self._envelope(401, "invalid client credentials", None)
        scopes = form.get("scope", "").split() or list(KNOWN_SCOPES)
        unknown = [s for s in scopes if s not in KNOWN_SCOPES]
        if unknown:
            return self._envelope(400, f"unknown scope: {' '.join(unknown)}", None)
        ttl = self.options.token_ttl
        token = self.tokens.issue(form["client_id"], scopes, ttl)
        data = {"access_token": token, "token_type": "Bearer", "expires_in": math.ceil(ttl)}
        return self._envelope(201, "access token created", data)

    def _authorize(self, headers: Any, scope: str) -> tuple[dict[str, Any] | None, Response | None]:
        auth = headers.get("Authorization", "")
        if not auth.startswith("Bearer "):
            return None, self._envelope(401, "missing bearer token", None)
        claims, why = self.tokens.verify(auth[len("Bearer ") :])
        if claims is None:
            return None, self._envelope(401, why, None)
        if scope not in str(claims.get("scope", "")).split():
            return None, self._envelope(403, f"token lacks scope {scope}", None)
        return claims, None

    def _get_invite(self, headers: Any, invite_id: str) -> Response:
        _, refused = self._authorize(headers, READ_SCOPE)
        if refused:
            return refused
        invite = self.store.get(invite_id)
        if invite is None:
            return self._envelope(404, f"invite {invite_id} not found", None)
        return self._envelope(200, "invite", invite)

    def _update_invite(self, headers: Any, invite_id: str, body: bytes) -> Response:
        _, refused = self._authorize(headers, WRITE_SCOPE)
        if refused:
            return refused
        try:
            changes = json.loads(body.decode("utf-8")) if body else None
        except (UnicodeDecodeError, ValueError):
            return self._envelope(400, "body is not valid JSON", None)
        if not isinstance(changes, dict):
            return self._envelope(400, "body must be a JSON object", None)
        problems = {
            ".".join(str(p) for p in e.absolute_path) or "body": e.message
            for e in self._patch_validator.iter_errors(changes)
        }
        if problems:
            return self._envelope(400, "invalid invite update", problems)
        invite, why = self.store.update(invite_id, changes)
        if why == "missing":
            return self._envelope(404, f"invite {invite_id} not found", None)
        if why == "not-pending":
            return self._envelope(409, f"invite {invite_id} is not pending", None)
        return self._envelope(200, "invite updated", invite)

    def _resend_invite(self, headers: Any, invite_id: str) -> Response:
        _, refused = self._authorize(headers, WRITE_SCOPE)
        if refused:
            return refused
        result, why = self.store.resend(invite_id)
        if why == "missing":
            return self._envelope(404, f"invite {invite_id} not found", None)
        if why == "not-pending":
            return self._envelope(409, f"invite {invite_id} is not pending", None)
        return self._envelope(200, "invitation re-sent", result)

    def _envelope(self, status: int, message: str, data: Any) -> Response:
        body = {
            "status": status,
            "success": status < 400,
            "message": message,
            "data": data,
            "metadata": {"requestId": str(next(self._request_ids)), "timestamp": now_iso()},
            "details": {"hint": _HINTS.get(status, "")},
        }
        encoded = json.dumps(body, ensure_ascii=False).encode("utf-8")
        return Response(status, encoded, {"Content-Type": "application/json; charset=utf-8"})


def _decoded(body: bytes) -> Any:
    if not body:
        return None
    try:
        return json.loads(body)
    except (UnicodeDecodeError, ValueError):
        return None  # forms (the token request, with its secret) are never kept
