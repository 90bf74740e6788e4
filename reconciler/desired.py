"""Desired state: the invites as the YAML files in git say they should be."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from reconciler.errors import InputError, SourceError
from reconciler.resources import invite_schema_path
from reconciler.schema import validate_document
from reconciler.yaml_source import MarkedDict, decode_source, load_yaml, to_plain

YAML_SUFFIXES = (".yaml", ".yml")
DEFAULT_PATH = "invites"  # read when no PATH is given and the config sets no `paths`
# Keys of an invite entry that steer the reconciler and are never sent.
RECONCILER_KEYS = ("id", "resendOnChange")


@dataclass(frozen=True)
class SourceLocation:
    path: str
    line: int
    column: int = 1

    def __str__(self) -> str:
        return f"{self.path}:{self.line}"


@dataclass(frozen=True)
class DesiredInvite:
    """One invite entry: the fields it manages and where it was written."""

    id: str
    fields: dict[str, Any]  # managed fields only; absent means unmanaged
    source: SourceLocation
    resend_on_change: bool = False

    @property
    def name(self) -> str | None:
        value = self.fields.get("name")
        return value if isinstance(value, str) else None


@dataclass
class DesiredState:
    invites: list[DesiredInvite]
    files: list[str] = field(default_factory=list)


def find_files(paths: list[str]) -> tuple[list[Path], list[SourceError]]:
    """The YAML files named or found (recursively, sorted) under ``paths``."""
    files: list[Path] = []
    problems: list[SourceError] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            found = sorted(p for p in path.rglob("*") if p.suffix in YAML_SUFFIXES and p.is_file())
            if not found:
                problems.append(
                    SourceError(raw, 0, 0, "no *.yaml or *.yml files in this directory")
                )
            files.extend(found)
        elif path.is_file():
            files.append(path)
        else:
            problems.append(SourceError(raw, 0, 0, _missing(raw)))
    unique = list(dict.fromkeys(files))
    return unique, problems


def _missing(raw: str) -> str:
    message = "no such file or directory"
    if raw == DEFAULT_PATH:
        message += (
            " (read when no PATH is given and reconciler.yaml sets no `paths`; "
            "pass a PATH, or set `paths:` in reconciler.yaml)"
        )
    return message


def load_desired_state(paths: list[str]) -> DesiredState:
    """Read and check every file; raise InputError listing all problems found."""
    files, problems = find_files(paths)
    invites: list[DesiredInvite] = []
    for file in files:
        file_invites, file_problems = load_file(file)
        invites.extend(file_invites)
        problems.extend(file_problems)
    problems.extend(_duplicate_ids(invites))
    if problems:
        raise InputError(problems)
    return DesiredState(invites=invites, files=[str(f) for f in files])


def load_file(file: Path) -> tuple[list[DesiredInvite], list[SourceError]]:
    source = str(file)
    try:
        data = file.read_bytes()
    except OSError as exc:
        return [], [SourceError(source, 1, 1, f"cannot read: {exc.strerror}")]
    text, problems = decode_source(data, source)
    if text is None:
        return [], problems
    document, problems, start = load_yaml(text, source)
    if problems and document is None:
        return [], problems
    if document is None:
        message = "file is empty; expected a mapping with an `invites:` list"
        return [], [*problems, SourceError(source, 1, 1, message)]
    if not isinstance(document, MarkedDict):
        message = "top level must be a mapping with an `invites:` list"
        return [], [*problems, SourceError(source, start.line, start.column, message)]
    problems.extend(validate_document(document, source, invite_schema_path()))
    # Entries with a usable id are kept even when the file has problems, so that
    # duplicate ids are reported in the same run; any problem stops the run anyway.
    entries = document.get("invites")
    invites = [
        _desired_invite(entry, source)
        for entry in (entries if isinstance(entries, list) else [])
        if isinstance(entry, MarkedDict) and isinstance(entry.get("id"), str)
    ]
    return invites, problems


def _desired_invite(entry: MarkedDict, source: str) -> DesiredInvite:
    fields = {k: to_plain(v) for k, v in entry.items() if k not in RECONCILER_KEYS}
    return DesiredInvite(
        id=entry["id"],
        fields=fields,
        source=SourceLocation(source, entry.mark.line, entry.mark.column),
        resend_on_change=bool(entry.get("resendOnChange", False)),
    )


def _duplicate_ids(invites: list[DesiredInvite]) -> list[SourceError]:
    first_seen: dict[str, DesiredInvite] = {}
    problems = []
    for invite in invites:
        first = first_seen.setdefault(invite.id, invite)
        if first is not invite:
            problems.append(
                SourceError(
                    invite.source.path,
                    invite.source.line,
                    invite.source.column,
                    f"invite id `{invite.id}` is already defined at {first.source}",
                )
            )
    return problems
