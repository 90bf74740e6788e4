"""What export checks before it writes: ids already in git, and a $schema line that resolves."""

from __future__ import annotations

import errno
import os
from collections.abc import Iterable
from pathlib import Path

import click

from reconciler.desired.files import find_files
from reconciler.desired.state import MAX_FILE_BYTES, load_file, load_text
from reconciler.errors import ConfigError, ReconcilerError
from reconciler.files import ReadFile, read_for_rewrite
from reconciler.git import outside_repository
from reconciler.model.invite import DesiredInvite
from reconciler.safetext import escape, plural
from reconciler.settings.config import Settings
from reconciler.yamlload.source import decode_source

SCHEMA_IN_REPO = Path("schemas") / "invites.schema.json"


def known_ids(ids: list[str], paths: Iterable[str], replacing: str | None) -> list[tuple[str, str]]:
    """(id, FILE:LINE) of ids already defined under ``paths``, except in ``replacing``."""
    existing = [p for p in paths if Path(p).exists()]
    files, _ = find_files(existing)
    skip = Path(replacing).resolve() if replacing else None
    wanted = set(ids)
    found = []
    for file in files:
        if skip is not None and file.resolve() == skip:
            continue
        # Problems in those files are validate's business; only their ids matter here.
        found += [(i.id, str(i.source)) for i in load_file(file)[0] if i.id in wanted]
    return found


def check_known_ids(
    ids: list[str], paths: Iterable[str], out: str | None, force: bool, skip: bool = False
) -> list[str]:
    """The ids to export. Ids already in git: with ``skip``, left out, each named; else
    refused when writing a file, and to stdout, said with the entry each would replace."""
    clashes = known_ids(ids, paths, replacing=out if force else None)
    if clashes and skip:
        defined = {ident for ident, _ in clashes}
        click.echo(
            f"note: left out, already defined in your invite files ({len(defined)}): "
            # Ids that matched ids checked against the id rule; a source shown escaped.
            + ", ".join(f"{ident} (at {source})" for ident, source in clashes),
            err=True,
        )
        return [i for i in ids if i not in defined]
    if clashes and out is None:
        for ident, source in clashes:
            click.echo(
                f"note: {ident} is already defined at {source}; replace the entry at "
                f"{source} with this",
                err=True,
            )
        return ids
    if clashes:
        raise ReconcilerError(
            "nothing exported: already defined in your invite files: "
            + ", ".join(f"{ident} (at {source})" for ident, source in clashes)
            + ". An id may appear once; --skip-defined exports the others, export to "
            "stdout and replace that entry, or `reconcile plan --target ID` to see how it "
            "differs from the platform"
        )
    return ids


def schema_ref_for(out: str | None, given: str | None, configured: str) -> tuple[str, str | None]:
    """The `$schema` reference to write, and a note when it would not resolve. One from
    reconciler.yaml (a pull request can edit it) is a path the repository names: refused,
    before any request, when it leads out of the repository (``git.outside_repository``)."""
    if given:
        return given, _unresolved_note(given, out)
    if configured != Settings().schema_ref:
        _refuse_outside(configured, out)
        return configured, _unresolved_note(configured, out)
    if out is None:  # written for a file one directory down, as invites/NAME.yaml
        if SCHEMA_IN_REPO.is_file():  # run from the repository's top, the schema saved
            return configured, None
        return configured, (
            f"note: the $schema line points at {escape(configured)}, which resolves for a file in "
            f"invites/ when {SCHEMA_IN_REPO} exists (`reconcile schema > {SCHEMA_IN_REPO}`); "
            "pass --out to have it written to resolve wherever the file goes"
        )
    target = SCHEMA_IN_REPO.resolve()
    ref = Path(os.path.relpath(target, Path(out).resolve().parent)).as_posix()
    return ref, _unresolved_note(ref, out)


def _refuse_outside(ref: str, out: str | None) -> None:
    if "://" in ref:  # a URL: the editor's to fetch, nothing here opens it
        return
    # Resolved from where the file goes (stdout: a file in invites/, as written there).
    directory = Path(out).resolve().parent if out else Path("invites").resolve()
    target = os.path.normpath(directory / ref)
    outside = outside_repository(target, base=str(directory))
    if outside:
        raise ConfigError(
            f"`schema_ref` in reconciler.yaml: {escape(ref)} {outside}; a file in the "
            "repository names a schema only inside it (or a URL; --schema-ref gives another)"
        )


def _unresolved_note(ref: str, out: str | None) -> str | None:
    if "://" in ref or out is None:
        return None
    # Joined as text: through a directory not made yet, `new/../..` would not resolve.
    schema = Path(os.path.normpath(Path(out).resolve().parent / ref))
    if schema.exists():
        return None
    return (
        f"note: the $schema line points at {escape(str(schema))}, which does not exist; create "
        f"it with `reconcile schema > {escape(os.path.relpath(schema))}` so editors check the file"
    )


def check_out_directory(out: str | None) -> None:
    """Refuse, before any request, an --out whose directory cannot be made or written.

    A directory that does not exist yet is made when the file is written: its
    nearest existing parent must be a directory this user may write in.
    """
    if not out:
        return
    if os.path.isdir(out):
        raise ReconcilerError(
            f"{escape(out)}: cannot write the export: {os.strerror(errno.EISDIR)}; nothing was read"
        )
    parent = Path(os.path.abspath(out)).parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    target = out if os.path.exists(out) else str(parent)
    if not parent.is_dir() or not os.access(target, os.W_OK):
        problem = errno.ENOTDIR if not parent.is_dir() else errno.EACCES
        raise ReconcilerError(
            f"{escape(out)}: cannot write the export: {os.strerror(problem)} "
            f"({escape(str(parent))}); nothing was read"
        )


def make_out_directory(out: str) -> str | None:
    """Make the directory of ``out`` if it is missing; the directory made, else None."""
    directory = os.path.dirname(out)
    if not directory or os.path.isdir(directory):
        return None
    try:
        os.makedirs(directory, exist_ok=True)
    except OSError as exc:
        raise ReconcilerError(
            f"{escape(out)}: cannot make its directory: {exc.strerror}; nothing was written"
        ) from None
    return directory


def refuse_dropping_invites(out: str, ids: list[str]) -> ReadFile | None:
    """The file ``--force`` replaces, as read; refused when it defines invites other than
    those exported, or cannot be read as invites at all.

    Replacing it would take them out of git without a word: they would no longer
    be managed. `reconcile adopt` brings the platform's values into such a file
    instead, entry by entry. A file that cannot be parsed (conflict markers, Latin-1
    text, a tab) may hold any number of them: it is never replaced. The export replaces
    the file only while it is still these bytes (``replace_read``).
    """
    if not os.path.exists(out):  # nothing, or a dangling link (replaced, never followed)
        return None
    try:
        read = read_for_rewrite(out, MAX_FILE_BYTES)
    except OSError as exc:
        raise ReconcilerError(
            f"{escape(out)}: cannot read it ({exc.strerror}); --force replaces only a file it "
            "has read. Nothing was exported"
        ) from None
    text, problems = decode_source(read.data, out)
    invites: list[DesiredInvite] = []
    if text is not None:
        invites, problems = load_text(text, out)
    if problems:
        first = problems[0]
        raise ReconcilerError(
            f"{escape(out)}:{first.line}:{first.column}: cannot be read as invites "
            f"({first.message}); --force never replaces a file it cannot parse, which may "
            "hold invites you manage. Nothing was exported. Fix the file (or delete it) first"
        )
    exported = set(ids)
    others = [i.id for i in invites if i.id not in exported]
    if not others:
        return read
    shown = ", ".join(escape(i) for i in others[:10]) + (
        f" and {len(others) - 10} more" if len(others) > 10 else ""
    )
    raise ReconcilerError(
        f"{escape(out)} defines {plural(len(others), 'other invite')} ({shown}); --force would "
        f"drop {'it' if len(others) == 1 else 'them'} from git, unmanaged from then on. Nothing "
        f"was exported. To bring the platform's values into the file, run `reconcile adopt "
        f"{escape(out)}` (with --target ID for some of them); to replace it anyway, delete it first"
    )


def refuse_dropping_unknown(replacing: ReadFile, unknown: list[str]) -> None:
    """Refuse to replace a file (``--force``) that defines an id the platform did not know.

    The export leaves an unknown id out; written over the file, it would take that entry
    out of git without a word. Nothing is written: the entry is the team's to remove.
    """
    text, _ = decode_source(replacing.data, replacing.path)
    defined = {i.id for i in load_text(text, replacing.path)[0]} if text is not None else set()
    dropped = [i for i in unknown if i in defined]
    if dropped:
        shown = ", ".join(escape(i) for i in dropped)
        raise ReconcilerError(
            f"nothing exported: {escape(replacing.path)} defines {shown}, which the platform "
            "does not know (HTTP 404); --force would drop the entry from git. Remove it from "
            "the file (or leave its id out of the export) first"
        )
