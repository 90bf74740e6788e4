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
from reconciler.desired.rules import NO_RULES, Rules, RunChecks
from reconciler.errors import FileProblem, InputError
from reconciler.git import git_top, ignored, up_to_top
from reconciler.model.invite import INVITE_ID, DesiredInvite
from reconciler.safefile import kind_of, open_regular
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
    "CONFIG_FILE",
    "DEFAULT_PATH",
    "DesiredState",
    "find_files",
    "is_yaml_name",
    "load_desired_state",
    "load_file",
    "load_text",
    "load_texts",
]

YAML_SUFFIXES = (".yaml", ".yml")


def is_yaml_name(name: str) -> bool:
    """Whether a file of this name is read when its directory is: `*.yaml`, `*.yml`, in any
    case (`APAC.YAML`, saved so on Windows, was left out without a word)."""
    return name.lower().endswith(YAML_SUFFIXES)


DEFAULT_PATH = "invites"  # read when no PATH is given and the config sets no `paths`
CONFIG_FILE = "reconciler.yaml"  # the settings' file, found next to the invites or above
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


def find_files(paths: list[str]) -> tuple[list[Path], list[FileProblem]]:
    """The YAML files named or found (recursively, sorted) under ``paths``.

    A file whose real path (symbolic links followed) lies outside the git
    repository it is in, or outside the directory given when there is no
    repository, is refused unread: a link committed in a pull request could
    otherwise have any file of the job's machine read and quoted in messages.
    """
    files: list[Path] = []
    problems: list[FileProblem] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            found = sorted(
                p
                for p in path.rglob("*")
                if is_yaml_name(p.name) and _walked(p, path) and p.is_file()
            )
            boundary = _boundary(path, path)
            if found and _in_repository(path):
                # What the repository ignores (a virtualenv, node_modules/) is not its
                # invites, however much YAML it holds.
                below = [str(p.relative_to(path)) for p in found]
                left_out = ignored([".", *below], cwd=str(path))
                if "." not in left_out:  # a directory named that git ignores is read whole
                    found = [p for p, rel in zip(found, below, strict=True) if rel not in left_out]
            if not found:
                problems.append(FileProblem(raw, 0, 0, _NONE_FOUND))
            for file in found:
                outside = _outside(file, boundary)
                if outside:
                    problems.append(FileProblem(str(file), 0, 0, outside))
                else:
                    files.append(file)
        elif path.is_file():
            outside = _outside(path, _boundary(path.parent, None))
            if outside:
                problems.append(FileProblem(raw, 0, 0, outside))
            else:
                files.append(path)
        elif path.exists():  # a FIFO, a device, a socket: never opened
            problems.append(FileProblem(raw, 0, 0, _not_regular(path)))
        else:
            problems.append(FileProblem(raw, 0, 0, _missing(raw)))
    unique = list(dict.fromkeys(files))
    return unique, problems


_NONE_FOUND = (
    f"no *.yaml or *.yml files in this directory ({CONFIG_FILE}, files and directories "
    "whose names start with a dot, and what git ignores are not invite files)"
)


def _in_repository(directory: Path) -> bool:
    return git_top(os.path.abspath(directory)) is not None  # asked once: _boundary asks too


def _walked(file: Path, directory: Path) -> bool:
    """Whether a walk of ``directory`` reads ``file`` as an invite file: not the settings'
    file, and nothing hidden under it (`.git/`, `.github/workflows/*.yml`: `validate .` at
    a repository's top reads the invites, not the CI's YAML; what git ignores is left out
    too). A file named is read."""
    if file.name == CONFIG_FILE:
        return False
    return not any(part.startswith(".") for part in file.relative_to(directory).parts)


def _boundary(directory: Path, fallback: Path | None) -> str | None:
    """The real path files under ``directory`` must stay in: its git repository, else
    ``fallback`` (the directory given); None: anywhere."""
    top = git_top(os.path.abspath(directory or "."))
    root = top if top else fallback
    return os.path.realpath(root) if root is not None else None


def _outside(file: Path, boundary: str | None) -> str | None:
    """Why ``file`` is refused (a link out of ``boundary``), or None."""
    if boundary is None:
        return None
    real = os.path.realpath(file)
    if real == boundary or real.startswith(boundary.rstrip(os.sep) + os.sep):
        return None
    where = "the repository" if (Path(boundary) / ".git").exists() else "the directory given"
    return (
        f"not read: a symbolic link to {escape(real)}, outside {where}; invite files "
        "never follow a link out of it (copy the file in instead)"
    )


def _not_regular(path: Path) -> str:
    try:
        mode = path.stat().st_mode
    except OSError as exc:
        return f"cannot read: {exc.strerror}"
    return f"not read: it is {kind_of(mode)}, not a regular file"


def _missing(raw: str) -> str:
    message = "no such file or directory"
    if raw != DEFAULT_PATH:
        return message
    if Path(CONFIG_FILE).is_file():
        return message + (
            f" (read when no PATH is given and {CONFIG_FILE} sets no `paths`; "
            f"pass a PATH, or set `paths:` in {CONFIG_FILE})"
        )
    looked = up_to_top()
    where = ", ".join(escape(str(d)) for d in looked)
    top = " (the repository's top)" if git_top(str(looked[0])) else " (not in a git repository)"
    return message + (
        f" (read when no PATH is given and no {CONFIG_FILE} sets `paths`; looked for "
        f"{CONFIG_FILE} in {where}{top}, and found none; pass a PATH, or run from the "
        f"directory of your {CONFIG_FILE} or below it)"
    )


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
    # `name: Store #12`, rarely: such a file is parsed again, unless it failed already.
    if checks is not None and _suspect(source) and not any(p.is_error for p in problems):
        problems.extend(checks.cut_by_comments(path, lines.text))
    return reader.invites, problems


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
