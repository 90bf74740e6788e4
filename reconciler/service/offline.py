"""The service offline: settings, the outputs checked before any work, the files read.

The API session is in ``reconciler.service.online``, so `validate` never imports the
HTTP stack.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Collection, Sequence
from pathlib import Path

import click

from reconciler.applied import (
    AlreadyApplied,
    Missing,
    Record,
    Trusted,
    Untrusted,
    read_record,
)
from reconciler.desired.changed_since import ChangedSince, changed_entries
from reconciler.desired.files import CONFIG_FILE, find_files
from reconciler.desired.state import (
    EVERYTHING,
    DesiredState,
    Selection,
    load_desired_state,
    refuse_bad_ids,
    select_invites,
)
from reconciler.errors import FileProblem, ReconcilerError
from reconciler.output.ci import (
    GITHUB_ANNOTATIONS,
    emit,
    error_command,
    github_enabled,
    report_problems,
)
from reconciler.output.console import echo_err, echo_problem
from reconciler.safetext import escape, plural
from reconciler.settings.config import Settings


def run_inputs(config_file: str | None, paths: Sequence[str]) -> list[str]:
    """The files a run reads (the config, the invite files under ``paths``), found but not
    read: an output onto one of them is refused before anything is (``refuse_input``)."""
    config = config_file or (CONFIG_FILE if os.path.isfile(CONFIG_FILE) else None)
    files = [str(f) for f in find_files(list(paths))[0]]
    return [config, *files] if config else files


def applied_since(changed_since: str | None, applied: bool, *, action: str) -> str | None:
    """The REF of --changed-since, `--changed-since-applied` resolved: the last successful
    apply when trusted; None (every invite) when there is none or it is not trusted. A
    later commit of main applied already ends the run: nothing to do, exit 0, nothing read.

    For adopt an untrusted record ends the run (exit 1): which merged changes are pending
    is unknown, and adopting them would propose to undo them.
    """
    if not applied:
        return changed_since
    if changed_since is not None:
        raise click.UsageError("give --changed-since REF or --changed-since-applied, not both")
    adopt = action == "adopt"
    record = Record.from_env()
    reading = read_record(record)
    where = f"{escape(record.branch)} of {record.shown_remote}"
    if reading.unreachable is not None:
        _say_applied(
            f"cannot read {record.shown_remote} ({reading.unreachable}): reading this "
            "clone's copies of its branches",
            "notice",
        )
    match reading.state:
        case Trusted(commit):
            _say_applied(
                f"the last successful apply is {commit} ({where}, on "
                f"{escape(record.main)}'s first-parent history)"
            )
            return commit
        case Missing():
            unknown = (
                "which merged changes are pending apply is unknown: adopt may propose to "
                "undo one not applied yet"
                if adopt
                else "every invite is planned"
            )
            _say_applied(
                f"no successful apply recorded yet (no branch {where}): {unknown}", "notice"
            )
            return None
        case Untrusted(commit, why):
            said = f"{where} is at {commit}, {why}: not trusted"
            if adopt:
                raise ReconcilerError(
                    f"--changed-since-applied: {said}, so which merged changes are pending "
                    "apply is unknown; nothing is adopted. Delete the branch and run a full "
                    "apply: the next record starts afresh"
                )
            _say_applied(f"{said}; every invite is planned", "warning")
            return None
        case AlreadyApplied(later):
            _say_applied(
                f"{later}, a later commit of {escape(record.main)}, is applied already "
                f"({where}), and HEAD ({reading.head[:12]}) is in its history: nothing to "
                f"{action}",
                "notice",
            )
            raise click.exceptions.Exit(0)


def _say_applied(text: str, level: str | None = None) -> None:
    """A line on stderr; a notice or a warning also as an annotation under GitHub."""
    line = f"--changed-since-applied: {text}"
    echo_err(f"warning: {line}" if level == "warning" else line)
    context = click.get_current_context(silent=True)
    meta = context.meta if context is not None else {}
    if level and meta.get(GITHUB_ANNOTATIONS, github_enabled()):
        emit([error_command(text, title="Last successful apply", command=level)])


def check_writable(path: str | None, action: str, *, makes_directory: bool = False) -> None:
    """Refuse, before any request, a file that could not be written once the work is done.

    ``action`` says what would fail, as the later error would: "write plan file".
    ``makes_directory``: a missing directory is made then, so the nearest existing
    parent must be a directory this user may write in.
    """
    if not path:
        return
    parent = _nearest_directory(path) if makes_directory else Path(os.path.abspath(path)).parent
    where = f" ({escape(str(parent))})" if makes_directory else ""
    if os.path.isdir(path):
        problem, where = errno.EISDIR, ""
    elif not parent.is_dir():
        problem = errno.ENOTDIR if makes_directory else errno.ENOENT
        where = where or f" (no directory {escape(str(parent))})"
    elif not os.access(path if os.path.exists(path) else parent, os.W_OK):
        problem = errno.EACCES
    else:
        return
    raise ReconcilerError(
        f"{escape(path)}: cannot {action}: {os.strerror(problem)}{where}; nothing was read"
    )


def _nearest_directory(path: str) -> Path:
    parent = Path(os.path.abspath(path)).parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    return parent


def read_desired(
    settings: Settings, paths: tuple[str, ...], selection: Selection = EVERYTHING
) -> DesiredState:
    """The desired state of the files read, narrowed to the invites selected."""
    refuse_bad_ids(selection.targets, "--target")
    refuse_bad_ids(selection.excludes, "--exclude")
    where = list(paths or settings.paths)
    state = load_desired_state(where, settings.rules)
    report_warnings(state.warnings)
    if selection.is_everything:
        return state
    changed = None
    if selection.changed_since:
        changed = changed_entries(selection.changed_since, where, state.invites)
        if changed is None:
            click.echo(
                f"--changed-since {selection.changed_since}: no base commit (a branch's "
                "first push); planning every invite.",
                err=True,
            )
    total = len(state.invites)
    picked = select_invites(state.invites, selection._replace(changed_since=None), ", ".join(where))
    state.invites = select_invites(picked, EVERYTHING, ", ".join(where), changed)
    if changed is not None and selection.changed_since is not None:
        # Planned field by field as the change touched them (plan.make): the invites it
        # did not touch are not read, and the plan says how many.
        not_read = len(picked) - len(state.invites)
        state.changed_since = ChangedSince(selection.changed_since, changed, not_read)
        _say_changed(selection, changed.keys(), len(state.invites), total)
    return state


def _say_changed(selection: Selection, changed: Collection[str], selected: int, total: int) -> None:
    ref = escape(selection.changed_since or "")
    for target in dict.fromkeys(selection.targets):
        if target not in changed:  # else the run would print a bare "No changes."
            click.echo(
                f"--target {target}: unchanged since {ref}; nothing to plan for it", err=True
            )
    click.echo(
        f"--changed-since {ref}: {plural(selected, 'invite')} of {total:,} added or changed; "
        "reading only those.",
        err=True,
    )


def report_warnings(warnings: list[FileProblem]) -> None:
    """The warnings of a run that found no error, on stderr (and as annotations under
    GitHub): the same lines as input errors, each marked `warning:`."""
    if not warnings:
        return
    for warning in warnings:
        echo_problem(warning)
    click.echo(f"{plural(len(warnings), 'warning')}; they fail nothing.", err=True)
    context = click.get_current_context(silent=True)
    if context is not None and context.meta.get(GITHUB_ANNOTATIONS):
        report_problems(warnings)
