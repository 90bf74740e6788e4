"""The audit log: one JSON line per write attempted, flushed as each completes."""

from __future__ import annotations

import json
import os
import threading
from datetime import UTC, datetime
from typing import Any

from reconciler.errors import ReconcilerError


class AuditLog:
    def __init__(self, path: str, client_id: str | None, plan_hash: str | None = None) -> None:
        self.path = path
        self._client_id = client_id
        self._plan_hash = plan_hash
        self._lock = threading.Lock()
        try:
            self._file = open(path, "a", encoding="utf-8")  # noqa: SIM115 - closed in close()
        except OSError as exc:
            raise ReconcilerError(f"{path}: cannot open audit log: {exc.strerror}") from None

    def record(
        self,
        *,
        invite_id: str,
        operation: str,
        outcome: str,
        fields: dict[str, dict[str, Any]] | None = None,
        status: int | None = None,
        request_id: str | None = None,
        message: str | None = None,
    ) -> None:
        entry = {
            "time": datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z"),
            "invite_id": invite_id,
            "operation": operation,
            "fields": fields or {},
            "outcome": outcome,
            "http_status": status,
            "request_id": request_id,
            "client_id": self._client_id,
            "plan_hash": self._plan_hash,  # None for writes made by hand (`resend`)
        }
        if message:
            entry["message"] = message
        line = json.dumps(entry, ensure_ascii=False) + "\n"
        with self._lock:
            self._file.write(line)
            self._file.flush()
            # On disk before the next write starts: a crash loses nothing already done.
            os.fsync(self._file.fileno())

    def close(self) -> None:
        self._file.close()
