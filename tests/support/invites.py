"""Invites for end-to-end runs: one the sandbox serves (ACME), its desired entry, a file of them,
and an estate of ACME's copies."""

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


def acme_estate(
    directory: Path, count: int, changed: int, name: str | None = "Firma {} GmbH", **change: Any
) -> list[dict[str, Any]]:
    """``count`` copies of ACME (inv_000, inv_001, ...) for the sandbox, their entries written
    under ``directory``: the first ``changed`` get a new e-mail, new0@acme.example, ... (and
    ``change``)."""
    state, entries = [], []
    for i in range(count):
        invite = dict(ACME, id=f"inv_{i:03d}", **({"name": name.format(i)} if name else {}))
        new = {"email": f"new{i}@acme.example", **change} if i < changed else {}
        state.append(invite)
        entries.append(desired_entry(invite, **new))
    write_invites(directory, entries)
    return state
