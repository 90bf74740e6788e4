"""`reconcile export`: write current invites as a desired-state file.

This is how a team brings existing invites under git: the file validates and
plans clean against the server it came from.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime
from typing import Any, NamedTuple

import click
import yaml

from reconciler.api.client import ApiClient, CurrentInvite
from reconciler.api.concurrency import ordered_map
from reconciler.api.limiter import Limiter
from reconciler.commands.common import settings_for
from reconciler.commands.export_checks import (
    check_known_ids,
    check_out_directory,
    make_out_directory,
    refuse_dropping_invites,
    schema_ref_for,
)
from reconciler.commands.options import (
    FilePath,
    config_option,
    sandbox_option,
    settings_help,
    verbose_option,
)
from reconciler.commands.remote import api_client, capacity_for
from reconciler.desired.entries import refuse_bad_ids
from reconciler.errors import ReconcilerError
from reconciler.invite import ID_KEY, OBJECT_FIELDS, SET_FIELDS, UPDATABLE_FIELDS, nfc_value
from reconciler.output.log import setup_logging
from reconciler.plan.model import stop_if_run_fatal
from reconciler.safefile import refuse_special_file, write_text_replacing
from reconciler.safetext import ALLOWED_INVISIBLE, NOT_IN_TEXT, clean, escape, holds_secret
from reconciler.schema.check import invite_validators
from reconciler.schema.messages import Where, describe, say
from reconciler.wording import plural
from reconciler.yamlload.positions import START, Lines, Located


class _Quoted(str):
    """A string always written in double quotes (phone numbers)."""


class _ExportDumper(yaml.SafeDumper):
    def increase_indent(self, flow: bool = False, indentless: bool = False) -> None:
        # Indent list items under their key, as people write them by hand.
        super().increase_indent(flow, False)


_ExportDumper.add_representer(
    _Quoted,
    lambda dumper, value: dumper.represent_scalar("tag:yaml.org,2002:str", value, style='"'),
)


def _flow_list(dumper: yaml.SafeDumper, value: list[Any]) -> yaml.Node:
    return dumper.represent_sequence("tag:yaml.org,2002:seq", value, flow_style=True)


class _FlowList(list):
    pass


_ExportDumper.add_representer(_FlowList, _flow_list)


_CONTACT_ORDER = ("name", "email", "phone")


def _double_quoted_joiners(dumper: yaml.SafeDumper, value: str) -> yaml.Node:
    # A joiner is written as an escape (see render_export), which only a double-quoted
    # scalar reads back: a name holding one is double-quoted.
    style = '"' if any(c in value for c in ALLOWED_INVISIBLE) else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_ExportDumper.add_representer(str, _double_quoted_joiners)


class Entry(NamedTuple):
    """An invite's desired-state entry, and a note for each server value left out of it."""

    fields: dict[str, Any]
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
    entry: dict[str, Any] = {ID_KEY: invite.id}
    notes: list[str] = []
    for name in UPDATABLE_FIELDS:
        value = invite.fields.get(name)
        if value is None:  # nothing held: the same as a field left out
            continue
        if holds_secret(value):
            notes.append(
                f"`{name}` left out: the server's value holds the client secret or an "
                "access token of this run, which must never reach a file"
            )
            continue
        value = nfc_value(value)  # one normal form, as validate reads it back
        if name in OBJECT_FIELDS and isinstance(value, dict):
            value = _contact(name, value, notes)
        elif name in SET_FIELDS and isinstance(value, list):
            # Sorted and without repeats: order and repeats carry no meaning, a stable
            # order keeps git diffs small, and the schema refuses repeats.
            value = _FlowList(sorted(set(value)))
        entry[name] = value
    for path, reason in _problems(entry):
        field = path[0]
        if field not in entry:  # left out whole for another of its sub-fields already
            continue
        if field in OBJECT_FIELDS and len(path) > 1 and path[1] not in _REQUIRED_SUB_FIELDS:
            entry[field].pop(path[1], None)  # an optional sub-field alone
        else:
            path = (field,)
            entry.pop(field)
        notes.append(f"`{'.'.join(map(str, path))}` left out: {reason}")
    for name, value in entry.items():
        if name == "phone" and isinstance(value, str):
            entry[name] = _Quoted(value)
        elif name in OBJECT_FIELDS and isinstance(value, dict) and "phone" in value:
            value["phone"] = _Quoted(value["phone"])
    return Entry(entry, notes)


_REQUIRED_SUB_FIELDS = ("name", "email")


def _contact(field: str, value: dict[str, Any], notes: list[str]) -> dict[str, Any]:
    """The sub-fields a file can hold, in the usual order; a note naming the others."""
    known = {k: value[k] for k in _CONTACT_ORDER if value.get(k) is not None}
    others = [k for k in value if k not in _CONTACT_ORDER and value[k] is not None]
    if others:
        shown = ", ".join(f"`{clean(str(k))[:MAX_KEY_SHOWN]}`" for k in others[:5])
        more = f" and {len(others) - 5} more" if len(others) > 5 else ""
        notes.append(
            f"`{field}` sub-fields {shown}{more} left out: a file cannot hold them; "
            "unmanaged, they keep their values when the contact is sent"
        )
    return known


MAX_KEY_SHOWN = 40


def _problems(entry: dict[str, Any]) -> list[tuple[tuple[Any, ...], str]]:
    """What validate would refuse in ``entry``: (path, reason), in validate's own words."""
    found: dict[tuple[Any, ...], str] = {}
    where = Where(Located(entry, None, START, Lines("")), "export")
    for error in invite_validators().entry.iter_errors(entry):
        path = tuple(error.absolute_path)
        if not path:  # about the entry as a whole: a required sub-field is under its field
            continue
        path = path[:2] if path[0] in OBJECT_FIELDS else path[:1]
        problems = describe(error, where)
        reason = problems[0].message if problems else "the schema refuses it"
        found.setdefault(path, _unquoted(reason))
    for name, value in entry.items():
        for path, text in _texts(value, (name,)):
            match = NOT_IN_TEXT.search(text)
            if match is not None:
                path = path[:2] if name in OBJECT_FIELDS else path[:1]
                char = match.group()
                shown = f"U+{ord(char):04X}"
                found.setdefault(path, f"{say(text)} holds {shown}, which a file may not hold")
    # A whole field left out needs no note for its sub-fields as well.
    return [(p, r) for p, r in found.items() if len(p) == 1 or (p[0],) not in found]


def _unquoted(message: str) -> str:
    """A validate message without its leading "`field`: ", which the note names already."""
    return message.split(": ", 1)[1] if message.startswith("`") and ": " in message else message


def _texts(value: Any, path: tuple[Any, ...]) -> list[tuple[tuple[Any, ...], str]]:
    if isinstance(value, str):
        return [(path, value)]
    if isinstance(value, dict):
        return [t for k, v in value.items() for t in _texts(v, (*path, k))]
    if isinstance(value, list):
        return [t for v in value for t in _texts(v, path)]
    return []


def render_export(invites: list[CurrentInvite], base_url: str, schema_ref: str) -> str:
    stamp = datetime.now(UTC).strftime("%Y-%m-%d")
    header = (
        f"# yaml-language-server: $schema={escape(schema_ref)}\n"
        f"# Exported from {clean(base_url)} on {stamp} by `reconcile export`.\n"
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


@click.command(epilog=settings_help(api=True, reads_paths=True, extra=("schema_ref",)))
@click.argument("invite_ids", nargs=-1, required=True, metavar="ID...")
@click.option("--out", type=FilePath(), help="Write here instead of stdout.")
@click.option("--force", is_flag=True, help="Overwrite --out if it exists.")
@click.option(
    "--schema-ref",
    help="The $schema reference written on the first line (default: the schema in this "
    "repository, relative to --out).",
)
@config_option
@sandbox_option
@verbose_option
def export(
    invite_ids: tuple[str, ...],
    out: str | None,
    force: bool,
    schema_ref: str | None,
    config_file: str | None,
    sandbox: bool,
    verbose: bool,
) -> int:
    """Write the current state of the given invites as a desired-state YAML file.

    With --out, refuses ids already defined in the invite files (PATHS of
    reconciler.yaml, else ./invites): one id must live in one place. To stdout, it
    prints them with a note naming the entry to replace.
    """
    setup_logging(verbose)
    refuse_bad_ids(invite_ids, "export")
    check_out_directory(out)
    if out:  # before any request, as plan --out
        refuse_special_file(out, "the export")
    if out and os.path.exists(out) and not force:
        raise ReconcilerError(
            f"{out} exists; it may hold invites you manage. Choose another --out, "
            f"pass --force to overwrite it, or run `reconcile adopt {out}` to bring the "
            "platform's values into it"
        )
    settings = settings_for(config_file)
    ids = list(dict.fromkeys(invite_ids))
    if out and force:
        refuse_dropping_invites(out, ids)
    check_known_ids(ids, settings.paths, out, force)
    ref, note = schema_ref_for(out, schema_ref, settings.schema_ref)
    capacity = capacity_for(settings)
    limiter = capacity.limiter
    with api_client(settings, sandbox, capacity) as client:
        found = _read_invites(client, ids, limiter)
        base_url = client.base_url
    for invite in found:
        if not invite.is_pending:
            click.echo(
                f"note: {clean(invite.id)} is {clean(str(invite.status))}, not pending; "
                "it can no longer be updated",
                err=True,
            )
    text = render_export(found, base_url, ref)
    if out:
        # Like a plan file: a temporary file renamed over --out, never written through
        # a symlink, never over a device or FIFO.
        made = make_out_directory(out)
        write_text_replacing(out, text, "the export")
        created = f" (made the directory {escape(made)})" if made else ""
        click.echo(f"Exported {plural(len(found), 'invite')} to {out}{created}.", err=True)
    else:
        click.echo(text, nl=False)
    if note:
        click.echo(note, err=True)
    return 0


def _read_invites(client: ApiClient, ids: list[str], limiter: Limiter) -> list[CurrentInvite]:
    """Every invite asked for, or an error naming each one that could not be read."""
    found: list[CurrentInvite] = []
    problems = []
    for invite_id, outcome in ordered_map(client.get_invite, ids, limiter, client.stop):
        if outcome.error is not None:
            stop_if_run_fatal(outcome.error)
            problems.append(f"{invite_id}: {outcome.error}")
        elif outcome.value is not None:
            found.append(outcome.value)
    if problems:
        raise ReconcilerError("nothing exported:\n" + "\n".join(f"  {p}" for p in problems))
    return found
