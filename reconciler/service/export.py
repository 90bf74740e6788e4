"""`export`: the current state of invites as a desired-state file, and what is checked
before it is written (ids already in git, the file --force replaces, a $schema line
that resolves).

The file validates and plans clean against the server it came from: each invite's
entry (``export_entry``) holds every value a file can hold, each left-out one with a
note saying why. This is how a team brings existing invites under git.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import NamedTuple

import click
import yaml

from reconciler.api.exceptions import ApiError, NotFound
from reconciler.desired.files import find_files
from reconciler.desired.state import MAX_FILE_BYTES, load_file, load_text, unheld
from reconciler.errors import ConfigError, ReconcilerError
from reconciler.files import (
    ReadFile,
    read_for_rewrite,
    refuse_special_file,
    replace_read,
    write_output,
)
from reconciler.git import outside_repository
from reconciler.model.invite import (
    ID_KEY,
    CurrentInvite,
    DesiredInvite,
    Fields,
    FlowList,
    Quoted,
    Written,
    field_kinds,
    kind_of,
)
from reconciler.output.console import SHOWN
from reconciler.safetext import ALLOWED_INVISIBLE, escape, holds_secret, plural, redact_and_escape
from reconciler.service.offline import check_writable
from reconciler.service.online import Service
from reconciler.settings.config import Settings, load_settings
from reconciler.yamlload.source import decode_source

SCHEMA_IN_REPO = Path("schemas") / "invites.schema.json"


def check_known_ids(
    ids: list[str], paths: Iterable[str], out: str | None, force: bool, skip: bool = False
) -> list[str]:
    """The ids to export. Ids already defined under ``paths`` (but in the file --force
    replaces): with ``skip``, left out, each named; else refused when writing a file, and
    to stdout, said with the entry each would replace."""
    clashes = _defined(set(ids), paths, out if force else None)
    if not clashes:
        return ids
    # Ids that matched ids checked against the id rule; a source shown escaped.
    listed = ", ".join(f"{ident} (at {source})" for ident, source in clashes)
    if skip:
        defined = {ident for ident, _ in clashes}
        click.echo(
            f"note: left out, already defined in your invite files ({len(defined)}): {listed}",
            err=True,
        )
        return [i for i in ids if i not in defined]
    if out is None:
        said = "\n".join(
            f"note: {ident} is already defined at {source}; replace the entry at {source} with this"
            for ident, source in clashes
        )
        click.echo(said, err=True)
        return ids
    raise ReconcilerError(
        f"nothing exported: already defined in your invite files: {listed}. An id may "
        "appear once; --skip-defined exports the others, export to stdout and replace that "
        "entry, or `reconcile plan --target ID` to see how it differs from the platform"
    )


def _defined(ids: set[str], paths: Iterable[str], replacing: str | None) -> list[tuple[str, str]]:
    """(id, FILE:LINE) of ``ids`` defined under ``paths``, but in the file ``replacing``."""
    replaced = Path(replacing).resolve() if replacing else None
    files = find_files(list(filter(os.path.exists, paths)))[0]
    # Problems in those files are validate's business; only their ids matter here.
    kept = [f for f in files if replaced is None or f.resolve() != replaced]
    found = [load_file(file)[0] for file in kept]
    return [(i.id, str(i.source)) for invites in found for i in invites if i.id in ids]


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


def _invites_replaced(read: ReadFile, out: str) -> list[DesiredInvite]:
    """The invites of the file ``--force`` replaces; refused when it cannot be parsed."""
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
    return invites


def refuse_dropping_invites(out: str, ids: list[str]) -> tuple[ReadFile, set[str]] | None:
    """The file ``--force`` replaces, as read, and the ids it defines; refused when it
    defines invites other than those exported, or cannot be read as invites at all.

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
    invites = _invites_replaced(read, out)
    defined, exported = {i.id for i in invites}, set(ids)
    others = [i.id for i in invites if i.id not in exported]
    if not others:
        return read, defined
    shown = ", ".join(escape(i) for i in others[:SHOWN]) + (
        f" and {len(others) - SHOWN} more" if len(others) > SHOWN else ""
    )
    raise ReconcilerError(
        f"{escape(out)} defines {plural(len(others), 'other invite')} ({shown}); --force would "
        f"drop {'it' if len(others) == 1 else 'them'} from git, unmanaged from then on. Nothing "
        f"was exported. To bring the platform's values into the file, run `reconcile adopt "
        f"{escape(out)}` (with --target ID for some of them); to replace it anyway, delete it first"
    )


# -- the export itself -------------------------------------------------------


@dataclass
class Export:
    """An export checked, before any request: the ids to read and where the text goes."""

    settings: Settings
    ids: list[str]  # empty: every id given is defined in the files already
    schema_ref: str
    note: str | None  # said when the $schema line would not resolve
    replacing: tuple[ReadFile, set[str]] | None = None  # the file --force replaces, its ids
    found: list[CurrentInvite] = field(default_factory=list)
    unknown: list[tuple[str, ApiError]] = field(default_factory=list)  # ids not on the platform
    text: str = ""


def check_export(
    ids: list[str],
    config_file: str | None,
    out: str | None = None,  # None: stdout
    *,
    force: bool = False,  # replace --out: only a file that defines no other invites
    skip_defined: bool = False,  # leave out the ids defined in the files, each named
    schema_ref: str | None = None,  # the $schema line's, else the configured or the repository's
) -> Export:
    """Everything refused before any request: an --out that cannot be written or would
    be replaced unasked (before the settings are read), ids already in git, a $schema
    reference out of the repository."""
    check_writable(out, "write the export", makes_directory=True)
    if out:  # before any request, as plan --out
        refuse_special_file(out, "the export")
    if out and os.path.exists(out) and not force:
        raise ReconcilerError(
            f"{out} exists; it may hold invites you manage. Choose another --out, "
            f"pass --force to overwrite it, or run `reconcile adopt {out}` to bring the "
            "platform's values into it"
        )
    settings = load_settings(config_file)
    ids = list(dict.fromkeys(ids))
    replacing = refuse_dropping_invites(out, ids) if out and force else None
    ids = check_known_ids(ids, settings.paths, out, force, skip_defined)
    ref, note = schema_ref_for(out, schema_ref, settings.schema_ref)
    return Export(settings, ids, ref, note, replacing)


def read_export(service: Service, export: Export) -> Export:
    """The invites read, and the export's text. An unknown id leaves the others to be
    exported, unless --force would drop its entry from the file replaced; any other
    failure exports nothing (run again, the file is whole), with every id that could not
    be read named."""
    export.found, failed = service.read_invites(export.ids)
    export.unknown = [(i, error) for i, error in failed if isinstance(error, NotFound)]
    problems = [(i, error) for i, error in failed if not isinstance(error, NotFound)]
    if problems or (export.unknown and not export.found):
        hint = (
            "" if problems else "\n(invite ids come from the platform's console or its own export)"
        )
        raise ReconcilerError("nothing exported:\n" + listed(problems + export.unknown) + hint)
    if export.replacing is not None:
        # Left out, an unknown id defined in the file replaced would drop its entry from
        # git without a word: the entry is the team's to remove.
        (read, defined), unknown = export.replacing, [i for i, _ in export.unknown]
        dropped = ", ".join(escape(i) for i in unknown if i in defined)
        if dropped:
            raise ReconcilerError(
                f"nothing exported: {escape(read.path)} defines {dropped}, which the platform "
                "does not know (HTTP 404); --force would drop the entry from git. Remove it "
                "from the file (or leave its id out of the export) first"
            )
    export.text = render_export(export.found, service.base_url, export.schema_ref)
    return export


def write_export(export: Export, out: str) -> str:
    """Write the export to ``out``; the directory made for it, else "".

    Like a plan file: a temporary file renamed over --out, never written through a
    symlink, never over a device or FIFO.
    """
    made = os.path.dirname(out)
    if made and not os.path.isdir(made):
        try:
            os.makedirs(made, exist_ok=True)
        except OSError as exc:
            raise ReconcilerError(
                f"{escape(out)}: cannot make its directory: {exc.strerror}; nothing was written"
            ) from None
    else:
        made = ""
    if export.replacing is not None:  # only while it is still the file read and checked
        replace_read(export.replacing[0], export.text, "the export", through_links=False)
    else:  # a file that appeared meanwhile is never replaced; a dangling link is
        write_output(out, export.text, "the export", create_only=not os.path.islink(out))
    return made


def listed(failures: list[tuple[str, ApiError]]) -> str:
    """One line per id, with the platform's answer (status, message, requestId)."""
    return "\n".join(
        f"  {redact_and_escape(ident)}: {redact_and_escape(str(error))}"
        for ident, error in failures
    )


# -- what one invite becomes -------------------------------------------------


class Entry(NamedTuple):
    """An invite's desired-state entry, and a note for each server value left out of it."""

    fields: dict[str, Written]  # the id first, then each field as an export writes it
    left_out: list[str]


def export_entry(invite: CurrentInvite) -> Entry:
    """The entry of an invite: every updatable field a file can hold, in a stable order.

    The entry validates and plans clean against the server it came from: a value the
    schema cannot hold (a contact without an email, a name of 300 characters, an
    invisible character), or one holding the client secret or a token of this run, is
    left out (that field is then unmanaged) with a note saying why, never rewritten.
    A contact's sub-fields that a file cannot hold (a server's `title`) are left out
    alone: unmanaged, a PATCH of the contact keeps the server's value of them.
    """
    kept: Fields = {}
    notes: list[str] = []
    for name, kind in field_kinds().items():
        value = invite.fields.get(name)
        if value is None:  # nothing held: the same as a field left out
            continue
        if any(holds_secret(text) for _, text in kind.texts(value)):
            notes.append(
                f"`{name}` left out: the server's value holds the client secret or an "
                "access token of this run, which must never reach a file"
            )
            continue
        kept[name] = kind.for_file(value, name, notes)  # in NFC, as validate reads it back
    for (name, part), reason in unheld(invite.id, kept).items():
        if name not in kept:  # left out whole for another of its sub-fields already
            continue
        smaller = kind_of(name).without(kept[name], part)
        if smaller is None:
            part = None
            del kept[name]
        else:
            kept[name] = smaller
        where = name if part is None else f"{name}.{part}"
        notes.append(f"`{where}` left out: {reason}")
    entry: dict[str, Written] = {ID_KEY: invite.id}
    entry.update((name, kind_of(name).written(value)) for name, value in kept.items())
    return Entry(entry, notes)


class _ExportDumper(yaml.SafeDumper):
    def increase_indent(self, flow: bool = False, indentless: bool = False) -> None:
        # Indent list items under their key, as people write them by hand.
        super().increase_indent(flow, False)


_ExportDumper.add_representer(
    Quoted,
    lambda dumper, value: dumper.represent_scalar("tag:yaml.org,2002:str", value, style='"'),
)


def _flow_list(dumper: yaml.SafeDumper, value: FlowList) -> yaml.Node:
    return dumper.represent_sequence("tag:yaml.org,2002:seq", value, flow_style=True)


_ExportDumper.add_representer(FlowList, _flow_list)


def _double_quoted_joiners(dumper: yaml.SafeDumper, value: str) -> yaml.Node:
    # A joiner is written as an escape (see render_export), which only a double-quoted
    # scalar reads back: a name holding one is double-quoted.
    style = '"' if any(c in value for c in ALLOWED_INVISIBLE) else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_ExportDumper.add_representer(str, _double_quoted_joiners)


# The platform holds no rule for re-sends: an exported entry never has one, and nobody
# would be e-mailed at a changed address unless the file says so.
RESEND_HINT = (
    "# A changed e-mail re-sends an invitation only where its entry says so: add\n"
    "# `resendOnChange: [email, primaryContact]` to the entry (`true`: on any change).\n"
)


def render_export(invites: list[CurrentInvite], base_url: str, schema_ref: str) -> str:
    """The desired-state file of ``invites``, headed with its $schema line."""
    stamp = datetime.now(UTC).strftime("%Y-%m-%d")
    header = (
        f"# yaml-language-server: $schema={escape(schema_ref)}\n"
        f"# Exported from {redact_and_escape(base_url)} on {stamp} by `reconcile export`.\n"
        f"{RESEND_HINT}"
    )
    if not invites:
        return header + "invites: []\n"
    return header + "invites:\n" + "".join(_entry_text(export_entry(i)) for i in invites)


def _entry_text(entry: Entry) -> str:
    text = yaml.dump(
        [entry.fields],
        Dumper=_ExportDumper,
        sort_keys=False,
        allow_unicode=True,
        default_flow_style=False,
        width=1000,
    )
    # Nothing invisible: the joiners a name may hold are written as escapes (inside the
    # double quotes _double_quoted_joiners chose); nothing else invisible is left.
    for joiner in ALLOWED_INVISIBLE:
        text = text.replace(joiner, f"\\u{ord(joiner):04x}")
    first, _, rest = text.partition("\n")
    # Each note on a line of its own, escaped: a server's text cannot end the comment.
    notes = "".join(f"    # {escape(note)}\n" for note in entry.left_out)
    body = "".join(f"  {line}\n" for line in rest.splitlines())
    return f"  {first}\n{notes}{body}"
