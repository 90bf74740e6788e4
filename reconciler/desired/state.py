"""Desired state: the invites as the YAML files in git say they should be."""

from __future__ import annotations

import gc
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import quote

from reconciler.desired.entries import EntryReader
from reconciler.desired.files import find_files
from reconciler.desired.rules import NO_RULES, Rules, RunChecks
from reconciler.errors import FileProblem, InputError
from reconciler.files import open_regular
from reconciler.model.invite import INVITE_ID, DesiredInvite
from reconciler.safetext import escape
from reconciler.schema.check import invite_validators, validate
from reconciler.schema.messages import Where
from reconciler.yamlload.comments import suspect
from reconciler.yamlload.items import Delivery, ListRead
from reconciler.yamlload.positions import Lines, Located
from reconciler.yamlload.source import FileSource, stream

if TYPE_CHECKING:
    from reconciler.desired.changed_since import ChangedSince

__all__ = [
    "DesiredState",
    "load_desired_state",
    "load_file",
    "load_text",
    "load_texts",
]


# A bound on what one file may hold: 200,000 invites take about 60 MB.
MAX_FILE_BYTES = 256 * 1024 * 1024
_TOO_LARGE = f"larger than {MAX_FILE_BYTES // 2**20} MiB; split it into several files"


@dataclass
class DesiredState:
    invites: list[DesiredInvite]
    files: list[str] = field(default_factory=list)
    # --changed-since REF: what the change did to each invite read (None: a full run).
    changed_since: ChangedSince | None = None
    # What the policies and built-in checks of warning severity found: shown, fail nothing.
    warnings: list[FileProblem] = field(default_factory=list)


def load_desired_state(paths: list[str], rules: Rules = NO_RULES) -> DesiredState:
    """Read and check every file (with ``rules``: the config's policies and the built-in
    checks); raise InputError listing all problems found, when one is an error."""
    files, problems = find_files(paths)
    invites: list[DesiredInvite] = []
    checks = RunChecks(rules) if rules is not NO_RULES else None
    for file in files:
        file_invites, file_problems = load_file(file, checks)
        invites.extend(file_invites)
        problems.extend(file_problems)
    problems.extend(_duplicate_ids(invites))
    if any(p.is_error for p in problems):
        raise InputError(problems)
    return DesiredState(invites=invites, files=[str(f) for f in files], warnings=sorted(problems))


def load_texts(sources: list[tuple[str, str]], rules: Rules = NO_RULES) -> DesiredState:
    """The desired state of files read elsewhere, as (path, text): every check of
    ``load_desired_state`` but finding and reading them (Ansible's controller read them)."""
    invites: list[DesiredInvite] = []
    problems: list[FileProblem] = []
    checks = RunChecks(rules) if rules is not NO_RULES else None
    for path, text in sources:
        file_invites, file_problems = _load(text, path, Lines(text), checks)
        invites.extend(file_invites)
        problems.extend(file_problems)
    problems.extend(_duplicate_ids(invites))
    if any(p.is_error for p in problems):
        raise InputError(problems)
    return DesiredState(
        invites=invites, files=[path for path, _ in sources], warnings=sorted(problems)
    )


def load_file(
    file: Path, checks: RunChecks | None = None
) -> tuple[list[DesiredInvite], list[FileProblem]]:
    """The invites of one file and its problems (duplicate ids across files aside)."""
    source = str(file)
    try:
        with open_regular(file) as stream:
            if os.fstat(stream.fileno()).st_size > MAX_FILE_BYTES:
                return [], [FileProblem(source, 1, 1, _TOO_LARGE)]
            # Read in chunks as it is parsed: a 60 MB file is never held whole.
            return _load(FileSource(stream, MAX_FILE_BYTES), source, Lines(file.read_bytes), checks)
    except OSError as exc:
        return [], [FileProblem(source, 1, 1, f"cannot read: {exc.strerror}")]


def load_text(text: str, path: str) -> tuple[list[DesiredInvite], list[FileProblem]]:
    """The invites in ``text``, read as the file ``path``, and every problem in it."""
    return _load(text, path, Lines(text))


def _load(
    source: str | FileSource, path: str, lines: Lines, checks: RunChecks | None = None
) -> tuple[list[DesiredInvite], list[FileProblem]]:
    reader = EntryReader(path, lines, checks)
    with _collector_paused():
        document, problems, entries = stream(source, path, lines, "invites", reader)
    if document is None:
        if checks is not None:
            # The invites read before the file stopped still count for the files after
            # it; what they would say of each other is not said (the run fails anyway).
            _compared(checks, reader, path, lines)
        return [], problems
    if document.value is None:
        message = "file is empty; expected a mapping with an `invites:` list"
        return [], [*problems, FileProblem(path, 1, 1, message)]
    if not isinstance(document.value, dict):
        message = "top level must be a mapping with an `invites:` list"
        return [], [*problems, FileProblem(path, *document.mark(), message)]
    for entry in entries.left:  # the list came through an alias or a merge
        reader(entry)
    schema, written = invite_validators(), _as_written(document, entries)
    if not schema.file_is_valid(written.value):
        problems.extend(validate(schema.file, Where(written, path)))
    problems += reader.problems
    if checks is not None:
        problems += _compared(checks, reader, path, lines)
        # `name: Store #12`, rarely: such a file is parsed again, unless it failed already.
        if _suspect(source) and not any(p.is_error for p in problems):
            problems.extend(checks.cut_by_comments(path, lines.text))
    return reader.invites, problems


def _compared(checks: RunChecks, reader: EntryReader, path: str, lines: Lines) -> list[FileProblem]:
    """The checks across entries of the file ``reader`` read, against the run's others."""
    with _collector_paused():  # it makes a key an invite, and no cycle
        return checks.across(reader.compared, path, lines)


def _suspect(source: str | FileSource) -> bool:
    if isinstance(source, FileSource):
        return source.suspect
    return suspect(source.encode("utf-8", "surrogatepass"))


def _as_written(document: Located, entries: ListRead) -> Located:
    """The document as the file-level check judges it: `invites` as long as written.

    A streamed list is empty in the document. The file-level schema leaves
    each entry to ``EntryReader``, and rules that would need the entries
    together are refused with the schema (``invite_validators``), so only the
    list's length matters there: placeholders stand in for the entries, and a
    streamed list is judged as the same list built whole would be.
    """
    if entries.delivery is not Delivery.STREAMED:
        return document
    return document._replace(value={**document.value, "invites": [None] * entries.streamed})


@contextmanager
def _collector_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while a file is read.

    Loading creates only trees of dicts and lists, never cycles, yet every
    few hundred new containers the collector would walk all the invites read
    so far: a third of the load time of a 20,000-invite file.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _duplicate_ids(invites: list[DesiredInvite]) -> list[FileProblem]:
    first_seen: dict[str, DesiredInvite] = {}
    problems = []
    for invite in invites:
        # Compared as they will be sent: the id as it goes into the request's URL.
        sent = invite.id if INVITE_ID.fullmatch(invite.id) else quote(invite.id, safe="")
        first = first_seen.setdefault(sent, invite)
        if first is not invite:
            problems.append(
                FileProblem(
                    invite.source.path,
                    invite.source.line,
                    invite.source.column,
                    f"invite id `{escape(invite.id)}` is already defined at {first.source}",
                )
            )
    return problems
