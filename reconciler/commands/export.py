"""`reconcile export`: write current invites as a desired-state file.

This is how a team brings existing invites under git: the file validates and
plans clean against the server it came from.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime

import click
import yaml

from reconciler.api.capacity.concurrency import capacity_for, ordered_map
from reconciler.api.capacity.limiter import Limiter
from reconciler.api.client import ApiClient
from reconciler.api.exceptions import ApiError, NotFound
from reconciler.commands.common import settings_for
from reconciler.commands.export_checks import (
    check_known_ids,
    check_out_directory,
    make_out_directory,
    refuse_dropping_invites,
    refuse_dropping_unknown,
    schema_ref_for,
)
from reconciler.commands.export_entry import Entry, export_entry
from reconciler.commands.ids_from import STDIN, read_ids
from reconciler.commands.options import FilePath, config_option, sandbox_option, verbose_option
from reconciler.commands.remote import api_client
from reconciler.commands.settings_help import settings_help
from reconciler.desired.state import refuse_bad_ids
from reconciler.errors import ReconcilerError
from reconciler.files import refuse_special_file, replace_read, write_output
from reconciler.model.invite import CurrentInvite, Done, Failed, FlowList, Quoted, stop_if_run_fatal
from reconciler.output.color import echo_err
from reconciler.output.log import setup_logging
from reconciler.safetext import ALLOWED_INVISIBLE, escape, plural, redact_and_escape


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


def render_export(invites: list[CurrentInvite], base_url: str, schema_ref: str) -> str:
    stamp = datetime.now(UTC).strftime("%Y-%m-%d")
    header = (
        f"# yaml-language-server: $schema={escape(schema_ref)}\n"
        f"# Exported from {redact_and_escape(base_url)} on {stamp} by `reconcile export`.\n"
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
@click.argument("invite_ids", nargs=-1, metavar="[ID]...")
@click.option(
    "--ids-from",
    type=FilePath(allow_dash=True),
    help="Also export the ids in this file, one a line (`-`: stdin; blank lines and "
    "`#` comments ignored).",
)
@click.option("--out", type=FilePath(), help="Write here instead of stdout.")
@click.option(
    "--force",
    is_flag=True,
    help="Replace --out if it exists: only a file that parses, defines no other invites, "
    "and is unchanged when written.",
)
@click.option(
    "--skip-defined",
    is_flag=True,
    help="Leave out the ids already defined in the invite files (each named) instead of "
    "refusing the export.",
)
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
    ids_from: str | None,
    out: str | None,
    force: bool,
    skip_defined: bool,
    schema_ref: str | None,
    config_file: str | None,
    sandbox: bool,
    verbose: bool,
) -> int:
    """Write the current state of the given invites as a desired-state YAML file.

    An id the platform does not know is listed and the others are still exported
    (exit 1). With --out, refuses ids already defined in the invite files (PATHS of
    reconciler.yaml, else ./invites): one id must live in one place; --skip-defined
    leaves them out instead. To stdout, it prints them with a note naming the entry
    to replace.
    """
    setup_logging(verbose)
    refuse_bad_ids(invite_ids, "export")
    listed = read_ids(ids_from) if ids_from else []
    if not invite_ids and not listed:
        source = "stdin" if ids_from == STDIN else escape(ids_from or "")
        held = f"{source} holds none, only blank lines and comments" if ids_from else "none given"
        raise ReconcilerError(
            f"no invite ids to export ({held}): name them, `reconcile export ID...`, or "
            "list them one a line in a file, `--ids-from FILE`; nothing was read"
        )
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
    ids = list(dict.fromkeys([*invite_ids, *listed]))
    replacing = refuse_dropping_invites(out, ids) if out and force else None
    ids = check_known_ids(ids, settings.paths, out, force, skip_defined)
    if not ids:
        click.echo("Nothing to export: every id given is defined in your invite files.", err=True)
        return 0
    ref, note = schema_ref_for(out, schema_ref, settings.schema_ref)
    capacity = capacity_for(settings)
    limiter = capacity.limiter
    with api_client(settings, sandbox, capacity) as client:
        found, unknown = _read_invites(client, ids, limiter)
        base_url = client.base_url
    if replacing is not None and unknown:
        refuse_dropping_unknown(replacing, [i for i, _ in unknown])
    for invite in found:
        if not invite.is_pending:
            click.echo(
                f"note: {redact_and_escape(invite.id)} is "
                f"{redact_and_escape(str(invite.status))}, not pending; it can no longer be "
                "updated",
                err=True,
            )
    text = render_export(found, base_url, ref)
    if out:
        # Like a plan file: a temporary file renamed over --out, never written through
        # a symlink, never over a device or FIFO.
        made = make_out_directory(out)
        if replacing is not None:  # only while it is still the file read and checked
            replace_read(replacing, text, "the export", through_links=False)
        else:  # a file that appeared meanwhile is never replaced; a dangling link is
            write_output(out, text, "the export", create_only=not os.path.islink(out))
        created = f" (made the directory {escape(made)})" if made else ""
        click.echo(f"Exported {plural(len(found), 'invite')} to {escape(out)}{created}.", err=True)
    else:
        click.echo(text, nl=False)
    if note:
        click.echo(note, err=True)
    if unknown:
        others = plural(len(found), "other invite")
        echo_err(
            f"error: not found on the platform, so not exported (the {others} "
            f"{'was' if len(found) == 1 else 'were'}):\n" + _listed(unknown)
        )
        return 1
    return 0


def _read_invites(
    client: ApiClient, ids: list[str], limiter: Limiter
) -> tuple[list[CurrentInvite], list[tuple[str, ApiError]]]:
    """The invites read, and the ids the platform does not know with its answer.

    An unknown id leaves the others to be exported; any other failure exports nothing
    (run again, the file is whole), with every id that could not be read named.
    """
    found: list[CurrentInvite] = []
    unknown: list[tuple[str, ApiError]] = []
    problems: list[tuple[str, ApiError]] = []
    for invite_id, outcome in ordered_map(
        client.get_invite, ids, limiter, client.stop, inline=True
    ):
        match outcome:
            case Done(invite):
                found.append(invite)
            case Failed(error):
                stop_if_run_fatal(error)
                (unknown if isinstance(error, NotFound) else problems).append((invite_id, error))
    if problems or (unknown and not found):
        hint = (
            "\n(invite ids come from the platform's console or its own export)"
            if not problems
            else ""
        )
        raise ReconcilerError("nothing exported:\n" + _listed(problems + unknown) + hint)
    return found, unknown


def _listed(failures: list[tuple[str, ApiError]]) -> str:
    """One line per id, with the platform's answer (status, message, requestId)."""
    return "\n".join(
        f"  {redact_and_escape(ident)}: {redact_and_escape(str(error))}"
        for ident, error in failures
    )
