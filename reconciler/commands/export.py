"""`reconcile export`: write current invites as a desired-state file.

This is how a team brings existing invites under git: the file validates and
plans clean against the server it came from.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime
from typing import Any

import click
import yaml

from reconciler.api.client import ApiClient, CurrentInvite
from reconciler.api.concurrency import ordered_map
from reconciler.api.limiter import Limiter
from reconciler.commands.common import check_writable, settings_for
from reconciler.commands.export_checks import check_known_ids, schema_ref_for
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
from reconciler.output.log import setup_logging
from reconciler.plan.model import stop_if_run_fatal
from reconciler.safefile import refuse_special_file, write_text_replacing
from reconciler.safetext import clean, redact_strings
from reconciler.settings.config import UPDATABLE_FIELDS
from reconciler.wording import plural


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


def invite_entry(invite: CurrentInvite) -> dict[str, Any]:
    """The desired-state entry of an invite: every updatable field, in a stable order."""
    entry: dict[str, Any] = {"id": invite.id}
    # A server may echo the secret or a token in a value: never into git.
    fields = redact_strings(invite.fields)
    for name in UPDATABLE_FIELDS:
        if fields.get(name) is None:
            continue
        value = fields[name]
        if name == "phone" and isinstance(value, str):
            value = _Quoted(value)
        elif name == "primaryContact" and isinstance(value, dict):
            keys = [k for k in _CONTACT_ORDER if k in value]
            keys += sorted(k for k in value if k not in _CONTACT_ORDER)
            value = {k: _Quoted(value[k]) if k == "phone" else value[k] for k in keys}
        elif isinstance(value, list):
            # Sorted: order carries no meaning, and a stable order keeps git diffs small.
            value = _FlowList(sorted(value, key=str))
        entry[name] = value
    return entry


def render_export(invites: list[CurrentInvite], base_url: str, schema_ref: str) -> str:
    stamp = datetime.now(UTC).strftime("%Y-%m-%d")
    header = (
        f"# yaml-language-server: $schema={schema_ref}\n"
        f"# Exported from {base_url} on {stamp} by `reconcile export`.\n"
    )
    body = yaml.dump(
        {"invites": [invite_entry(i) for i in invites]},
        Dumper=_ExportDumper,
        sort_keys=False,
        allow_unicode=True,
        default_flow_style=False,
        width=1000,
    )
    return header + body


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
    check_writable(out, "write the export")
    if out:  # before any request, as plan --out
        refuse_special_file(out, "the export")
    if out and os.path.exists(out) and not force:
        raise ReconcilerError(
            f"{out} exists; it may hold invites you manage. Choose another --out, "
            "or pass --force to overwrite it"
        )
    settings = settings_for(config_file)
    ids = list(dict.fromkeys(invite_ids))
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
        write_text_replacing(out, text, "the export")
        click.echo(f"Exported {plural(len(found), 'invite')} to {out}.", err=True)
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
