"""`reconcile adopt`: bring what changed on the platform into the invite files.

The opposite direction of apply (``service.adopt``): every managed field of the files
is set to the platform's current value, edited in place, so a change made in the
platform's UI becomes a reviewed commit instead of drift that the next apply reverts.
Never writes to the API. This module prints each edit, and writes --summary: what was
adopted, what is pending apply and the conflicts, three lists apart, so a reviewer sees
at once which values the platform changed, which reviewed changes merely wait for an
apply, and which changed on both sides. Every value from a file or the platform is
shown literally inside ``<code>`` there: no Markdown, HTML, mention or link of a
server's choosing survives into the body.
"""

from __future__ import annotations

import html

import click

from reconciler.commands.options import (
    changed_since_applied_option,
    config_option,
    parallelism_option,
    paths_argument,
    sandbox_option,
    settings_help,
    target_options,
    verbose_option,
)
from reconciler.desired.rewrite import Rewritten
from reconciler.desired.state import Selection, refuse_bad_ids
from reconciler.files import refuse_input, write_output
from reconciler.output.console import echo_err, echo_errors
from reconciler.safetext import json_text, plural, redact_and_escape
from reconciler.service import adopt as service
from reconciler.service.adopt import Adopted, Held
from reconciler.service.offline import applied_since, check_writable, run_inputs
from reconciler.service.online import open_service
from reconciler.settings.config import load_settings


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
) -> int:
    """Rewrite the invite files so every managed field holds the platform's current value.

    Only values that differ are edited, in place: comments, key order, quoting and
    layout elsewhere stay as they are. Each edit is printed as
    `FILE:LINE: ID FIELD: OLD -> NEW`. Never writes to the API.

    With --changed-since REF, a field whose value in the files changed since REF is
    never written: the platform not holding it yet is a change not applied yet, not
    drift. resendOnChange is the files' own (the platform holds no such rule): adopt
    leaves it as written.
    """
    ref = applied_since(changed_since, changed_since_applied, action="adopt")
    refuse_bad_ids(targets, "--target")
    refuse_bad_ids(excludes, "--exclude")
    settings = load_settings(config_file).with_overrides(parallelism=parallelism)
    check_writable(summary_file, "write the summary")
    where = list(paths or settings.paths)
    refuse_input(summary_file, run_inputs(config_file, where), "--summary", "the summary")
    selection = Selection(targets, excludes)
    adoption = service.read_for_adopt(where, selection, ref, prune_not_pending=prune_not_pending)
    with open_service(settings, sandbox) as online:
        adopted = service.adopt(online, adoption)
    code = _report(adopted)
    if summary_file is not None:
        write_output(
            summary_file, summary_markdown(adopted.files, adopted.held, ref), "the summary"
        )
    return code


def _report(adopted: Adopted) -> int:
    """Each edit, removal and refusal, the values held, then the counts and the errors."""
    values = removed = refused = changed = 0
    for path, result in adopted.files:
        _say_edits(redact_and_escape(path), result)
        values += len(result.edits)
        removed += len(result.removed)
        refused += len(result.refused)
        changed += bool(result.edits or result.removed)
    held, ref = adopted.held, adopted.ref or ""
    conflicts = sum(one.conflict for one in held)
    for one in held:
        click.echo(held_line(one, ref))
    _say_counts(values, removed, changed, refused, adopted)
    if held:
        click.echo(
            f"Left alone, changed in git since {redact_and_escape(ref)}: "
            f"{plural(len(held) - conflicts, 'value')} not applied yet, "
            f"{plural(conflicts, 'conflict')}.",
            err=True,
        )
    _say_refused_and_conflicts(refused, conflicts, ref)
    echo_errors(adopted.failed)
    return 1 if refused or adopted.failed or conflicts else 0


def _say_refused_and_conflicts(refused: int, conflicts: int, ref: str) -> None:
    if refused:
        echo_err(
            f"error: {plural(refused, 'value')} could not be adopted (listed above); "
            "edit them by hand"
        )
    if conflicts:
        echo_err(
            f"error: {plural(conflicts, 'value')} changed both in git since "
            f"{redact_and_escape(ref)} and on the platform (listed above): decide which "
            "to keep, in the files (then apply) or on the platform"
        )


def _say_edits(shown: str, result: Rewritten) -> None:
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
            "not removed" if refusal.field is None else f"not edited to {json_text(refusal.new)}"
        )
        click.echo(
            f"{shown}:{refusal.line}: {redact_and_escape(refusal.id)}{what}: {wanted}: "
            f"{refusal.reason}",
            err=True,
        )


def _say_counts(values: int, removed: int, changed: int, refused: int, adopted: Adopted) -> None:
    parts = []
    if values:
        parts.append(f"adopted {plural(values, 'value')}")
    if removed:
        parts.append(f"removed {plural(removed, 'entry').replace('entrys', 'entries')}")
    if parts:
        click.echo(f"{' and '.join(parts).capitalize()} in {plural(changed, 'file')}.", err=True)
    elif not refused and not adopted.failed and not adopted.held:
        click.echo("Nothing to adopt: the files hold the platform's values.", err=True)
    elif not refused and not adopted.failed:
        click.echo("Nothing to adopt: what differs was changed in git since the ref.", err=True)


def held_line(held: Held, ref: str) -> str:
    """A field left alone, changed in the files since ``ref``: not applied yet, or a conflict."""
    where = f"{redact_and_escape(held.source.path)}:{held.source.line}"
    head = f"{where}: {redact_and_escape(held.id)} {redact_and_escape(held.field)}"
    ref_shown = redact_and_escape(ref)
    if held.conflict:
        return (
            f"{head}: conflict, changed in git since {ref_shown} and on the platform "
            f"(at {ref_shown}: {json_text(held.at_ref)}, on the platform: "
            f"{json_text(held.platform)}, in the files: {json_text(held.wanted)}); "
            "left as it is"
        )
    return (
        f"{head}: not applied yet: changed in git since {ref_shown} "
        f"(on the platform: {json_text(held.platform)}, in the files: "
        f"{json_text(held.wanted)})"
    )


# -- --summary: the pull request's body --------------------------------------

_SIGNS = str.maketrans({c: f"&#{ord(c)};" for c in "|`*_[]\\~@#"})
_LIMIT = 60_000  # a GitHub pull request body holds 65,536 characters


def _plain(text: str) -> str:
    return html.escape(redact_and_escape(text), quote=False).translate(_SIGNS)


def _code(text: str) -> str:
    return f"<code>{_plain(text)}</code>"


def _value(value: object) -> str:
    return "(none)" if value is None else _code(json_text(value))


def summary_markdown(files: list[tuple[str, Rewritten]], held: list[Held], ref: str | None) -> str:
    since = f" since {_code(ref)}" if ref else ""

    def held_rows(conflict: bool) -> list[str]:
        return [
            f"- {_code(h.id)} {_code(h.field)} ({_code(h.source.path)}:{h.source.line}): "
            + (
                f"at the last apply {_value(h.at_ref)}, on the platform {_value(h.platform)}, "
                f"in the files {_value(h.wanted)}"
                if conflict
                else f"the files say {_value(h.wanted)}, the platform still {_value(h.platform)}"
            )
            for h in held
            if h.conflict is conflict
        ]

    sections = [
        (
            "Adopted from the platform",
            "Changed on the platform, outside git: this pull request writes them into the files.",
            _adopted_rows(files),
        ),
        (
            "Pending apply",
            f"Changed in git{since} and not applied yet: left as they are in the files; the "
            "next successful apply writes them to the platform.",
            held_rows(False),
        ),
        (
            "Conflicts",
            f"Changed in git{since} and on the platform: left as they are; decide which to keep.",
            held_rows(True),
        ),
    ]
    parts = [
        f"### {title} ({len(rows)})\n\n{about}\n\n" + "\n".join(rows or ["_None._"])
        for title, about, rows in sections
    ]
    refused = _refused_rows(files)
    if refused:
        parts.append(f"### Not adopted ({len(refused)})\n\n" + "\n".join(refused))
    text = "\n\n".join(parts) + "\n"
    if len(text) > _LIMIT:
        text = text[:_LIMIT] + "\n\n_Cut short here; the job log lists every value._\n"
    return text


def _adopted_rows(files: list[tuple[str, Rewritten]]) -> list[str]:
    adopted = [
        f"- {_code(e.id)} {_code(e.field)} ({_code(path)}:{e.line}): "
        f"{_value(e.old)} → {_value(e.new)}"
        for path, rewritten in files
        for e in rewritten.edits
    ]
    return adopted + [
        f"- {_code(r.id)} ({_code(path)}:{r.line}): entry removed, no longer pending"
        for path, rewritten in files
        for r in rewritten.removed
    ]


def _refused_rows(files: list[tuple[str, Rewritten]]) -> list[str]:
    return [
        f"- {_code(r.id)} {_code(r.field or 'entry')} ({_code(path)}:{r.line}): "
        + ("not removed" if r.field is None else f"not edited to {_value(r.new)}")
        + f": {_plain(r.reason)}"  # rewrite's words, which may quote the platform's value
        for path, rewritten in files
        for r in rewritten.refused
    ]
