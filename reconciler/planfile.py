"""Saved plans: written by `plan --out`, applied exactly by `apply --plan`."""

from __future__ import annotations

import json
import os
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator

from reconciler.api.client import CurrentInvite
from reconciler.compare import values_equal
from reconciler.concurrency import ordered_map
from reconciler.errors import ReconcilerError
from reconciler.plan import Plan
from reconciler.render.json import JsonRenderer
from reconciler.resources import resource_path
from reconciler.schema import load_schema


def save_plan(plan: Plan, path: str) -> None:
    """Write atomically, so a reviewer never sees half a plan."""
    target = Path(path)
    directory = target.parent if str(target.parent) else Path(".")
    try:
        fd, tmp = tempfile.mkstemp(prefix=".plan-", suffix=".json", dir=directory)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(JsonRenderer().render(plan))
        os.replace(tmp, target)
    except OSError as exc:
        raise ReconcilerError(f"{path}: cannot write plan file: {exc.strerror}") from None


def load_plan(path: str) -> Plan:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ReconcilerError(f"{path}: cannot read plan file: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise ReconcilerError(f"{path}: not a plan file (not UTF-8 text)") from None
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ReconcilerError(
            f"{path}:{exc.lineno}:{exc.colno}: not a plan file (invalid JSON: {exc.msg}); "
            "save one with `reconcile plan --out FILE`"
        ) from None
    except (ValueError, RecursionError) as exc:  # absurd numbers, absurd nesting
        raise ReconcilerError(f"{path}: not a plan file ({type(exc).__name__})") from None
    if isinstance(document, dict) and isinstance(document.get("format_version"), int):
        version = document["format_version"]
        if version != 1:
            raise ReconcilerError(
                f"{path}: plan format_version {version} is not supported by this reconcile "
                "(it reads version 1); make the plan with the same version of the tool"
            )
    validator = Draft202012Validator(load_schema(resource_path("schemas/plan.schema.json")))
    error = next(iter(sorted(validator.iter_errors(document), key=lambda e: e.path)), None)
    if error is not None:
        where = "/".join(str(p) for p in error.absolute_path) or "top level"
        raise ReconcilerError(
            f"{path}: not a plan file saved by `reconcile plan --out` ({where}: {error.message})"
        )
    for index, change in enumerate(document["changes"]):
        if change["after"] != change["patch"] or set(change["before"]) != set(change["patch"]):
            raise ReconcilerError(
                f"{path}: changes/{index} ({change['id']}): `before`, `after` and `patch` do "
                "not name the same values; the file was edited by hand or is damaged. "
                "Make and review a new plan."
            )
    return Plan.from_document(document)


def find_drift(
    plan: Plan,
    base_url: str,
    read: Callable[[str], CurrentInvite],
    parallelism: int,
    stop: threading.Event | None = None,
) -> list[str]:
    """Every reason the plan no longer holds; empty when it is safe to apply."""
    if plan.base_url.rstrip("/") != base_url.rstrip("/"):
        return [f"the plan was made against {plan.base_url}, but this run talks to {base_url}"]
    drift = []
    ids = [change.id for change in plan.changes]
    by_id = {change.id: change for change in plan.changes}
    for invite_id, outcome in ordered_map(read, ids, parallelism, stop):
        change = by_id[invite_id]
        if not outcome.ran:
            raise ReconcilerError("interrupted while checking the plan; nothing was changed")
        if outcome.error is not None:
            drift.append(f"{invite_id} ({change.source}): cannot re-read it: {outcome.error}")
            continue
        current = outcome.value
        assert current is not None
        if not current.is_pending:
            drift.append(f"{invite_id} ({change.source}): is now {current.status}, not pending")
        for name, planned in change.before.items():
            now = current.fields.get(name)
            if not values_equal(name, planned, now):
                drift.append(
                    f"{invite_id} ({change.source}): `{name}` was {_show(planned)} "
                    f"when planned, is now {_show(now)}"
                )
    return drift


def _show(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)
