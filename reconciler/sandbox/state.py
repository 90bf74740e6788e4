"""What the sandbox holds: its invites (loaded from YAML or JSON, kept in memory,
thread-safe), the tokens it issued (HS256 JWT-form, signed with a key made fresh for each
sandbox), and what it saw (each request with its status and arrival time)."""

from __future__ import annotations

import base64
import copy
import hashlib
import hmac
import json
import secrets
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, NamedTuple

import yaml

from reconciler.errors import ReconcilerError
from reconciler.files import TooLarge, read_regular
from reconciler.sandbox.wire import NotFound, NotPending, PreconditionFailed

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
    data = _read_state(file)
    invites = data.get("invites") if isinstance(data, dict) else data
    if not isinstance(invites, list) or not all(
        isinstance(i, dict) and isinstance(i.get("id"), str) for i in invites
    ):
        raise ReconcilerError(f"{file}: sandbox state must be a list of invites, each with an id")
    return invites


def _read_state(file: Path) -> Any:
    try:
        text = read_regular(file, MAX_STATE_BYTES).decode("utf-8")
        return json.loads(text) if file.suffix == ".json" else yaml.safe_load(text)
    except OSError as exc:
        raise ReconcilerError(f"{file}: cannot load sandbox state: {exc.strerror}") from None
    except TooLarge:
        raise ReconcilerError(
            f"{file}: cannot load sandbox state: larger than {MAX_STATE_BYTES:,} bytes"
        ) from None
    except (UnicodeDecodeError, ValueError, yaml.YAMLError) as exc:
        raise ReconcilerError(f"{file}: cannot load sandbox state: {exc}") from None


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
        """A copy of the invite; NotFound if there is none."""
        with self._lock:
            return copy.deepcopy(self._stored(invite_id))

    def get_tagged(self, invite_id: str) -> tuple[dict[str, Any], str]:
        """A copy of the invite and its ETag, read together."""
        with self._lock:
            invite = self._stored(invite_id)
            return copy.deepcopy(invite), etag_of(invite)

    def put(self, invite: dict[str, Any]) -> None:
        """Add or replace an invite (tests use this to change the server behind a plan)."""
        with self._lock:
            record = copy.deepcopy(invite)
            record.setdefault("status", "pending")
            self._invites[record["id"]] = record

    def _stored(self, invite_id: str) -> dict[str, Any]:
        invite = self._invites.get(invite_id)
        if invite is None:
            raise NotFound(f"invite {invite_id} not found")
        return invite

    def _pending(self, invite_id: str) -> dict[str, Any]:
        """The stored invite, if it may change. Hold the lock."""
        invite = self._stored(invite_id)
        if str(invite.get("status")).casefold() != "pending":  # as the client reads it
            raise NotPending(f"invite {invite_id} is not pending")
        return invite

    def update(
        self, invite_id: str, changes: dict[str, Any], if_match: str | None = None
    ) -> dict[str, Any]:
        """The invite with ``changes`` applied; NotFound or NotPending if it cannot change,
        PreconditionFailed if ``if_match`` is given and is not its ETag."""
        with self._lock:
            invite = self._pending(invite_id)
            if if_match is not None and if_match != etag_of(invite):
                raise PreconditionFailed(f"invite {invite_id} changed since it was read")
            invite.update(copy.deepcopy(changes))
            invite["updatedAt"] = now_iso()
            return copy.deepcopy(invite)

    def resend(self, invite_id: str) -> dict[str, Any]:
        """Re-send the invitation; NotFound or NotPending as for ``update``."""
        with self._lock:
            invite = self._pending(invite_id)
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
