"""`reconcile adopt`: bring what changed on the platform into the invite files.

The opposite direction of apply: every managed field of the files is set to
the platform's current value, edited in place (``desired.rewrite``), so a
change made in the platform's UI becomes a reviewed commit instead of drift
that the next apply reverts. Never writes to the API. Every file is edited in
memory and read back through the loader first; only when each reads back as
valid, with exactly the values meant, is any file replaced.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

import click

from reconciler.api.capacity.concurrency import capacity_for
from reconciler.api.client import read_current
from reconciler.commands.adopt_files import (
    EditedFile,
    read_files,
    refuse_changed_while_loading,
    rewrite_all,
)
from reconciler.commands.adopt_summary import Held, write_summary
from reconciler.commands.common import applied_since, check_writable, run_inputs, settings_for
from reconciler.commands.options import (
    changed_since_applied_option,
    config_option,
    parallelism_option,
    paths_argument,
    sandbox_option,
    target_options,
    verbose_option,
)
from reconciler.commands.remote import api_client, reading_progress
from reconciler.commands.settings_help import settings_help
from reconciler.desired.changed_since import ChangedEntry, changed_entries
from reconciler.desired.rewrite import Wanted
from reconciler.desired.state import Selection, load_desired_state, refuse_bad_ids, select_invites
from reconciler.errors import ReconcilerError
from reconciler.files import refuse_input, replace_all
from reconciler.model.invite import (
    CurrentInvite,
    DesiredInvite,
    Done,
    Failed,
    FieldValue,
    NotRun,
    kind_of,
    stop_if_run_fatal,
)
from reconciler.output.color import echo_err
from reconciler.output.failures import echo_errors
from reconciler.output.log import setup_logging
from reconciler.plan.make import compare_invite
from reconciler.plan.model import FailedInvite
from reconciler.safetext import holds_secret, json_text, plural, redact, redact_and_escape


@click.command(epilog=settings_help(api=True, reads_paths=True))
@paths_argument
@target_options
@click.option(
    "--prune-not-pending",
    is_flag=True,
    help="Also remove the entries of invites the platform reports in a status other than "
    "pending (accepted, expired); an invite with no status is kept.",
)
@click.option(
    "--changed-since",
    metavar="REF",
    help="Never write a field whose value in the files changed since git REF (the last "
    "successful apply): it is listed as not applied yet, or as a conflict when the "
    "platform holds neither value.",
)
@changed_since_applied_option
@click.option(
    "--summary",
    "summary_file",
    metavar="FILE",
    type=click.Path(dir_okay=False),
    help="Also write what was adopted, what is pending apply and the conflicts, each "
    "apart, as Markdown (a pull request's body).",
)
@config_option
@parallelism_option
@sandbox_option
@verbose_option
def adopt(
    paths: tuple[str, ...],
    targets: tuple[str, ...],
    excludes: tuple[str, ...],
    prune_not_pending: bool,
    changed_since: str | None,
    changed_since_applied: bool,
    summary_file: str | None,
    config_file: str | None,
    parallelism: int | None,
    sandbox: bool,
    verbose: bool,
) -> int:
    """Rewrite the invite files so every managed field holds the platform's current value.

    Only values that differ are edited, in place: comments, key order, quoting and
    layout elsewhere stay as they are. Each edit is printed as
    `FILE:LINE: ID FIELD: OLD -> NEW`. Never writes to the API.

    With --changed-since REF, a field whose value in the files changed since REF is
    never written: the platform not holding it yet is a change not applied yet, not
    drift.
    """
    setup_logging(verbose)
    changed_since = applied_since(changed_since, changed_since_applied, adopt=True)
    refuse_bad_ids(targets, "--target")
    refuse_bad_ids(excludes, "--exclude")
    settings = settings_for(config_file, parallelism=parallelism)
    check_writable(summary_file, "write the summary")
    where = list(paths or settings.paths)
    refuse_input(summary_file, run_inputs(config_file, where), "--summary", "the summary")
    # Each file as read, byte for byte: the platform's values go into exactly this text,
    # and a file is replaced only while it still holds it (an edit meanwhile is refused).
    read = read_files(where)
    everything = load_desired_state(where).invites
    refuse_changed_while_loading(read)
    chosen = select_invites(everything, Selection(targets, excludes), ", ".join(where))
    pending: dict[str, ChangedEntry] = {}
    if changed_since is not None:
        # The files' changes since REF, before any request: a bad REF costs nothing.
        pending = changed_entries(changed_since, where, everything) or {}
    capacity = capacity_for(settings)
    limiter = capacity.limiter
    found = _Found(pending)
    with api_client(settings, sandbox, capacity) as client:
        progress = reading_progress(client, len(chosen))
        readings = read_current(
            client,
            chosen,
            limiter,
            client.stop,
            on_read=lambda failed: progress.advance(failed=failed),
        )
        try:
            for desired, outcome in readings:
                match outcome:
                    case Done(current):
                        found.take(desired, current, prune_not_pending)
                    case Failed(error):
                        stop_if_run_fatal(error)
                        found.failed.append(
                            FailedInvite(
                                desired.id,
                                desired.source,
                                redact(str(error)),
                                error.status,
                                error.request_id,
                            )
                        )
                    case NotRun():
                        raise ReconcilerError(
                            "interrupted while reading invites; no file was changed"
                        )
        finally:
            readings.close()
            progress.finish()
    files = rewrite_all(found.wanted, everything, read)
    replace_all(
        [(read[path], done.text) for path, done in files if done.changed], "the invite file"
    )
    code = _report(files, found.failed, found.held, changed_since)
    if summary_file is not None:
        write_summary(summary_file, [(p, d.rewritten) for p, d in files], found.held, changed_since)
    return code


@dataclass
class _Found:
    """What each invite read asks of its entry, by file."""

    pending: dict[str, ChangedEntry] = field(default_factory=dict)  # --changed-since
    wanted: dict[str, list[Wanted]] = field(default_factory=lambda: defaultdict(list))
    failed: list[FailedInvite] = field(default_factory=list)
    held: list[Held] = field(default_factory=list)  # changed in git since REF: left alone

    def take(self, desired: DesiredInvite, current: CurrentInvite, prune: bool) -> None:
        source = desired.source
        if prune and not current.is_pending:
            status = str(current.status or "in an unknown state")
            wanted = Wanted(desired.id, source.line, source.column, {}, {}, remove=status)
            self.wanted[source.path].append(wanted)
            return
        written = desired.fields
        differing = compare_invite(written, current.fields)
        # A server may echo the secret or a token in a value: never into git, and never
        # written as "[redacted]" either, which the next apply would send as the value.
        echoed = [f for f in differing if _holds_secret(f, current.fields.get(f))]
        if echoed:
            fields = ", ".join(f"`{f}`" for f in echoed)
            message = f"the platform's {fields} holds the client secret or a token: not adopted"
            self.failed.append(FailedInvite(desired.id, source, message))
            differing = {f: v for f, v in differing.items() if f not in echoed}
        changed = self.pending.get(desired.id)
        if changed is not None:
            for name in [f for f in differing if f in changed.fields]:
                platform = current.fields.get(name)
                at_ref = None if changed.at_ref is None else changed.at_ref.get(name)
                # The platform still holds REF's value (or the field is new since REF):
                # the change is not applied yet. Anything else: changed on both sides.
                conflict = at_ref is not None and (
                    platform is None or not kind_of(name).equal(platform, at_ref)
                )
                self.held.append(
                    Held(desired.id, source, name, written[name], platform, at_ref, conflict)
                )
                del differing[name]
        if not differing:
            return
        # Text as the files hold it: in NFC, as the loader reads it back.
        held = {f: _normalized(f, current.fields.get(f)) for f in differing}
        mine = {f: written[f] for f in differing}
        self.wanted[source.path].append(Wanted(desired.id, source.line, source.column, held, mine))


def _holds_secret(name: str, value: FieldValue | None) -> bool:
    return value is not None and any(holds_secret(t) for _, t in kind_of(name).texts(value))


def _normalized(name: str, value: FieldValue | None) -> FieldValue | None:
    return None if value is None else kind_of(name).normalized(value)


def _report(
    files: list[tuple[str, EditedFile]],
    failed: list[FailedInvite],
    held: list[Held],
    ref: str | None,
) -> int:
    values = removed = refused = changed = 0
    for path, done in files:
        shown = redact_and_escape(path)
        result = done.rewritten
        for edit in result.edits:
            click.echo(
                f"{shown}:{edit.line}: {redact_and_escape(edit.id)} "
                f"{redact_and_escape(edit.field)}: {json_text(edit.old)} -> {json_text(edit.new)}"
            )
        for gone in result.removed:
            click.echo(
                f"{shown}:{gone.line}: {redact_and_escape(gone.id)}: entry removed "
                f"({redact_and_escape(str(gone.old))}, no longer pending)"
            )
        for refusal in result.refused:
            what = f" {redact_and_escape(refusal.field)}" if refusal.field else " entry"
            wanted = (
                "not removed"
                if refusal.field is None
                else f"not edited to {json_text(refusal.new)}"
            )
            click.echo(
                f"{shown}:{refusal.line}: {redact_and_escape(refusal.id)}{what}: {wanted}: "
                f"{refusal.reason}",
                err=True,
            )
        values += len(result.edits)
        removed += len(result.removed)
        refused += len(result.refused)
        changed += bool(result.edits or result.removed)
    for one in held:
        click.echo(one.line(ref or ""))
    conflicts = sum(one.conflict for one in held)
    parts = []
    if values:
        parts.append(f"adopted {plural(values, 'value')}")
    if removed:
        parts.append(f"removed {plural(removed, 'entry').replace('entrys', 'entries')}")
    if parts:
        click.echo(f"{' and '.join(parts).capitalize()} in {plural(changed, 'file')}.", err=True)
    elif not refused and not failed and not held:
        click.echo("Nothing to adopt: the files hold the platform's values.", err=True)
    elif not refused and not failed:
        click.echo("Nothing to adopt: what differs was changed in git since the ref.", err=True)
    if held:
        shown_ref = redact_and_escape(ref or "")
        click.echo(
            f"Left alone, changed in git since {shown_ref}: "
            f"{plural(len(held) - conflicts, 'value')} not applied yet, "
            f"{plural(conflicts, 'conflict')}.",
            err=True,
        )
    if refused:
        echo_err(
            f"error: {plural(refused, 'value')} could not be adopted (listed above); "
            "edit them by hand"
        )
    if conflicts:
        echo_err(
            f"error: {plural(conflicts, 'value')} changed both in git since "
            f"{redact_and_escape(ref or '')} and on the platform (listed above): decide which "
            "to keep, in the files (then apply) or on the platform"
        )
    echo_errors(failed)
    return 1 if refused or failed or conflicts else 0
