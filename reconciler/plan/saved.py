"""The plan file: written and signed by `plan --out`, read back by `apply --plan` and `show`.

Its writer and its reader, together, so that what one writes the other reads: each
record's JSON form (schemas/plan.schema.json), the entry's place as the
``"path:line"`` text cli.md shows, the document a record at a time
(``streamedjson``), the signature (``signature``). Reading one trusts nothing in
it: its size and nesting are bounded before parsing, it must match the schema,
name each invite once, and carry a signature
made with this run's client secret. Whether the server still matches a saved
plan is apply's question (``reconciler.apply.recheck``).
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Iterable, Iterator
from functools import cache
from typing import Any

from jsonschema import Draft202012Validator

from reconciler.errors import ReconcilerError
from reconciler.plan.boundedjson import loads_bounded, read_bounded_text
from reconciler.plan.changes import FailedInvite, InviteChange, NotUpdatable, OutsideChange
from reconciler.plan.model import FORMAT_VERSION, Plan
from reconciler.plan.signature import SignatureCheck, check, signature_for
from reconciler.plan.streamedjson import document_chunks
from reconciler.resources import resource_path
from reconciler.safefile import write_text_replacing
from reconciler.safetext import clean, escape, redact_strings

READABLE_FORMAT_VERSIONS = (1, 2)  # a version 1 plan can be shown, never applied (unsigned)
MAX_PLAN_BYTES = 128 * 1024 * 1024  # some 200,000 changes; a real plan is far smaller
MAX_PLAN_DEPTH = 64  # a plan nests about 6 deep; a server's odd values get room to spare
_WHAT = "a plan file"
_NEW_PLAN = "Make and review a new plan with `reconcile plan --out FILE`."


# -- writing ---------------------------------------------------------------------------------


def document_parts(plan: Plan) -> list[tuple[str, Any]]:
    """The saved plan document, field by field, for writing or signing in pieces.

    ``changes``, ``not_updatable`` and ``errors`` are generators of records, made and
    redacted one at a time: a plan of 200,000 changes is never a second time in memory.
    A server can echo the secret or a token inside an invite's values; the document
    is what is signed, saved and printed, so no part the server said holds one (each
    record's ``shown``). What the files say is kept as written: apply sends it.
    """
    parts: list[tuple[str, Any]] = [
        ("format_version", plan.format_version),
        ("created_at", redact_strings(plan.created_at)),
        ("base_url", redact_strings(plan.base_url)),
        ("max_changes", plan.max_changes),
        ("max_resends", plan.max_resends),
        ("changes", (_change_json(c.shown()) for c in plan.changes)),
        ("not_updatable", (_not_updatable_json(n.shown()) for n in plan.not_updatable)),
        ("errors", (_failed_json(f.shown()) for f in plan.failed)),
        ("summary", _summary_json(plan)),
    ]
    if plan.changed_since is not None:  # only then: other plans read as they always have
        parts[-1:-1] = [
            ("changed_since", redact_strings(plan.changed_since)),
            ("out_of_scope", (_outside_json(o.shown()) for o in plan.outside_change)),
            ("not_read", plan.not_read),
        ]
    if plan.signature is not None:
        parts.append(("signature", redact_strings(plan.signature)))
    return parts


def to_document(plan: Plan) -> dict[str, Any]:
    """The saved plan document whole."""
    return {
        key: list(value) if isinstance(value, Iterator) else value
        for key, value in document_parts(plan)
    }


def plan_chunks(plan: Plan) -> Iterator[str]:
    """The plan file's text, a record at a time (also `plan --format json`)."""
    return document_chunks(document_parts(plan))


def plan_digest(plan: Plan) -> str:
    """A hash of what the plan would write, for the audit log."""
    writes = [[c.id, c.before, c.patch, c.resend] for c in plan.changes]
    canonical = json.dumps([plan.base_url, writes], sort_keys=True, ensure_ascii=False)
    # surrogatepass: a server can send a lone surrogate ("\ud800"); it is still hashed.
    return "sha256:" + hashlib.sha256(canonical.encode("utf-8", "surrogatepass")).hexdigest()


def sign_plan(plan: Plan, secret: str) -> None:
    """Sign ``plan`` with a key derived from ``secret``; the key is never kept."""
    plan.signature = signature_for(document_parts(plan), secret)


def save_plan(plan: Plan, path: str) -> None:
    """Write atomically, so a reviewer never sees half a plan; never over a device or FIFO."""
    chunks = _readable_size(plan_chunks(plan), path)
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


def _change_json(change: InviteChange) -> dict[str, Any]:
    record = {
        "id": change.id,
        "name": change.name,
        "source": change.source,
        "before": change.before,
        "after": change.after,
        "patch": change.patch,
        "resend": change.resend,
    }
    if change.resend:
        # Added within format_version 2: a reader that does not know it ignores it.
        record["recipient"] = change.recipient
    if change.conflicts:  # only then: a plan without conflicts reads as it always has
        record["conflicts"] = change.conflicts
    return record


def _outside_json(outside: OutsideChange) -> dict[str, Any]:
    return {
        "id": outside.id,
        "name": outside.name,
        "source": outside.source,
        "before": outside.before,
        "after": outside.after,
    }


def _not_updatable_json(invite: NotUpdatable) -> dict[str, Any]:
    return {
        "id": invite.id,
        "name": invite.name,
        "source": invite.source,
        "status": invite.status,
        "before": invite.before,
        "after": invite.after,
    }


def _failed_json(failed: FailedInvite) -> dict[str, Any]:
    return {
        "id": failed.id,
        "source": failed.source,
        "message": failed.message,
        "status": failed.status,
        "request_id": failed.request_id,
    }


def _summary_json(plan: Plan) -> dict[str, int]:
    summary = plan.summary
    # The saved plan's names (cli.md): a failed invite is an "error" there.
    counts = {
        "update": summary.update,
        "resend": summary.resend,
        "unchanged": summary.unchanged,
        "error": summary.failed,
    }
    if plan.changed_since is not None:
        counts["conflict"] = len(plan.conflicts)
        counts["out_of_scope"] = len(plan.outside_change)
        counts["not_read"] = plan.not_read or 0
    return counts


# -- reading ---------------------------------------------------------------------------------


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
        raise _not_saved(path, f"{clean(where)}: {clean(error.message[:300])}")
    _check_consistent(document, path)
    _check_each_invite_once(document, path)
    return document  # type: ignore[no-any-return]  # the schema says it is an object


def _not_saved(path: str, why: str) -> ReconcilerError:
    return ReconcilerError(
        f"{escape(path)}: not a plan file saved by `reconcile plan --out` ({why})"
    )


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
    return plan_from_document(read_plan_document(path))


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
    return plan_from_document(document)


def plan_from_document(document: dict[str, Any]) -> Plan:
    """A plan from a document ``read_plan_document`` has checked."""
    return Plan(
        base_url=document["base_url"],
        created_at=document["created_at"],
        max_changes=document.get("max_changes"),
        max_resends=document.get("max_resends"),
        unchanged=document["summary"]["unchanged"],
        changes=[_change(c) for c in document["changes"]],
        failed=[_failed(e) for e in document["errors"]],
        not_updatable=[_not_updatable(n) for n in document.get("not_updatable", [])],
        format_version=document["format_version"],
        signature=document.get("signature"),
        saved=True,
        changed_since=document.get("changed_since"),
        outside_change=[_outside(o) for o in document.get("out_of_scope", [])],
        not_read=document.get("not_read"),
    )


def _change(data: dict[str, Any]) -> InviteChange:
    patch = data["patch"]
    before = {k: data["before"].get(k) for k in patch}
    if "recipient" in data:
        recipient = data["recipient"] if isinstance(data["recipient"], str) else None
    else:  # saved before plans named the recipient: the updated address, if any
        email = patch.get("email")
        recipient = email if isinstance(email, str) else None
    return InviteChange(
        data["id"],
        data["source"],
        data.get("name"),
        before,
        patch,
        data["resend"],
        recipient=recipient if data["resend"] else None,
        conflicts=data.get("conflicts") or {},
    )


def _outside(data: dict[str, Any]) -> OutsideChange:
    keys = ("id", "source", "name", "before", "after")
    return OutsideChange(*(data.get(key) for key in keys))  # type: ignore[arg-type]


def _not_updatable(data: dict[str, Any]) -> NotUpdatable:
    keys = ("id", "source", "name", "status", "before", "after")
    return NotUpdatable(*(data.get(key) for key in keys))  # type: ignore[arg-type]


def _failed(data: dict[str, Any]) -> FailedInvite:
    keys = ("id", "source", "message", "status", "request_id")
    return FailedInvite(*(data.get(key) for key in keys))  # type: ignore[arg-type]
