"""The sandbox's invites: loaded from YAML or JSON, kept in memory, thread-safe."""

from __future__ import annotations

import copy
import hashlib
import json
import threading
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

from reconciler.errors import ReconcilerError
from reconciler.files import TooLarge, read_regular
from reconciler.sandbox.refusals import NotFound, NotPending, PreconditionFailed

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
    return invites


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
