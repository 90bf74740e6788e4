"""The sandbox: its behaviour, request in and response out, and the HTTP it is served on.

In the order a request meets them: what its exchanges are made of (a request and its
answer, the contract's paths and scopes, each status's hint, the refusals: raised
anywhere, turned into an envelope in one place); what the sandbox holds (its invites,
the tokens it issued, what it saw); and ``SandboxApp``, which answers each request as
the contract says, its endpoints found in one routing table. Last, ``Sandbox``: a
threaded HTTP/1.1 server on loopback, kept apart from the behaviour above (no socket
code there). Speed matters because benchmarks measure the client through it:
connections are kept alive, every connection has its own thread, and each answer leaves
in a single write with TCP_NODELAY set (headers and body in two small writes can cost a
40 ms delayed-ACK stall): http.server's own header methods write into a buffered stream
that is flushed once per answer.
"""

from __future__ import annotations

import base64
import contextlib
import copy
import difflib
import hashlib
import hmac
import itertools
import json
import math
import random
import re
import secrets
import socket
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, NamedTuple
from urllib.parse import parse_qs, unquote, urlsplit

import yaml
from jsonschema import Draft202012Validator

from reconciler.errors import ReconcilerError
from reconciler.files import TooLarge, read_regular
from reconciler.model.invite import updatable_fields
from reconciler.safetext import escape
from reconciler.sandbox import SANDBOX_CLIENT_ID, SANDBOX_CLIENT_SECRET
from reconciler.schema.check import format_checker, invite_schema

READ_SCOPE, WRITE_SCOPE = "kyb:invites:read", "kyb:invites:write"
KNOWN_SCOPES = (READ_SCOPE, WRITE_SCOPE)
INVITES_PREFIX = "/public-api/v1/kyb/invites/"
# An invite's path, and its re-send's: the id is one segment, percent-decoded.
_INVITE_PATH = re.compile(re.escape(INVITES_PREFIX) + r"([^/]*)(/resend)?")

STATUS_HINTS = {
    200: "The request succeeded.",
    201: "This kind of response is used when a new entity is created.",
    400: "The request body or parameters are invalid.",
    401: "Authentication is missing, invalid or expired.",
    403: "The access token lacks a scope this operation needs.",
    404: "The requested resource does not exist.",
    409: "The request conflicts with the resource's current state.",
    412: "The resource changed since it was read; read it again.",
    413: "The request body is too large.",
    429: "Too many requests; wait for Retry-After seconds.",
    503: "The service is temporarily unavailable.",
}


class Response(NamedTuple):
    status: int
    body: bytes
    headers: dict[str, str]


DROP = Response(0, b"", {})  # close the connection without answering


class Request(NamedTuple):
    method: str
    path: str
    headers: Any
    body: bytes
    invite_id: str = ""


def decoded_body(body: bytes) -> Any:
    try:
        return json.loads(body) if body else None
    except (UnicodeDecodeError, ValueError):
        return None  # forms (the token request, with its secret) are never kept


class Refused(Exception):
    """A request the contract answers with an error ``status`` and an envelope: 400, 401
    (no valid token), 403 (a scope lacking), 404, 405, 409 (the invite is no longer
    pending: it cannot change or be re-sent), 412 (a PATCH whose If-Match is not the
    invite's ETag)."""

    def __init__(self, status: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.status, self.message, self.data = status, message, data


# What the sandbox holds: its invites (loaded from YAML or JSON, kept in memory, thread-safe), the
# tokens it issued (HS256 JWT-form, signed with a key made fresh for each sandbox), and what it
# saw (each request with its status and arrival time).

_DEFAULT_STATE = Path(__file__).with_name("state.yaml")


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def etag_of(invite: dict[str, Any]) -> str:
    """A strong entity tag of the invite as stored: any change gives another."""
    canonical = json.dumps(invite, sort_keys=True, ensure_ascii=False, default=str)
    return '"' + hashlib.sha256(canonical.encode("utf-8", "surrogatepass")).hexdigest()[:20] + '"'


# As large as an invite file may be: a state of 200,000 invites is some 50 MB.
MAX_STATE_BYTES = 256 * 1024 * 1024


def load_state_file(path: str | Path | None) -> list[dict[str, Any]]:
    """Invites from a state file: a list, or a mapping with an `invites` list.

    Read as every file is, a regular file only and within bounds: `--state /dev/zero`
    or a FIFO is refused at once, never read for ever or waited on.
    """
    file = Path(path) if path else _DEFAULT_STATE
    try:
        text = read_regular(file, MAX_STATE_BYTES).decode("utf-8")
        data = json.loads(text) if file.suffix == ".json" else yaml.safe_load(text)
    except OSError as exc:
        raise ReconcilerError(f"{file}: cannot load sandbox state: {exc.strerror}") from None
    except TooLarge:
        raise ReconcilerError(
            f"{file}: cannot load sandbox state: larger than {MAX_STATE_BYTES:,} bytes"
        ) from None
    except (UnicodeDecodeError, ValueError, yaml.YAMLError) as exc:
        raise ReconcilerError(f"{file}: cannot load sandbox state: {exc}") from None
    invites = data.get("invites") if isinstance(data, dict) else data
    if not isinstance(invites, list) or not all(
        isinstance(i, dict) and isinstance(i.get("id"), str) for i in invites
    ):
        raise ReconcilerError(f"{file}: sandbox state must be a list of invites, each with an id")
    known = {*updatable_fields(), *_SERVER_FIELDS}
    for invite in invites:
        if unknown := [key for key in invite if key not in known]:
            raise ReconcilerError(_unknown_field(file, invite["id"], str(unknown[0]), known))
    return invites


# What the platform keeps of an invite besides the fields an update may change.
_SERVER_FIELDS = ("id", "status", "createdAt", "updatedAt", "lastSentAt")


def _unknown_field(file: Path, invite_id: str, key: str, known: set[str]) -> str:
    """A typo'd field would be served as is and never planned: say it, with the field meant."""
    near = difflib.get_close_matches(key, sorted(known), n=1)
    meant = f"; did you mean `{near[0]}`?" if near else f" (fields: {', '.join(sorted(known))})"
    return (
        f"{escape(str(file))}: cannot load sandbox state: invite '{escape(invite_id)}': "
        f"`{escape(key)}` is not a field of an invite{meant}"
    )


class InviteStore:
    def __init__(self, invites: list[dict[str, Any]]) -> None:
        self._lock = threading.Lock()
        self._invites: dict[str, dict[str, Any]] = {}
        self.resends: Counter[str] = Counter()
        stamp = now_iso()
        for invite in invites:
            record = copy.deepcopy(invite)
            record.setdefault("status", "pending")
            record.setdefault("createdAt", stamp)
            record.setdefault("updatedAt", record["createdAt"])
            self._invites[record["id"]] = record

    def __len__(self) -> int:
        return len(self._invites)

    def get(self, invite_id: str) -> dict[str, Any]:
        """A copy of the invite; refused (404) if there is none."""
        return self.get_tagged(invite_id)[0]

    def get_tagged(self, invite_id: str) -> tuple[dict[str, Any], str]:
        """A copy of the invite and its ETag, read together."""
        with self._lock:
            invite = self._stored(invite_id)
            return copy.deepcopy(invite), etag_of(invite)

    def put(self, invite: dict[str, Any]) -> None:
        """Add or replace an invite (tests use this to change the server behind a plan)."""
        record = copy.deepcopy(invite)
        record.setdefault("status", "pending")
        with self._lock:
            self._invites[record["id"]] = record

    def _stored(self, invite_id: str, *, pending: bool = False) -> dict[str, Any]:
        """The stored invite (hold the lock); ``pending``: only if it may change."""
        invite = self._invites.get(invite_id)
        if invite is None:
            raise Refused(404, f"invite {invite_id} not found")
        if pending and str(invite.get("status")).casefold() != "pending":  # as the client reads it
            raise Refused(409, f"invite {invite_id} is not pending")
        return invite

    def update(
        self, invite_id: str, changes: dict[str, Any], if_match: str | None = None
    ) -> dict[str, Any]:
        """The invite with ``changes`` applied; refused if it cannot change (404, 409) or
        if ``if_match`` is given and is not its ETag (412)."""
        with self._lock:
            invite = self._stored(invite_id, pending=True)
            if if_match is not None and if_match != etag_of(invite):
                raise Refused(412, f"invite {invite_id} changed since it was read")
            invite.update(copy.deepcopy(changes), updatedAt=now_iso())
            return copy.deepcopy(invite)

    def resend(self, invite_id: str) -> dict[str, Any]:
        """Re-send the invitation; refused (404, 409) as for ``update``."""
        with self._lock:
            invite = self._stored(invite_id, pending=True)
            self.resends[invite_id] += 1
            invite["lastSentAt"] = now_iso()
            return {"id": invite_id, "lastSentAt": invite["lastSentAt"]}

    def snapshot(self) -> dict[str, dict[str, Any]]:
        with self._lock:
            return copy.deepcopy(self._invites)


# -- tokens --------------------------------------------------------------------------------


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class TokenAuthority:
    def __init__(self) -> None:
        self._key = secrets.token_bytes(32)

    def _signature(self, signing_input: str) -> bytes:
        return hmac.new(self._key, signing_input.encode("ascii"), hashlib.sha256).digest()

    def issue(self, client_id: str, scopes: list[str], ttl: float) -> str:
        now = time.time()
        claims = {
            "sub": client_id,
            "scope": " ".join(scopes),
            "iat": int(now),
            "exp": now + ttl,
            "jti": secrets.token_hex(8),
        }
        parts = ({"alg": "HS256", "typ": "JWT"}, claims)
        signing_input = ".".join(_b64(json.dumps(part).encode()) for part in parts)
        return f"{signing_input}.{_b64(self._signature(signing_input))}"

    def verify(self, token: str) -> tuple[dict[str, Any] | None, str]:
        """The token's claims, or None and why it is refused."""
        try:
            header, claims, signature = token.split(".")
            if not hmac.compare_digest(self._signature(f"{header}.{claims}"), _unb64(signature)):
                return None, "invalid access token (bad signature)"
            payload = json.loads(_unb64(claims))
        except (ValueError, UnicodeError):
            return None, "invalid access token (malformed)"
        if not isinstance(payload, dict) or time.time() >= float(payload.get("exp", 0)):
            return None, "access token expired"
        return payload, ""


# -- what the sandbox saw ------------------------------------------------------------------


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

    def arrivals(self) -> list[float]:
        """When each request arrived (time.monotonic()), in arrival order."""
        with self.lock:
            return sorted(r.arrived for r in self.requests)


# The sandbox's behaviour, request in and response out, with no socket code.
#
# Faithful to the platform API as docs/sandbox.md describes it: the envelope on every JSON answer,
# every status code of the contract (docs/api-contract.md), scopes, expiring signed tokens. The
# knobs of SandboxOptions add the trouble a real network, gateway and API cause (latency, a pool
# of workers, errors, dropped connections, rate limits: the platform's own, and a gateway's in
# front of it).


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
        rate, gateway = options.rate_limit, options.gateway_rate
        self._bucket = TokenBucket(rate, max(1.0, rate)) if rate else None
        self._gateway = TokenBucket(gateway, 1.0) if gateway else None
        self._patch_validator = _patch_validator()
        self._workers = threading.Semaphore(options.workers) if options.workers else None

    def handle(self, method: str, target: str, headers: Any, body: bytes) -> Response:
        path = urlsplit(target).path
        arrived = time.monotonic()
        self.stats.begin(method)
        response = DROP
        try:
            with self._workers or contextlib.nullcontext():
                if self.options.latency:
                    time.sleep(self.options.latency)
                # A Response, even DROP, is true: trouble answers in place of the endpoint.
                response = self._trouble() or self._dispatch(Request(method, path, headers, body))
            return response
        finally:
            record = RecordedRequest(method, path, decoded_body(body), response.status, arrived)
            self.stats.end(record)

    def _chance(self, share: float) -> bool:
        if share <= 0:
            return False
        with self._random_lock:
            return self._random.random() < share

    def _trouble(self) -> Response | None:
        """The gateway's refusal or the platform's own 429 of a request over its rate, else
        the network's and the API's trouble by the options' shares: None for none."""
        options = self.options
        wait = self._gateway.take() if self._gateway is not None else 0.0
        if wait:
            return self._gateway_refusal(wait)
        wait = self._bucket.take() if self._bucket is not None else 0.0
        if wait:
            retry = {"Retry-After": str(max(1, math.ceil(wait)))}
            return self._envelope(429, "rate limit exceeded", None, retry)
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

    def _dispatch(self, request: Request) -> Response:
        """The endpoint's answer, found in ROUTES; a refusal's envelope."""
        invite = _INVITE_PATH.fullmatch(request.path)
        resource = f"{INVITES_PREFIX}{{id}}{invite[2] or ''}" if invite else request.path
        try:
            route = ROUTES.get((request.method, resource))
            if route is None:
                if request.path == "/oauth/token":
                    raise Refused(405, "use POST")
                raise Refused(404, f"no endpoint {request.method} {request.path}")
            scope, handler = route
            if scope:
                self._authorize(request.headers, scope)
            return handler(self, request._replace(invite_id=unquote(invite[1]) if invite else ""))
        except Refused as refusal:
            return self._envelope(refusal.status, refusal.message, refusal.data)

    def _authorize(self, headers: Any, scope: str) -> None:
        auth = headers.get("Authorization", "")
        if not auth.startswith("Bearer "):
            raise Refused(401, "missing bearer token")
        claims, why = self.tokens.verify(auth[len("Bearer ") :])
        if claims is None:
            raise Refused(401, why)
        if scope not in str(claims.get("scope", "")).split():
            raise Refused(403, f"token lacks scope {scope}")

    # -- endpoints ------------------------------------------------------------

    def _issue_token(self, request: Request) -> Response:
        """A token for a client-credentials grant of the sandbox's client, or of one of the
        read-only clients (granted the read scope only)."""
        if "application/x-www-form-urlencoded" not in request.headers.get("Content-Type", ""):
            raise Refused(400, "token request must be form-encoded")
        form = {k: v[0] for k, v in parse_qs(request.body.decode("utf-8", "replace")).items()}
        if form.get("grant_type") != "client_credentials":
            raise Refused(400, "grant_type must be client_credentials")
        pair = (form.get("client_id", ""), form.get("client_secret", ""))
        read_only = pair in self.options.read_only_clients
        if pair != (SANDBOX_CLIENT_ID, SANDBOX_CLIENT_SECRET) and not read_only:
            raise Refused(401, "invalid client credentials")
        granted = [READ_SCOPE] if read_only else list(KNOWN_SCOPES)
        scopes = form.get("scope", "").split() or granted
        unknown = [s for s in scopes if s not in KNOWN_SCOPES]
        if unknown:
            raise Refused(400, f"unknown scope: {' '.join(unknown)}")
        if not set(scopes) <= set(granted):
            raise Refused(400, f"scope not granted to this client: {' '.join(scopes)}")
        ttl, said = self.options.token_ttl, self.options.token_expires_in
        data = {
            "access_token": self.tokens.issue(pair[0], scopes, ttl),
            "token_type": "Bearer",
            "expires_in": math.ceil(ttl) if said is None else said,
        }
        return self._envelope(201, "access token created", data)

    def _accounts(self, request: Request) -> Response:
        return self._envelope(200, "accounts", [{"id": "acc_sandbox"}])

    def _get_invite(self, request: Request) -> Response:
        invite, etag = self.store.get_tagged(request.invite_id)
        return self._envelope(200, "invite", invite, {"ETag": etag} if self.options.etags else {})

    def _update_invite(self, request: Request) -> Response:
        """The invite updated with a PATCH's body, refused (400) unless it is an object the
        invite schema allows."""
        try:
            changes = json.loads(request.body.decode("utf-8")) if request.body else None
        except (UnicodeDecodeError, ValueError):
            raise Refused(400, "body is not valid JSON") from None
        if not isinstance(changes, dict):
            raise Refused(400, "body must be a JSON object")
        problems = {
            ".".join(str(p) for p in e.absolute_path) or "body": e.message
            for e in self._patch_validator.iter_errors(changes)
        }
        if problems:
            raise Refused(400, "invalid invite update", problems)
        stored = {
            name: normalized(value, name) if self.options.normalize else value
            for name, value in changes.items()
            if name not in self.options.ignore  # answered 200 all the same
        }
        if_match = request.headers.get("If-Match") if self.options.etags else None
        invite = self.store.update(request.invite_id, stored, if_match)
        return self._envelope(200, "invite updated", invite if self.options.patch_data else None)

    def _resend_invite(self, request: Request) -> Response:
        return self._envelope(200, "invitation re-sent", self.store.resend(request.invite_id))

    def _envelope(
        self, status: int, message: str, data: Any, headers: dict[str, str] | None = None
    ) -> Response:
        body = {
            "status": status,
            "success": status < 400,
            "message": message,
            "data": data,
            "metadata": {"requestId": str(next(self._request_ids)), "timestamp": now_iso()},
            "details": {"hint": STATUS_HINTS.get(status, "")},
        }
        encoded = json.dumps(body, ensure_ascii=False).encode("utf-8")
        return Response(
            status, encoded, {"Content-Type": "application/json; charset=utf-8", **(headers or {})}
        )


# (method, path: an invite's as `{id}`) -> (scope the token needs, or "" for none; the endpoint)
ROUTES: dict[tuple[str, str], tuple[str, Handler]] = {
    ("POST", "/oauth/token"): ("", SandboxApp._issue_token),
    ("GET", "/public-api/v1/accounts"): (READ_SCOPE, SandboxApp._accounts),
    ("GET", INVITES_PREFIX + "{id}"): (READ_SCOPE, SandboxApp._get_invite),
    ("PATCH", INVITES_PREFIX + "{id}"): (WRITE_SCOPE, SandboxApp._update_invite),
    ("POST", INVITES_PREFIX + "{id}/resend"): (WRITE_SCOPE, SandboxApp._resend_invite),
}


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


class TokenBucket:
    """A rate limit: ``burst`` requests at once, then ``rate`` per second. The platform's
    own has a second's worth of burst; a gateway's, nginx's `limit_req` with no burst, a
    burst of 1: a steady rate, every early request refused. Refused requests take nothing
    (nginx only moves its clock on a request it lets through), so a client that keeps
    knocking is not punished beyond its refusals."""

    def __init__(self, rate: float, burst: float) -> None:
        self.rate, self.capacity, self.tokens = rate, burst, burst
        self.updated = time.monotonic()
        self.lock = threading.Lock()

    def take(self) -> float:
        """0 if let through, else the seconds until a request would be."""
        with self.lock:
            now = time.monotonic()
            self.tokens = min(self.capacity, self.tokens + (now - self.updated) * self.rate)
            self.updated = now
            if self.tokens >= 1:
                self.tokens -= 1
                return 0.0
            return (1 - self.tokens) / self.rate


# The HTTP server.

_MAX_BODY = 1024 * 1024
# How often the accept loop looks for a stop request: stop() waits up to this long
# (http.server's 0.5 s, times hundreds of sandboxes, was a minute of the test suite).
_POLL_SECONDS = 0.02


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    # Buffered: the status line, headers and body are flushed together after the
    # handler returns (answers are a few KiB; this holds any of them whole).
    wbufsize = 64 * 1024
    server: Sandbox

    def log_message(self, format: str, *args: Any) -> None:
        pass  # a request log would mostly measure the terminal

    def _serve(self) -> None:
        said = (self.headers.get("Content-Length") or "0").strip(" \t")  # RFC 9110: OWS
        length = -1
        if said.isascii() and said.isdigit():  # not int(): it reads `+5`, `٥`, `1_0`
            length = int(said) if len(said) <= 12 else _MAX_BODY + 1  # no 5,000-digit int
        if length < 0 or length > _MAX_BODY:
            # The body is not read, so the connection cannot carry another request.
            response = Response(400 if length < 0 else 413, b"", {"Connection": "close"})
        else:
            body = self.rfile.read(length) if length else b""
            response = self.server.app.handle(self.command, self.path, self.headers, body)
        if response is DROP:
            self.close_connection = True
            with contextlib.suppress(OSError):
                self.connection.shutdown(socket.SHUT_RDWR)
            return
        self.send_response(response.status)
        for name, value in response.headers.items():
            self.send_header(name, value)  # "Connection: close" also ends the connection
        if self.close_connection and "Connection" not in response.headers:
            self.send_header("Connection", "close")  # the client asked to close
        self.send_header("Content-Length", str(len(response.body)))
        self.end_headers()
        self.wfile.write(response.body)

    do_GET = do_POST = do_PATCH = do_PUT = do_DELETE = _serve


class Sandbox(ThreadingHTTPServer):
    """The sandbox API on a loopback port, started in a background thread.

    >>> with Sandbox(options=SandboxOptions(latency=0.05)) as sandbox:
    ...     sandbox.url
    """

    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128

    def __init__(
        self,
        invites: list[dict[str, Any]] | None = None,
        *,
        state_file: str | Path | None = None,
        options: SandboxOptions | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        if invites is None:
            invites = load_state_file(state_file)
        self.app = SandboxApp(invites, options or SandboxOptions())
        self.store, self.stats, self.options = self.app.store, self.app.stats, self.app.options
        self._thread: threading.Thread | None = None
        try:
            super().__init__((host, port), _Handler)
        except OSError as exc:
            raise ReconcilerError(
                f"the sandbox cannot listen on {host}:{port}: {exc.strerror}; "
                "pass --port N, or --port 0 for any free port"
            ) from None

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A gateway closing its idle connections to us with a reset (HAProxy does, when it
        # stops) is no fault of the sandbox's: no traceback on stderr for it.
        if not isinstance(sys.exc_info()[1], ConnectionResetError):
            super().handle_error(request, client_address)

    @property
    def url(self) -> str:
        host, port = str(self.server_address[0]), self.server_address[1]
        return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"

    def client_env(self) -> dict[str, str]:
        """The RECONCILER_* variables that point the CLI at this sandbox."""
        return {
            "RECONCILER_BASE_URL": self.url,
            "RECONCILER_CLIENT_ID": SANDBOX_CLIENT_ID,
            "RECONCILER_CLIENT_SECRET": SANDBOX_CLIENT_SECRET,
        }

    def start(self) -> Sandbox:
        self._thread = threading.Thread(target=self.serve_forever, name="sandbox", daemon=True)
        self._thread.start()
        return self

    def serve_forever(self, poll_interval: float = _POLL_SECONDS) -> None:
        super().serve_forever(poll_interval)

    def stop(self) -> None:
        if self._thread is not None:
            self.shutdown()
            self._thread.join()
            self._thread = None
        self.server_close()

    def __enter__(self) -> Sandbox:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
