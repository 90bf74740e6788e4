"""Invites for end-to-end runs: one the sandbox serves (ACME), its desired entry, a file of them."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml

ACME: dict[str, Any] = {
    "id": "inv_acme",
    "status": "pending",
    "name": "Acme Holdings Ltd",
    "email": "old@acme.example",
    "phone": "+442079460000",
    "primaryContact": {"name": "Jane Doe", "email": "jane@acme.example", "phone": "+442079460001"},
    "groups": ["emea", "enterprise"],
    "addOns": ["edd"],
    "attachments": ["proof-of-address"],
}


def desired_entry(invite: dict[str, Any], **changes: Any) -> dict[str, Any]:
    entry = {k: copy.deepcopy(v) for k, v in invite.items() if k not in ("status", "createdAt")}
    entry.update(changes)
    return entry


def write_invites(
    directory: Path, entries: list[dict[str, Any]], name: str = "invites.yaml"
) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    path.write_text(yaml.safe_dump({"invites": entries}, allow_unicode=True), encoding="utf-8")
    return path
