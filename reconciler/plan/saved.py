"""Saved plans: written and signed by `plan --out`, applied exactly by `apply --plan`.

Reading one trusts nothing in it: its size and nesting are bounded before
parsing, it must match schemas/plan.schema.json, name each invite once, and
carry a signature made with this run's client secret (reconciler.plan.signature).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import replace
from functools import cache
from typing import Any, NamedTuple

from jsonschema import Draft202012Validator

from reconciler.api.client import CurrentInvite
from reconciler.api.concurrency import ordered_map
from reconciler.api.limiter import Limiter
from reconciler.errors import ReconcilerError
from reconciler.invite import values_equal
from reconciler.model.outcome import Failed, NotRun
from reconciler.output.common import show
from reconciler.output.json import JsonRenderer
from reconciler.plan.boundedjson import loads_bounded, read_bounded_text
from reconciler.plan.changes import InviteChange
from reconciler.plan.model import FORMAT_VERSION, READABLE_FORMAT_VERSIONS, Plan
from reconciler.plan.signature import SignatureCheck, check, signature_for
from reconciler.resources import resource_path
from reconciler.safefile import write_text_replacing
from reconciler.safetext import REDACTED, clean, escape, redact_strings
from reconciler.stop import Stop

MAX_PLAN_BYTES = 128 * 1024 * 1024  # some 200,000 changes; a real plan is far smaller
MAX_PLAN_DEPTH = 64  # a plan nests about 6 deep; a server's odd values get room to spare
_WHAT = "a plan file"
_NEW_PLAN = "Make and review a new plan with `reconcile plan --out FILE`."


def sign_plan(plan: Plan, secret: str) -> None:
    """Sign ``plan`` with a key derived from ``secret``; the key is never kept."""
    plan.signature = signature_for(plan.document_parts(), secret)


def save_plan(plan: Plan, path: str) -> None:
    """Write atomically, so a reviewer never sees half a plan; never over a device or FIFO."""
    chunks = _readable_size(JsonRenderer().chunks(plan), path)
    write_text_replacing(path, chunks, "plan file", private=True)


def _readable_size(chunks: Iterable[str], path: str) -> Iterator[str]:
    """``chunks``, refused before the file is replaced once they pass what a reader reads."""
    size = 0
    for chunk in chunks:
        size += len(chunk.encode("utf-8", "surrogatepass"))
        if size > MAX_PLAN_BYTES:
            raise ReconcilerError(
                f"{escape(path)}: plan not saved: it is over {MAX_PLAN_BYTES // 2**20} MiB, "
                "more than `apply --plan` and `show` read; plan fewer invites at a time "
                "(--target, --changed-since, or one folder of files per run)"
            )
        yield chunk


@cache
def _validator() -> Draft202012Validator:
    schema = json.loads(resource_path("schemas/plan.schema.json").read_text(encoding="utf-8"))
    return Draft202012Validator(schema)


def read_plan_document(path: str) -> dict[str, Any]:
    """The plan file's document, checked for everything but its signature."""
    text = read_bounded_text(path, MAX_PLAN_BYTES, _WHAT)
    document = loads_bounded(text, path, MAX_PLAN_DEPTH, _WHAT)
    _check_version(document, path)
    errors = sorted(_validator().iter_errors(document), key=lambda e: _sortable(e.absolute_path))
    error = errors[0] if errors else None
    if error is not None:
        where = "/".join(str(p) for p in error.absolute_path) or "top level"
        raise ReconcilerError(
            f"{escape(path)}: not a plan file saved by `reconcile plan --out` "
            f"({clean(where)}: {clean(error.message[:300])})"
        )
    _check_consistent(document, path)
    _check_each_invite_once(document, path)
    return document


def _sortable(path: Any) -> list[tuple[int, str]]:
    # Indexes and keys side by side: compare them as text, indexes padded to sort as numbers.
    return [(0, f"{p:012d}") if isinstance(p, int) else (1, str(p)) for p in path]


def _check_version(document: Any, path: str) -> None:
    if isinstance(document, dict) and isinstance(document.get("format_version"), int):
        version = document["format_version"]
        if version not in READABLE_FORMAT_VERSIONS:
            raise ReconcilerError(
                f"{escape(path)}: plan format_version {version} is not supported by this "
                f"reconcile (it reads version {FORMAT_VERSION}); make the plan with the same "
                "version of the tool"
            )


def _check_consistent(document: dict[str, Any], path: str) -> None:
    for index, change in enumerate(document["changes"]):
        named = set(change["patch"])
        if (
            change["after"] != change["patch"]
            or set(change["before"]) != named
            or not set(change.get("conflicts", {})) <= named
        ):
            raise ReconcilerError(
                f"{escape(path)}: changes/{index} ({change['id']}): `before`, `after` and "
                "`patch` do not name the same values; the file was edited by hand or is "
                f"damaged. {_NEW_PLAN}"
            )


def _check_each_invite_once(document: dict[str, Any], path: str) -> None:
    # Whatever the signature says: applying one invite twice would re-send it twice.
    named = Counter(
        entry["id"]
        for key in ("changes", "not_updatable", "errors")
        for entry in document.get(key, [])
    )
    repeated = sorted(invite_id for invite_id, count in named.items() if count > 1)
    if repeated:
        raise ReconcilerError(
            f"{escape(path)}: refusing the plan, nothing was changed: it names "
            f"{clean(', '.join(repeated[:10]))} more than once, which `reconcile plan` never "
            f"does. {_NEW_PLAN}"
        )


def load_plan(path: str) -> Plan:
    """The saved plan, signature not checked (for `show`; apply uses load_signed_plan)."""
    return Plan.from_document(read_plan_document(path))


def load_signed_plan(path: str, secret: str | None) -> Plan:
    """The saved plan, refused unless its signature verifies with ``secret``."""
    document = read_plan_document(path)
    if not secret:
        raise ReconcilerError(
            f"{escape(path)}: cannot check the plan's signature: no client secret is set "
            "(RECONCILER_CLIENT_SECRET); nothing was changed"
        )
    outcome = check(document, secret)
    if outcome == SignatureCheck.UNSIGNED:
        raise ReconcilerError(
            f"{escape(path)}: refusing the plan, nothing was changed: it is not signed "
            f"(format_version {document['format_version']}). {_NEW_PLAN}"
        )
    if outcome != SignatureCheck.VALID:
        raise ReconcilerError(
            f"{escape(path)}: refusing the plan, nothing was changed: its signature does not "
            "verify with this client secret: the plan was altered, or made with another "
            f"credential. {_NEW_PLAN}"
        )
    return Plan.from_document(document)


class SavedPlanState(NamedTuple):
    """Where the server stands against a saved plan, change by change."""

    drift: list[str]  # every reason the plan no longer holds; empty when it may be applied
    done: frozenset[str]  # ids of changes whose fields all hold their `after` already


def saved_plan_state(
    plan: Plan,
    base_url: str,
    read: Callable[[str], CurrentInvite],
    parallelism: int | Limiter,
    stop: Stop | None = None,
) -> SavedPlanState:
    """Re-read every invite of the plan: each change is to do, done, or stale.

    A change whose fields all hold `before` is to do; all `after`, it is done (a re-run
    of an apply that made it: nothing is sent again); anything else is drift, and one
    drifted change refuses the whole plan.

    Values are compared as they are, never redacted, except where the plan itself
    shows a server's value redacted (it held the secret or a token). When nothing
    has drifted, each change's object fields get back the server's sub-fields the
    plan shows redacted (``_with_server_values``): apply sends what the server
    holds, never the word ``[redacted]``.
    """
    if plan.base_url.rstrip("/") != base_url.rstrip("/"):
        drift = [f"the plan was made against {plan.base_url}, but this run talks to {base_url}"]
        return SavedPlanState(drift, frozenset())
    drift = []
    done = set()
    by_id = {change.id: change for change in plan.changes}
    restored: dict[str, InviteChange] = {}
    for invite_id, outcome in ordered_map(read, list(by_id), parallelism, stop):
        change = by_id[invite_id]
        where = f"{invite_id} ({clean(change.source)})"
        if isinstance(outcome, NotRun):
            raise ReconcilerError("interrupted while checking the plan; nothing was changed")
        if isinstance(outcome, Failed):
            drift.append(f"{where}: cannot re-read it: {clean(str(outcome.error))}")
            continue
        current = outcome.value
        if all(
            _still_holds(name, value, current.fields.get(name))
            for name, value in change.patch.items()
        ):
            done.add(invite_id)  # applied already, whatever its status has become since
            continue
        if not current.is_pending:
            drift.append(f"{where}: is now {clean(str(current.status))}, not pending")
        moved = False
        for name, planned in change.before.items():
            now = current.fields.get(name)
            if not _still_holds(name, planned, now):
                moved = True
                drift.append(
                    f"{where}: `{name}` was {show(planned)} when planned, "
                    f"is now {show(redact_strings(now))}"
                    + _not_after(change.patch[name], now, name)
                )
        if not moved:
            restored[invite_id] = _with_server_values(change, current)
    if not drift:
        plan.changes = [restored.get(change.id, change) for change in plan.changes]
    return SavedPlanState(drift, frozenset(done))


def _still_holds(name: str, planned: Any, now: Any) -> bool:
    if values_equal(name, planned, now):
        return True
    # Saved, the server's value is shown redacted where it held the secret or a token.
    return _mentions(planned, REDACTED) and values_equal(name, planned, redact_strings(now))


def _mentions(value: Any, word: str) -> bool:
    if isinstance(value, str):
        return word in value
    if isinstance(value, dict):
        return any(_mentions(v, word) for v in value.values())
    if isinstance(value, list):
        return any(_mentions(v, word) for v in value)
    return False


def _with_server_values(change: InviteChange, current: CurrentInvite) -> InviteChange:
    """``change`` with the server's values taken from ``current``, the copy just read,
    which the plan's ``before`` was found to match: ``before`` itself, and its objects'
    server-held sub-fields (see ``InviteChange.shown``). Shown, they are redacted again."""
    before = {name: current.fields.get(name) for name in change.before}
    patch = dict(change.patch)
    for name, value in change.patch.items():
        held, was = current.fields.get(name), change.before.get(name)
        if isinstance(value, dict) and isinstance(held, dict) and isinstance(was, dict):
            # The server's object as it is now, and over it what the files change: the
            # sub-fields whose planned value differs from the server's.
            changed = {k: v for k, v in value.items() if k not in was or was[k] != v}
            patch[name] = {**held, **changed}
    return replace(change, before=before, patch=patch)


def _not_after(after: Any, now: Any, name: str) -> str:
    """A field already at `after` beside others that are not: the plan was half applied by hand."""
    return " (which the plan would write)" if values_equal(name, after, now) else ""


def find_drift(
    plan: Plan,
    base_url: str,
    read: Callable[[str], CurrentInvite],
    parallelism: int | Limiter,
    stop: Stop | None = None,
) -> list[str]:
    """Every reason the plan no longer holds; empty when it is safe to apply."""
    return saved_plan_state(plan, base_url, read, parallelism, stop).drift
