"""The sandbox's invites: loaded from YAML or JSON, kept in memory, thread-safe."""

from __future__ import annotations

import copy
import json
import threading
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

from reconciler.errors import ReconcilerError

_DEFAULT_STATE = Path(__file__).with_name("state.yaml")


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def load_state_file(path: str | Path | None) -> list[dict[str, Any]]:
    """Invites from a state file: a list, or a mapping with an `invites` list."""
    file = Path(path) if path else _DEFAULT_STATE
    try:
        text = file.read_text(encoding="utf-8")
        data = json.loads(text) if file.suffix == ".json" else yaml.safe_load(text)
    except (OSError, UnicodeDecodeError, ValueError, yaml.YAMLError) as exc:
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

    def get(self, invite_id: str) -> dict[str, Any] | None:
        with self._lock:
            invite = self._invites.get(invite_id)
            return copy.deepcopy(invite) if invite is not None else None

    def put(self, invite: dict[str, Any]) -> None:
        """Add or replace an invite (tests use this to change the server behind a plan)."""
        with self._lock:
            record = copy.deepcopy(invite)
            record.setdefault("status", "pending")
            self._invites[record["id"]] = record

    def _pending(self, invite_id: str) -> tuple[dict[str, Any] | None, str]:
        """The stored invite if it may change, else None and why. Hold the lock."""
        invite = self._invites.get(invite_id)
        if invite is None:
            return None, "missing"
        if invite.get("status") != "pending":
            return None, "not-pending"
        return invite, ""

    def update(self, invite_id: str, changes: dict[str, Any]) -> tuple[dict[str, Any] | None, str]:
        """The updated invite, or None and why ("missing" or "not-pending")."""
        with self._lock:
            invite, why = self._pending(invite_id)
            if invite is None:
                return None, why
            invite.update(copy.deepcopy(changes))
            invite["updatedAt"] = now_iso()
            return copy.deepcopy(invite), ""

    def resend(self, invite_id: str) -> tuple[dict[str, Any] | None, str]:
        with self._lock:
            invite, why = self._pending(invite_id)
            if invite is None:
                return None, why
            self.resends[invite_id] += 1
            invite["lastSentAt"] = now_iso()
            return {"id": invite_id, "lastSentAt": invite["lastSentAt"]}, ""

    def snapshot(self) -> dict[str, dict[str, Any]]:
        with self._lock:
            return copy.deepcopy(self._invites)
