"""`reconcile export`: write current invites as a desired-state file.

This is how a team brings existing invites under git: the file validates and
plans clean against the server it came from (``service.export``).

`--ids-from FILE|-`: the platform lists no invites, so ids come from its console or
its own export, often hundreds at a time, more than a command line comfortably
holds. Blank lines and `#` comments (a line's own, or after an id) are ignored;
every id is checked with the rule ids on the command line are, and a bad one is
named at FILE:LINE before any request.
"""

from __future__ import annotations

import sys

import click

from reconciler.commands.options import (
    FilePath,
    config_option,
    sandbox_option,
    settings_help,
    verbose_option,
)
from reconciler.desired.state import refuse_bad_ids
from reconciler.errors import ReconcilerError
from reconciler.files import TooLarge, read_regular
from reconciler.model.invite import ID_RULE, INVITE_ID, CurrentInvite
from reconciler.output.console import SHOWN, echo_err
from reconciler.safetext import escape, plural, quote_value, redact_and_escape
from reconciler.service.export import (
    Export,
    check_export,
    listed,
    read_export,
    render_export,
    write_export,
)
from reconciler.service.online import open_service

__all__ = ["export", "render_export"]  # render_export: what an export writes


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
) -> int:
    """Write the current state of the given invites as a desired-state YAML file.

    An id the platform does not know is listed and the others are still exported
    (exit 1). With --out, refuses ids already defined in the invite files (PATHS of
    reconciler.yaml, else ./invites): one id must live in one place; --skip-defined
    leaves them out instead. To stdout, it prints them with a note naming the entry
    to replace.

    The platform keeps no re-send rule, so no entry gets resendOnChange: add it to
    an entry whose invitation should be e-mailed again when its address changes.
    """
    refuse_bad_ids(invite_ids, "export")
    listed_ids = read_ids(ids_from) if ids_from else []
    if not invite_ids and not listed_ids:
        raise _no_ids(ids_from)
    checked = check_export(
        [*invite_ids, *listed_ids],
        config_file,
        out,
        force=force,
        skip_defined=skip_defined,
        schema_ref=schema_ref,
    )
    if not checked.ids:
        click.echo("Nothing to export: every id given is defined in your invite files.", err=True)
        return 0
    with open_service(checked.settings, sandbox) as service:
        done = read_export(service, checked)
    _note_not_pending(done.found)
    if out:
        made = write_export(done, out)
        created = f" (made the directory {escape(made)})" if made else ""
        count = plural(len(done.found), "invite")
        click.echo(f"Exported {count} to {escape(out)}{created}.", err=True)
    else:
        click.echo(done.text, nl=False)
    if done.note:
        click.echo(done.note, err=True)
    return _say_unknown(done) if done.unknown else 0


def _no_ids(ids_from: str | None) -> ReconcilerError:
    source = "stdin" if ids_from == STDIN else escape(ids_from or "")
    held = f"{source} holds none, only blank lines and comments" if ids_from else "none given"
    return ReconcilerError(
        f"no invite ids to export ({held}): name them, `reconcile export ID...`, or "
        "list them one a line in a file, `--ids-from FILE`; nothing was read"
    )


def _note_not_pending(found: list[CurrentInvite]) -> None:
    for invite in found:
        if not invite.is_pending:
            click.echo(
                f"note: {redact_and_escape(invite.id)} is "
                f"{redact_and_escape(str(invite.status))}, not pending; it can no longer be "
                "updated",
                err=True,
            )


def _say_unknown(done: Export) -> int:
    others = plural(len(done.found), "other invite")
    echo_err(
        f"error: not found on the platform, so not exported (the {others} "
        f"{'was' if len(done.found) == 1 else 'were'}):\n" + listed(done.unknown)
    )
    return 1


# -- --ids-from ---------------------------------------------------------------

STDIN = "-"
# Some 150,000 ids of 25 characters; a list of real ids is far smaller. Past it the
# source is not a list of ids (`--ids-from /dev/zero` is refused, never read whole).
MAX_IDS_BYTES = 4 * 1024 * 1024


def read_ids(source: str) -> list[str]:
    """The ids in ``source`` (a path, or ``-`` for stdin), in order, each once."""
    name = "stdin" if source == STDIN else escape(source)
    try:
        data = _read_stdin() if source == STDIN else _read_file(source)
    except TooLarge:
        raise ReconcilerError(
            f"{name}: larger than {MAX_IDS_BYTES // 1048576} MiB: too large for a list of "
            "invite ids (one a line); nothing was read"
        ) from None
    try:
        text = data.decode("utf-8-sig")  # a byte-order mark, as some editors save, is no id
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise ReconcilerError(
            f"{name}:{line}: not UTF-8 text (byte 0x{data[exc.start]:02x}): save the list of "
            "invite ids as UTF-8; nothing was read"
        ) from None
    return ids_in(text, name)


def ids_in(text: str, name: str) -> list[str]:
    """The ids of ``text``, one a line; the bad ones refused with ``name:LINE``."""
    ids: list[str] = []
    bad: list[str] = []
    # Lines end at \n only, as editors and `grep -n` count them (a \r before it is
    # stripped): splitlines() also breaks at U+2028 or \x1c, shifting every later line
    # number, and would make "a\x1cb" two ids instead of one bad one.
    for number, line in enumerate(text.split("\n"), start=1):
        ident = line.split("#", 1)[0].strip()
        if not ident:
            continue
        if INVITE_ID.fullmatch(ident):
            ids.append(ident)
        else:
            bad.append(f"{name}:{number}: {quote_value(ident)}")
    if bad:
        more = f"\n  and {len(bad) - SHOWN} more" if len(bad) > SHOWN else ""
        raise ReconcilerError(
            f"not a valid invite id ({ID_RULE}; one id a line, `#` starts a comment); "
            "nothing was read:\n" + "\n".join(f"  {b}" for b in bad[:SHOWN]) + more
        )
    return list(dict.fromkeys(ids))


def _read_file(path: str) -> bytes:
    try:
        return read_regular(path, MAX_IDS_BYTES)  # a FIFO or device: refused, never waited on
    except OSError as exc:
        pipe = (
            f"; to read ids from a command, pipe them: `COMMAND | reconcile export "
            f"--ids-from {STDIN}`"
            if "FIFO" in str(exc.strerror)
            else ""
        )
        raise ReconcilerError(
            f"{escape(path)}: cannot read the invite ids: {exc.strerror}{pipe}; nothing was read"
        ) from None


def _read_stdin() -> bytes:
    stream = sys.stdin
    if stream is None:  # started with stdin closed (`<&-`)
        raise ReconcilerError("--ids-from -: stdin is closed; nothing was read")
    if stream.isatty():  # typed or pasted: say how it ends, not wait in silence
        click.echo("Reading invite ids from the terminal, one a line; Ctrl-D ends.", err=True)
    data = stream.buffer.read(MAX_IDS_BYTES + 1)
    if len(data) > MAX_IDS_BYTES:
        raise TooLarge(MAX_IDS_BYTES)
    return data
