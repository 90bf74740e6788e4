"""`--changed-since REF`: the invites whose YAML entries differ between git REF and now.

Entries are compared as parsed values by id, not as lines: reformatting a file,
moving an entry or reordering keys changes nothing, so a pull request that edits
3 of 20,000 invites reads 3 invites from the platform, not 20,000.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path
from typing import NamedTuple

from reconciler.desired.files import is_yaml_name
from reconciler.desired.state import load_text
from reconciler.errors import ReconcilerError
from reconciler.git import GitFailed, call
from reconciler.model.invite import DesiredInvite, Fields, kind_of
from reconciler.safetext import escape, quote_value
from reconciler.yamlload.source import decode_source

_GIT_TIMEOUT = 120.0


# What GitHub and GitLab send as the commit before a branch's first push: no base at all.
NO_BASE = re.compile(r"0{40}|0{64}")


class ChangedEntry(NamedTuple):
    """What a change did to one invite's entry: the fields whose value it changed, and
    every field's value at the base (None: the entry is new since the base)."""

    fields: frozenset[str]
    at_ref: Fields | None


class ChangedSince(NamedTuple):
    """A run planned only where a change touched: ``--changed-since REF``, field by field."""

    ref: str
    entries: dict[str, ChangedEntry]  # what the change did to each invite read
    not_read: int  # invites the change did not touch, so not read


def changed_entries(
    ref: str, paths: Iterable[str], invites: list[DesiredInvite]
) -> dict[str, ChangedEntry] | None:
    """For each invite new since ``ref`` or whose entry differs from it, what changed.

    None when ``ref`` is the all-zero SHA: there is no base, every invite counts.
    """
    if NO_BASE.fullmatch(ref):
        return None
    top = _toplevel(ref)
    before = _entries_at(_commit(ref, top), top, paths)
    changed = {}
    for invite in invites:
        old = before.get(invite.id)
        if old is None:
            changed[invite.id] = ChangedEntry(frozenset(invite.fields), None)
            continue
        # Compared as the plan compares (sets ignore order and repeats): reformatting or
        # reordering an entry changes nothing.
        was = old.fields
        touched = frozenset(
            f for f, v in invite.items() if f not in was or not kind_of(f).equal(v, was[f])
        )
        if touched or was.keys() != invite.fields.keys() or _rule(old) != _rule(invite):
            changed[invite.id] = ChangedEntry(touched, was)
    return changed


def _rule(invite: DesiredInvite) -> frozenset[str] | bool:
    # A list of fields is a set: reordering it changes nothing.
    rule = invite.resend_on_change
    return frozenset(rule) if isinstance(rule, tuple) else rule


def _git(args: list[str], cwd: str | None = None, stdin: bytes | None = None) -> bytes:
    return call(args, "--changed-since", timeout=_GIT_TIMEOUT, cwd=cwd, input=stdin).stdout


def _toplevel(ref: str) -> str:
    try:
        return _git(["rev-parse", "--show-toplevel"]).decode().strip()
    except GitFailed as failed:
        raise ReconcilerError(
            f"--changed-since {escape(ref)}: the working directory is not in a git repository "
            f"({failed})"
        ) from None


def _commit(ref: str, top: str) -> str:
    if ref.startswith("-") or not ref.strip():
        raise ReconcilerError(f"--changed-since {quote_value(ref)}: not a git revision")
    try:
        return _git(["rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}"], top).decode().strip()
    except GitFailed:
        raise ReconcilerError(
            f"--changed-since {escape(ref)}: no such commit in this repository. Fetch it first "
            "(in CI: a full clone, e.g. actions/checkout with fetch-depth: 0, or GIT_DEPTH: 0), "
            "or plan everything by leaving out --changed-since"
        ) from None


def _entries_at(commit: str, top: str, paths: Iterable[str]) -> dict[str, DesiredInvite]:
    """Each invite id in the YAML files under ``paths`` at ``commit``, with its entry."""
    relative = _in_repository(top, paths)
    listing = _git(["ls-tree", "-r", "-z", "--name-only", commit, "--", *relative], cwd=top)
    names = [n for n in listing.decode("utf-8", "surrogateescape").split("\0") if n]
    # `git cat-file --batch` reads one name a line: a name holding a line break
    # would shift every answer after it onto the wrong file. Such a file's old
    # entries stay unknown, so its invites count as changed: read, never skipped.
    names = [n for n in names if is_yaml_name(n) and "\n" not in n and "\r" not in n]
    entries: dict[str, DesiredInvite] = {}
    for name, data in zip(names, _cat_files(commit, names, top), strict=True):
        entries.update(_entries_of(data, name))
    return entries


def _in_repository(top: str, paths: Iterable[str]) -> list[str]:
    """``paths`` from the repository's top; one outside it is refused."""
    root = Path(top).resolve()
    relative = []
    for raw in paths:
        try:
            relative.append(str(Path(raw).resolve().relative_to(root)) or ".")
        except ValueError:
            raise ReconcilerError(
                f"--changed-since: {escape(raw)} is outside the git repository {escape(top)}"
            ) from None
    return relative


def _entries_of(data: bytes | None, name: str) -> dict[str, DesiredInvite]:
    # Read by the same loader as the current files. An old entry it refuses is
    # simply absent, so the current one counts as changed: read, never skipped.
    text = decode_source(data, name)[0] if data is not None else None
    invites = load_text(text, name)[0] if text is not None else []
    return {invite.id: invite for invite in invites}


def _cat_files(commit: str, names: list[str], top: str) -> list[bytes | None]:
    """The contents of many files at one commit, from one `git cat-file --batch`."""
    if not names:
        return []
    request = "".join(f"{commit}:{name}\n" for name in names).encode("utf-8", "surrogateescape")
    out = _git(["cat-file", "--batch"], cwd=top, stdin=request)
    blobs: list[bytes | None] = []
    pos = 0
    for _ in names:
        end = out.index(b"\n", pos)
        header = out[pos:end].split()
        pos = end + 1
        if header[-1] == b"missing" or len(header) < 3:
            blobs.append(None)
            continue
        size = int(header[2])
        blobs.append(out[pos : pos + size] if header[1] == b"blob" else None)
        pos += size + 1  # the contents, then a newline
    return blobs
