"""The sandbox's behaviour, request in and response out, with no socket code.

Faithful to the platform API as docs/sandbox.md describes it: the
envelope on every JSON answer, every status code of the contract
(docs/api-contract.md), scopes,
expiring signed tokens. The knobs of SandboxOptions add the trouble a real network,
gateway and API cause (latency, a pool of workers, errors, dropped connections, rate
limits: the platform's own, and a gateway's in front of it).
"""

from __future__ import annotations

import contextlib
import itertools
import json
import math
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, urlsplit

from jsonschema import Draft202012Validator

from reconciler.model.invite import updatable_fields
from reconciler.sandbox import SANDBOX_CLIENT_ID, SANDBOX_CLIENT_SECRET
from reconciler.sandbox.state import (
    InviteStore,
    RecordedRequest,
    SandboxStats,
    TokenAuthority,
    now_iso,
)
from reconciler.sandbox.wire import (
    DROP,
    KNOWN_SCOPES,
    READ_SCOPE,
    STATUS_HINTS,
    WRITE_SCOPE,
    BadRequest,
    Forbidden,
    MethodNotAllowed,
    NotFound,
    Refused,
    Request,
    Response,
    Unauthorized,
    decoded_body,
    resource_of,
)
from reconciler.schema.check import format_checker, invite_schema


@dataclass
class SandboxOptions:
    """Test knobs. Shares are between 0 and 1; times are in seconds."""

    latency: float = 0.0  # added to every answer
    # Requests worked on at once (None: all); the others queue, so latency rises
    # with load as on a server with a fixed pool of workers.
    workers: int | None = None
    error_rate: float = 0.0  # share answered 503 with an envelope
    html_error_rate: float = 0.0  # share answered 502 with a gateway's HTML page
    drop_rate: float = 0.0  # share whose connection is closed with no answer
    slow_rate: float = 0.0  # share answered only after slow_seconds
    slow_seconds: float = 0.0
    rate_limit: float | None = None  # requests per second, then 429 + Retry-After
    # A gateway's limit, as nginx's `limit_req` (no burst) enforces it: a request is let
    # through only 1/gateway_rate seconds after the last one let through; the others are
    # answered gateway_status, with no envelope and no Retry-After unless asked for.
    gateway_rate: float | None = None
    gateway_status: int = 429
    gateway_retry_after: bool = False
    token_ttl: float = 86400.0
    # What the token answer says expires_in is, when it lies (0.001, 0): the token
    # still lives token_ttl. None: token_ttl, rounded up to whole seconds.
    token_expires_in: float | None = None
    seed: int | None = None
    # How a real platform treats what it is sent (issue 33): `normalize` stores e-mails
    # lower-cased and text with its spaces trimmed and collapsed; `ignore` names fields
    # a PATCH leaves as they were, answered 200 all the same; `etags` sends an ETag with
    # each invite and refuses a PATCH whose If-Match is not it (412); `patch_data` False
    # answers a PATCH with no `data` (the client verifies with a GET).
    normalize: bool = False
    ignore: tuple[str, ...] = ()
    etags: bool = False
    patch_data: bool = True
    # More clients, (id, secret) pairs, each granted the read scope only: a token request
    # of one for more is refused (the read-only client of a CI recipe's pull requests).
    read_only_clients: tuple[tuple[str, str], ...] = ()


def _patch_validator() -> Draft202012Validator:
    schema = invite_schema()
    invite = schema["$defs"]["invite"]
    properties = {k: v for k, v in invite["properties"].items() if k in updatable_fields()}
    patch_schema = {
        "$defs": schema["$defs"],
        "type": "object",
        "additionalProperties": False,
        "properties": properties,
    }
    return Draft202012Validator(patch_schema, format_checker=format_checker())


Handler = Callable[["SandboxApp", Request], Response]


class SandboxApp:
    def __init__(self, invites: list[dict[str, Any]], options: SandboxOptions) -> None:
        self.store = InviteStore(invites)
        self.options = options
        self.stats = SandboxStats()
        self.tokens = TokenAuthority()
        self._random = random.Random(options.seed)
        self._random_lock = threading.Lock()
        self._request_ids = itertools.count(100001)
        self._bucket = TokenBucket(options.rate_limit) if options.rate_limit else None
        self._gateway = LeakyBucket(options.gateway_rate) if options.gateway_rate else None
        self._patch_validator = _patch_validator()
        self._workers = threading.Semaphore(options.workers) if options.workers else None

    # -- entry point ----------------------------------------------------------

    def handle(self, method: str, target: str, headers: Any, body: bytes) -> Response:
        path = urlsplit(target).path
        arrived = time.monotonic()
        self.stats.begin(method)
        response = DROP
        try:
            response = self._with_trouble(Request(method, path, headers, body))
            return response
        finally:
            record = RecordedRequest(method, path, decoded_body(body), response.status, arrived)
            self.stats.end(record)

    def _chance(self, share: float) -> bool:
        if share <= 0:
            return False
        with self._random_lock:
            return self._random.random() < share

    def _with_trouble(self, request: Request) -> Response:
        with self._workers or contextlib.nullcontext():
            if self.options.latency:
                time.sleep(self.options.latency)
            trouble = self._over_a_limit() or self._fault()  # a Response, even DROP, is true
            if trouble is not None:
                return trouble
            try:
                return self._dispatch(request)
            except Refused as refusal:
                return self._envelope(refusal.status, refusal.message, refusal.data)

    def _over_a_limit(self) -> Response | None:
        """The gateway's refusal, or the platform's own 429, of a request over its rate."""
        wait = self._gateway.take() if self._gateway is not None else 0.0
        if wait:
            return self._gateway_refusal(wait)
        wait = self._bucket.take() if self._bucket is not None else 0.0
        if wait:
            response = self._envelope(429, "rate limit exceeded", None)
            response.headers["Retry-After"] = str(max(1, math.ceil(wait)))
            return response
        return None

    def _fault(self) -> Response | None:
        """The network's and the API's trouble, by the options' shares: None for none."""
        options = self.options
        if self._chance(options.drop_rate):
            return DROP
        if self._chance(options.slow_rate):
            time.sleep(options.slow_seconds)
        if self._chance(options.error_rate):
            return self._envelope(503, "service temporarily unavailable", None)
        if self._chance(options.html_error_rate):
            page = b"<html><body><h1>502 Bad Gateway</h1></body></html>"
            return Response(502, page, {"Content-Type": "text/html"})
        return None

    def _gateway_refusal(self, wait: float) -> Response:
        """What nginx answers a request over its limit: its own HTML page, not the API's."""
        status = self.options.gateway_status
        reason = {429: "Too Many Requests", 503: "Service Temporarily Unavailable"}.get(status, "")
        page = f"<html><body><center><h1>{status} {reason}</h1></center></body></html>"
        headers = {"Content-Type": "text/html"}
        if self.options.gateway_retry_after:
            headers["Retry-After"] = str(max(1, math.ceil(wait)))
        return Response(status, page.encode(), headers)

    # -- routing --------------------------------------------------------------

    def _dispatch(self, request: Request) -> Response:
        resource, invite_id = resource_of(request.path)
        route = ROUTES.get((request.method, resource))
        if route is None:
            if resource == "token":
                raise MethodNotAllowed("use POST")
            raise NotFound(f"no endpoint {request.method} {request.path}")
        scope, handler = route
        if scope:
            self._authorize(request.headers, scope)
        return handler(self, request._replace(invite_id=invite_id))

    def _authorize(self, headers: Any, scope: str) -> None:
        auth = headers.get("Authorization", "")
        if not auth.startswith("Bearer "):
            raise Unauthorized("missing bearer token")
        claims, why = self.tokens.verify(auth[len("Bearer ") :])
        if claims is None:
            raise Unauthorized(why)
        if scope not in str(claims.get("scope", "")).split():
            raise Forbidden(f"token lacks scope {scope}")

    # -- endpoints ------------------------------------------------------------

    def _issue_token(self, request: Request) -> Response:
        form = _token_form(request, self.options.read_only_clients)
        read_only = (form["client_id"], form["client_secret"]) in self.options.read_only_clients
        granted = [READ_SCOPE] if read_only else list(KNOWN_SCOPES)
        scopes = form.get("scope", "").split() or granted
        unknown = [s for s in scopes if s not in KNOWN_SCOPES]
        if unknown:
            raise BadRequest(f"unknown scope: {' '.join(unknown)}")
        if not set(scopes) <= set(granted):
            raise BadRequest(f"scope not granted to this client: {' '.join(scopes)}")
        ttl = self.options.token_ttl
        token = self.tokens.issue(form["client_id"], scopes, ttl)
        said = self.options.token_expires_in
        expires_in = math.ceil(ttl) if said is None else said
        data = {"access_token": token, "token_type": "Bearer", "expires_in": expires_in}
        return self._envelope(201, "access token created", data)

    def _accounts(self, request: Request) -> Response:
        return self._envelope(200, "accounts", [{"id": "acc_sandbox"}])

    def _get_invite(self, request: Request) -> Response:
        if not self.options.etags:
            return self._envelope(200, "invite", self.store.get(request.invite_id))
        invite, etag = self.store.get_tagged(request.invite_id)
        response = self._envelope(200, "invite", invite)
        response.headers["ETag"] = etag
        return response

    def _update_invite(self, request: Request) -> Response:
        stored = {
            name: normalized(value, name) if self.options.normalize else value
            for name, value in self._patch_body(request.body).items()
            if name not in self.options.ignore  # answered 200 all the same
        }
        if_match = request.headers.get("If-Match") if self.options.etags else None
        invite = self.store.update(request.invite_id, stored, if_match)
        return self._envelope(200, "invite updated", invite if self.options.patch_data else None)

    def _patch_body(self, body: bytes) -> dict[str, Any]:
        """A PATCH's body, refused (400) unless it is an object the invite schema allows."""
        try:
            changes = json.loads(body.decode("utf-8")) if body else None
        except (UnicodeDecodeError, ValueError):
            raise BadRequest("body is not valid JSON") from None
        if not isinstance(changes, dict):
            raise BadRequest("body must be a JSON object")
        problems = {
            ".".join(str(p) for p in e.absolute_path) or "body": e.message
            for e in self._patch_validator.iter_errors(changes)
        }
        if problems:
            raise BadRequest("invalid invite update", problems)
        return changes

    def _resend_invite(self, request: Request) -> Response:
        return self._envelope(200, "invitation re-sent", self.store.resend(request.invite_id))

    def _envelope(self, status: int, message: str, data: Any) -> Response:
        body = {
            "status": status,
            "success": status < 400,
            "message": message,
            "data": data,
            "metadata": {"requestId": str(next(self._request_ids)), "timestamp": now_iso()},
            "details": {"hint": STATUS_HINTS.get(status, "")},
        }
        encoded = json.dumps(body, ensure_ascii=False).encode("utf-8")
        return Response(status, encoded, {"Content-Type": "application/json; charset=utf-8"})


# (method, resource) -> (scope the token needs, or "" for none; the endpoint)
ROUTES: dict[tuple[str, str], tuple[str, Handler]] = {
    ("POST", "token"): ("", SandboxApp._issue_token),
    ("GET", "accounts"): (READ_SCOPE, SandboxApp._accounts),
    ("GET", "invite"): (READ_SCOPE, SandboxApp._get_invite),
    ("PATCH", "invite"): (WRITE_SCOPE, SandboxApp._update_invite),
    ("POST", "resend"): (WRITE_SCOPE, SandboxApp._resend_invite),
}


def _token_form(request: Request, more: tuple[tuple[str, str], ...] = ()) -> dict[str, str]:
    """A token request's form, refused unless it is a client-credentials grant of the
    sandbox's client (or one of ``more``)."""
    if "application/x-www-form-urlencoded" not in request.headers.get("Content-Type", ""):
        raise BadRequest("token request must be form-encoded")
    form = {k: v[0] for k, v in parse_qs(request.body.decode("utf-8", "replace")).items()}
    if form.get("grant_type") != "client_credentials":
        raise BadRequest("grant_type must be client_credentials")
    pair = (form.get("client_id", ""), form.get("client_secret", ""))
    if pair != (SANDBOX_CLIENT_ID, SANDBOX_CLIENT_SECRET) and pair not in more:
        raise Unauthorized("invalid client credentials")
    return form


def normalized(value: Any, key: str = "") -> Any:
    """What a normalising platform stores: e-mails lower-cased, text trimmed with its runs of
    spaces made one, the same inside an object and a list."""
    if isinstance(value, str):
        text = " ".join(value.split())
        return text.lower() if key == "email" else text
    if isinstance(value, dict):
        return {k: normalized(v, k) for k, v in value.items()}
    if isinstance(value, list):
        return [normalized(item, key) for item in value]
    return value


# -- rate limits ---------------------------------------------------------------------------


class TokenBucket:
    """The platform's own limit: a second's worth of burst, then `rate` per second."""

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


class LeakyBucket:
    """nginx's `limit_req` with no burst: a steady rate, and every early request refused.

    Refused requests do not count (nginx only moves its clock on a request it lets
    through), so a client that keeps knocking is not punished beyond its refusals.
    """

    def __init__(self, rate: float) -> None:
        self.interval = 1.0 / rate
        self.last: float | None = None
        self.lock = threading.Lock()

    def take(self) -> float:
        """0 if let through, else the seconds until a request would be."""
        with self.lock:
            now = time.monotonic()
            if self.last is not None and now - self.last < self.interval:
                return self.interval - (now - self.last)
            self.last = now
            return 0.0
