"""The plan file: written and signed by `plan --out`, read back by `apply --plan` and `show`.

Its writer and its reader, together, so that what one writes the other reads: each
record's JSON form (schemas/plan.schema.json), the entry's place as the
``"path:line"`` text cli.md shows, the document a record at a time, the
signature (one canonical form). Reading one trusts nothing in
it: its size and nesting are bounded before parsing, it must match the schema,
name each invite once, hold values its fields can hold, and carry a signature
made with this run's client secret. Whether the server still matches a saved
plan is apply's question (``reconciler.apply.applier``).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import sys
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from functools import cache
from typing import TYPE_CHECKING, Any, TypeVar

from reconciler.errors import ReconcilerError
from reconciler.files import TooLarge, invite_schema_path, read_regular, resource_path, write_output
from reconciler.model.invite import (
    Contact,
    Fields,
    FieldValue,
    HeldFields,
    JsonValue,
    SourceLocation,
    fields_json,
    kind_of,
)
from reconciler.plan.model import (
    FORMAT_VERSION,
    FailedInvite,
    InviteChange,
    NotUpdatable,
    OutsideChange,
    Plan,
    SetApart,
)
from reconciler.safetext import escape, escape_json_text, redact, redact_and_escape

if TYPE_CHECKING:
    from jsonschema import Draft202012Validator

READABLE_FORMAT_VERSIONS = (1, 2)  # a version 1 plan can be shown, never applied (unsigned)
MAX_PLAN_BYTES = 128 * 1024 * 1024  # some 200,000 changes; a real plan is far smaller
MAX_PLAN_DEPTH = 64  # a plan nests about 6 deep; a server's odd values get room to spare
_WHAT = "a plan file"
_NEW_PLAN = "Make and review a new plan with `reconcile plan --out FILE`."
_R = TypeVar("_R")


# -- writing ---------------------------------------------------------------------------------


def document_parts(plan: Plan) -> list[tuple[str, Any]]:
    """The saved plan document, field by field, for writing or signing in pieces.

    ``changes``, ``not_updatable`` and ``errors`` are generators of records, made and
    redacted one at a time: a plan of 200,000 changes is never a second time in memory.
    A server can echo the secret or a token inside an invite's values; the document
    is what is signed, saved and printed, so no part the server said holds one (each
    record's ``redacted``). What the files say is kept as written: apply sends it.
    """
    parts: list[tuple[str, Any]] = [
        ("format_version", plan.format_version),
        ("created_at", redact(plan.created_at)),
        ("base_url", redact(plan.base_url)),
        ("max_changes", plan.max_changes),
        ("max_resends", plan.max_resends),
        ("changes", (_change_json(c.redacted()) for c in plan.changes)),
        ("not_updatable", (_differing_json(n.redacted()) for n in plan.not_updatable)),
        ("errors", (_failed_json(f.redacted()) for f in plan.failed)),
        ("summary", _summary_json(plan)),
    ]
    if plan.invite_urls is not None:  # added within format_version 2, only when set
        parts.insert(3, ("invite_urls", {k: redact(v) for k, v in plan.invite_urls.items()}))
    if plan.changed_since is not None:  # only then: other plans read as they always have
        parts[-1:-1] = [
            ("changed_since", redact(plan.changed_since)),
            ("out_of_scope", (_differing_json(o.redacted()) for o in plan.outside_change)),
            ("not_read", plan.not_read),
        ]
    if plan.signature is not None:
        parts.append(("signature", redact(plan.signature)))
    return parts


def plan_chunks(plan: Plan) -> Iterator[str]:
    """The plan file's text, a record at a time (also `plan --format json`)."""
    return document_chunks(document_parts(plan))


def plan_digest(plan: Plan) -> str:
    """A hash of what the plan would write, for the audit log."""
    writes = [[c.id, fields_json(c.before), fields_json(c.patch), c.resend] for c in plan.changes]
    canonical = json.dumps([plan.base_url, writes], sort_keys=True, ensure_ascii=False)
    # surrogatepass: a server can send a lone surrogate ("\ud800"); it is still hashed.
    return "sha256:" + hashlib.sha256(canonical.encode("utf-8", "surrogatepass")).hexdigest()


def sign_plan(plan: Plan, secret: str) -> None:
    """Sign ``plan`` with a key derived from ``secret``; the key is never kept."""
    plan.signature = signature_for(document_parts(plan), secret)


def save_plan(plan: Plan, path: str) -> None:
    """Write atomically, so a reviewer never sees half a plan; never over a device or FIFO."""
    chunks = _readable_size(plan_chunks(plan), path)
    write_output(path, chunks, "plan file", private=True)


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


def _differing_json(invite: InviteChange | SetApart) -> dict[str, JsonValue]:
    # The source is cli.md's "path:line", shown as every message shows it (the path escaped).
    record: dict[str, JsonValue] = {"id": invite.id, "name": invite.name}
    record["source"] = str(invite.source)
    if isinstance(invite, NotUpdatable):
        record["status"] = invite.status
    record.update(before=fields_json(invite.before), after=fields_json(invite.after))
    return record


def _change_json(change: InviteChange) -> dict[str, JsonValue]:
    record = _differing_json(change)
    record.update(patch=fields_json(change.patch), resend=change.resend)
    if change.resend:
        # Added within format_version 2: a reader that does not know it ignores it.
        record["recipient"] = change.recipient
    if change.conflicts:  # only then: a plan without conflicts reads as it always has
        record["conflicts"] = fields_json(change.conflicts)
    # Added within format_version 2. With a contact patched, always (``{}`` when none is
    # kept): a reader takes a plan without it for an older one and works the kept ones out.
    if change.kept or any(isinstance(value, Contact) for value in change.patch.values()):
        record["kept"] = {name: list(subs) for name, subs in change.kept.items()}
    if change.resend and change.resend_on is not None:
        record["resend_on"] = list(change.resend_on)
    return record


def _failed_json(failed: FailedInvite) -> dict[str, JsonValue]:
    return {
        "id": failed.id,
        "source": None if failed.source is None else str(failed.source),
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
        # Counted apart from the updates in every plan (cli.md's example has it).
        "conflict": summary.conflict,
    }
    if plan.changed_since is not None:
        counts["out_of_scope"] = len(plan.outside_change)
        counts["not_read"] = plan.not_read or 0
    return counts


# -- reading ---------------------------------------------------------------------------------


@cache
def _validator() -> Draft202012Validator:
    # Imported here, not at start: jsonschema (about 70 ms of imports) is needed to read
    # a plan, never to write one.
    from jsonschema import Draft202012Validator
    from referencing import Registry, Resource

    schema = json.loads(resource_path("schemas/plan.schema.json").read_text(encoding="utf-8"))
    # The plan schema names the invite's fields by the invite schema's own list.
    invites = json.loads(invite_schema_path().read_text(encoding="utf-8"))
    registry: Registry[Any] = Registry().with_resource(
        invites["$id"], Resource.from_contents(invites)
    )
    return Draft202012Validator(schema, registry=registry)


def read_plan_document(path: str) -> dict[str, Any]:
    """The plan file's document, checked for everything but its signature."""
    text = read_bounded_text(path, MAX_PLAN_BYTES, _WHAT)
    document = loads_bounded(text, path, MAX_PLAN_DEPTH, _WHAT)
    _check_version(document, path)
    errors = _validator().iter_errors(document)
    error = min(errors, key=lambda e: _sortable(e.absolute_path), default=None)
    if error is not None:
        where = "/".join(str(p) for p in error.absolute_path) or "top level"
        raise _not_saved(
            path, f"{redact_and_escape(where)}: {redact_and_escape(error.message[:300])}"
        )
    _check_consistent(document, path)
    _check_each_invite_once(document, path)
    return document  # type: ignore[no-any-return]  # the schema says it is an object


def shown_document(value: Any) -> Any:
    """A plan document as `show` prints it: any secret of this run redacted in every text
    of it, names too (a hand-edited plan is text from outside, like a server's answer),
    but for the names the plan and invite schemas give, which `show` reads the plan by.
    Lists and objects are redacted in place: a plan of 200,000 changes is not copied."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, list):
        value[:] = map(shown_document, value)
    elif isinstance(value, dict):
        names = _schema_names()
        items = [
            (key if key in names else redact(key), shown_document(item))
            for key, item in value.items()
        ]
        value.clear()
        value.update(items)
    return value


@cache
def _schema_names() -> frozenset[str]:
    """Every property name the plan schema and the invite schema give."""
    names: set[str] = set()

    def collect(node: Any) -> None:
        if isinstance(node, dict):
            names.update(node.get("properties", {}))
            for item in node.values():
                collect(item)
        elif isinstance(node, list):
            for item in node:
                collect(item)

    for path in (resource_path("schemas/plan.schema.json"), invite_schema_path()):
        collect(json.loads(path.read_text(encoding="utf-8")))
    return frozenset(names)


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
            f"{redact_and_escape(', '.join(repeated[:10]))} more than once, which `reconcile plan` "
            f"never does. {_NEW_PLAN}"
        )


def load_signed_plan(path: str, secret: str | None) -> Plan:
    """The saved plan, refused unless its signature verifies with ``secret``."""
    document = read_plan_document(path)
    if not secret:
        raise ReconcilerError(
            f"{escape(path)}: cannot check the plan's signature: no client secret is set "
            "(RECONCILER_CLIENT_SECRET); nothing was changed"
        )
    outcome = check(document, secret)
    if outcome != SignatureCheck.VALID:
        why = (
            f"it is not signed (format_version {document['format_version']})"
            if outcome == SignatureCheck.UNSIGNED
            else "its signature does not verify with this client secret: the plan was "
            "altered, or made with another credential"
        )
        raise ReconcilerError(
            f"{escape(path)}: refusing the plan, nothing was changed: {why}. {_NEW_PLAN}"
        )
    return plan_from_document(document, path)


def plan_from_document(document: dict[str, Any], path: str) -> Plan:
    """A plan from a document ``read_plan_document`` has checked; ``path`` names it in errors."""

    def each(key: str, record: Callable[[dict[str, Any], str, str], _R]) -> list[_R]:
        # The records of the list ``key`` (none when a plan of its version has none).
        return [record(data, f"{key}/{i}", path) for i, data in enumerate(document.get(key, []))]

    return Plan(
        base_url=document["base_url"],
        created_at=document["created_at"],
        max_changes=document.get("max_changes"),
        max_resends=document.get("max_resends"),
        unchanged=document["summary"]["unchanged"],
        changes=each("changes", _change),
        failed=each("errors", _failed),
        not_updatable=each("not_updatable", _not_updatable),
        format_version=document["format_version"],
        signature=document.get("signature"),
        saved=True,
        changed_since=document.get("changed_since"),
        outside_change=each("out_of_scope", _outside),
        not_read=document.get("not_read"),
        invite_urls=document.get("invite_urls"),
    )


def _kept(data: dict[str, Any], patch: Fields, before: HeldFields) -> dict[str, tuple[str, ...]]:
    """The sub-fields each object field's PATCH carries from the platform: as saved, or in a
    plan saved before they were, those it carries at the platform's value. A saved one the
    PATCH changes is not kept (a kept one's stored otherwise is only noted)."""
    at_held = {
        name: subs
        for name, value in patch.items()
        if (subs := _at_held_value(value, before.get(name)))
    }
    if "kept" not in data:
        return at_held
    kept = {
        name: tuple(s for s in subs if s in at_held.get(name, ()))
        for name, subs in data["kept"].items()
    }
    return {name: subs for name, subs in kept.items() if subs}


def _at_held_value(value: object, held: object) -> tuple[str, ...]:
    """The sub-fields of ``value`` that ``held`` holds at the same value (objects only)."""
    if not isinstance(value, Contact) or not isinstance(held, Contact):
        return ()
    return tuple(k for k, v in value.items() if k in held and held[k] == v and v is not None)


# A saved source: cli.md's "path:line"; any other text is kept whole, with no line.
_SOURCE = re.compile(r"(.+):([1-9][0-9]*)", re.DOTALL)


def _source(text: str) -> SourceLocation:
    match = _SOURCE.fullmatch(text)
    return SourceLocation(text, 0) if match is None else SourceLocation(match[1], int(match[2]))


def _change(data: dict[str, Any], where: str, path: str) -> InviteChange:
    patch = _fields(data["patch"], f"{where}/patch", path)
    before = _held(data["before"], f"{where}/before", path, patch)
    resend = data["resend"]
    # Saved before plans named the recipient: the updated address, if any.
    recipient = data["recipient"] if "recipient" in data else patch.get("email")
    return InviteChange(
        data["id"],
        _source(data["source"]),
        data.get("name"),
        before,
        patch,
        resend,
        recipient=recipient if resend and isinstance(recipient, str) else None,
        conflicts=_fields(data.get("conflicts") or {}, f"{where}/conflicts", path),
        kept=_kept(data, patch, before),
        resend_on=tuple(data["resend_on"]) if resend and "resend_on" in data else None,
    )


def _outside(data: dict[str, Any], where: str, path: str) -> OutsideChange:
    after = _fields(data["after"], f"{where}/after", path)
    before = _held(data["before"], f"{where}/before", path, after)
    return OutsideChange(data["id"], _source(data["source"]), data.get("name"), before, after)


def _not_updatable(data: dict[str, Any], where: str, path: str) -> NotUpdatable:
    got = _outside(data, where, path)  # the same record, with a status
    return NotUpdatable(got.id, got.source, got.name, got.before, got.after, data["status"])


def _failed(data: dict[str, Any], where: str, path: str) -> FailedInvite:
    source, status, request_id = _source(data["source"]), data.get("status"), data.get("request_id")
    return FailedInvite(data["id"], source, data["message"], status, request_id)


def _fields(raw: Mapping[str, Any], where: str, path: str) -> Fields:
    """Values the files gave (the schema has named only fields)."""
    return {name: _value(name, value, where, path) for name, value in raw.items()}


def _held(raw: Mapping[str, Any], where: str, path: str, named: Mapping[str, object]) -> HeldFields:
    """The server's values of the fields ``named`` (None: it held none)."""
    return {n: None if raw.get(n) is None else _value(n, raw[n], where, path) for n in named}


def _value(name: str, value: Any, where: str, path: str) -> FieldValue:
    typed = kind_of(name).from_json(value)
    if typed is None:
        shown = f"{redact_and_escape(where)}/{redact_and_escape(name)}"
        raise _not_saved(path, f"{shown}: not a value it holds")
    return typed


# Read JSON from outside within bounds: size, nesting depth, duplicate keys.
#
# ``json.loads`` recurses once per nesting level, so 30,000 ``[`` can exhaust the stack before it
# says anything. The depth is measured first, by a scan that does not recurse, and the document
# refused with ``path:line:col``.

# A JSON string (possessive: no backtracking on a long unterminated one), or a bracket.
_STRING_OR_BRACKET = re.compile(r'"(?:[^"\\]|\\.)*+"|[\[\]{}]', re.DOTALL)


def read_bounded_text(path: str, limit: int, what: str) -> str:
    """The file's text, refused past ``limit`` bytes or when it is not UTF-8."""
    try:
        data = read_regular(path, limit)  # a FIFO, a device: refused at once
    except OSError as exc:
        raise ReconcilerError(f"{escape(path)}: cannot read {what}: {exc.strerror}") from None
    except TooLarge:
        size = f"{limit // 1048576} MiB" if limit >= 1048576 else f"{limit:,} bytes"
        raise ReconcilerError(f"{escape(path)}: larger than {size}: too large for {what}") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise ReconcilerError(f"{escape(path)}: not {what} (not UTF-8 text)") from None


def too_deep_at(text: str, limit: int) -> int | None:
    """The offset of the bracket that takes nesting past ``limit``, or None."""
    depth = 0
    for match in _STRING_OR_BRACKET.finditer(text):
        char = match.group()
        if char in "[{":
            depth += 1
            if depth > limit:
                return match.start()
        elif char in "]}":
            depth -= 1
    return None


def _line_col(text: str, offset: int) -> tuple[int, int]:
    line = text.count("\n", 0, offset) + 1
    return line, offset - (text.rfind("\n", 0, offset) + 1) + 1


def loads_bounded(text: str, path: str, max_depth: int, what: str) -> Any:
    """``text`` parsed, or a ReconcilerError naming ``path`` (and line:col or the field)."""
    where = escape(path)
    offset = too_deep_at(text, max_depth)
    if offset is not None:
        line, col = _line_col(text, offset)
        raise ReconcilerError(f"{where}:{line}:{col}: nested too deeply (limit {max_depth})")
    repeated: list[tuple[dict[str, Any], str]] = []

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        found = dict(items)
        if len(found) < len(items) and not repeated:  # the first one is named
            counts = Counter(key for key, _ in items)
            repeated.append((found, next(key for key, n in counts.items() if n > 1)))
        return found

    try:
        document = json.loads(text, object_pairs_hook=pairs)
    except json.JSONDecodeError as exc:
        raise ReconcilerError(
            f"{where}:{exc.lineno}:{exc.colno}: not {what} (invalid JSON: {exc.msg})"
        ) from None
    except (ValueError, RecursionError) as exc:
        offset = _long_number_at(text)
        if offset is None:
            raise ReconcilerError(f"{where}: not {what} ({type(exc).__name__})") from None
        line, col = _line_col(text, offset)
        limit = sys.get_int_max_str_digits()
        raise ReconcilerError(
            f"{where}:{line}:{col}: not {what} (a number of more than {limit:,} digits)"
        ) from None
    if repeated:
        holder, key = repeated[0]
        field = redact_and_escape("/".join(map(str, _path_to(document, holder) or ())))
        shown = redact_and_escape(json.dumps(key, ensure_ascii=False))
        raise ReconcilerError(
            f"{where}: not {what} ({field or 'top level'}: key {shown} appears twice)"
        )
    return document


# A JSON string, or a number (its sign, fraction and exponent included).
_STRING_OR_NUMBER = re.compile(r'"(?:[^"\\]|\\.)*+"|-?[0-9]+(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?')


def _long_number_at(text: str) -> int | None:
    """The offset of the first integer of more digits than ``int()`` converts, or None."""
    limit = sys.get_int_max_str_digits()
    for match in _STRING_OR_NUMBER.finditer(text):
        token = match.group().lstrip("-")
        if limit and token.isdigit() and len(token) > limit:
            return match.start()
    return None


def _path_to(node: Any, target: object) -> list[str | int] | None:
    """The keys and indexes from ``node`` to the object ``target`` (the very object)."""
    if node is target:
        return []
    items = (
        node.items()
        if isinstance(node, dict)
        else enumerate(node)
        if isinstance(node, list)
        else ()
    )
    for key, value in items:
        below = _path_to(value, target)
        if below is not None:
            return [key, *below]
    return None


# JSON text written a record at a time: the text ``json.dumps(document, indent=2)`` gives, for a
# document whose lists may be iterators of records made as they are written.
#
# The saved plan (``reconciler.plan.saved``) and `plan --format json` are written so: a plan of
# 200,000 changes is never a second time in memory.


def document_json(document: dict[str, Any]) -> str:
    return "".join(document_chunks(document.items()))


def document_chunks(parts: Iterable[tuple[str, Any]]) -> Iterator[str]:
    """The text of ``json.dumps(document, indent=2)`` and a newline, a record at a time.

    ``parts`` are the document's (key, value) pairs in order; a list value may be any
    iterator of records (``Plan.document_parts``), so no record is held longer than
    it takes to write it.
    """
    try:
        # NaN and Infinity are not JSON: a strict reader (jq, another language) refuses
        # the file. Server values are type-checked on reading, so this is a last guard.
        for piece in _object_pieces(parts, _dumps, "\n  "):
            yield escape_json_text(piece)
    except ValueError:
        raise ReconcilerError(
            "cannot write the plan as JSON: it holds a number JSON cannot represent (NaN or "
            "Infinity)"
        ) from None
    yield "\n"


def _object_pieces(
    parts: Iterable[tuple[str, Any]], dump: Callable[[Any], str], pad: str = ""
) -> Iterator[str]:
    """An object's text, a record at a time: each list (or iterator standing for one) of
    ``parts`` written as it is read. ``pad`` is "\\n  " for json.dumps(indent=2)'s layout,
    empty for the canonical form's."""
    inner = pad + "  " if pad else ""
    opening = "{"
    for key, value in parts:
        yield f"{opening}{pad}{dump(key)}{': ' if pad else ':'}"
        opening = ","
        if isinstance(value, list | Iterator):
            bracket = "["
            for record in value:
                # A string never holds a raw newline in JSON, so each newline of the text
                # starts a line of structure, which moves right by the depth it is at.
                yield bracket + inner + dump(record).replace("\n", inner)
                bracket = ","
            yield "[]" if bracket == "[" else pad + "]"
        else:
            yield dump(value).replace("\n", pad)
    yield "{}" if opening == "{" else pad[:1] + "}"


def _dumps(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, allow_nan=False)


# Signed plans: only a holder of the client secret can make a plan apply accepts.
#
# The signature is HMAC-SHA256 over the plan's canonical JSON (sorted keys, no whitespace, UTF-8,
# the ``signature`` field left out), keyed by HMAC-SHA256(client secret, "invite-reconciler plan
# v1"). The key is derived for this one purpose, so the signature reveals nothing usable
# elsewhere, and it is never stored.

SCHEME = "hmac-sha256:"
_KEY_PURPOSE = b"invite-reconciler plan v1"


class SignatureCheck:
    """Outcomes of checking a plan document's signature."""

    VALID = "valid"
    UNSIGNED = "unsigned"
    INVALID = "invalid"


def signature_for(document: Mapping[str, Any] | Iterable[tuple[str, Any]], secret: str) -> str:
    """The signature of ``document``: a dict, or its (key, value) pairs, a value that is
    an iterator of records hashed as the list it stands for (``document_parts``)."""
    key = hmac.new(secret.encode("utf-8"), _KEY_PURPOSE, hashlib.sha256).digest()
    mac = hmac.new(key, digestmod=hashlib.sha256)
    try:
        for piece in _canonical_pieces(document):
            mac.update(piece.encode("utf-8", "surrogatepass"))
    except ValueError:  # NaN or Infinity: no reader would parse back what was signed
        raise ReconcilerError(
            "cannot sign the plan: it holds a number JSON cannot represent (NaN or Infinity)"
        ) from None
    return SCHEME + mac.hexdigest()


def _canonical_pieces(document: Mapping[str, Any] | Iterable[tuple[str, Any]]) -> Iterator[str]:
    """The one canonical form: sorted keys, no whitespace, ``signature`` left out."""
    items = document.items() if isinstance(document, Mapping) else document
    fields = sorted((item for item in items if item[0] != "signature"), key=lambda item: item[0])
    return _object_pieces(fields, _canonical)


def _canonical(value: Any) -> str:
    # Through JSON and back first, so what is signed is exactly what a reader will parse
    # (tuples become lists, non-string keys become strings).
    parsed = json.loads(json.dumps(value, allow_nan=False))
    return json.dumps(parsed, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def check(document: dict[str, Any], secret: str) -> str:
    """VALID, UNSIGNED or INVALID for this secret, in constant time for the comparison."""
    claimed = document.get("signature")
    if not isinstance(claimed, str) or not claimed:
        return SignatureCheck.UNSIGNED
    try:
        expected = signature_for(document, secret)
    except ReconcilerError:  # NaN or Infinity: never in a plan this tool signed
        return SignatureCheck.INVALID
    if hmac.compare_digest(claimed.encode("utf-8", "replace"), expected.encode("ascii")):
        return SignatureCheck.VALID
    return SignatureCheck.INVALID
