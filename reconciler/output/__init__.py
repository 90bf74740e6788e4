"""Ways to show a plan (text for a terminal or CI log, JSON, Markdown for a PR comment),
and the wording and the writing to stdout every format shares.

Each renderer is imported from its own module, on first use: the package is reached by
offline commands that must not load the plan model.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, NamedTuple

import click

from reconciler.model.invite import Contact, IdentifierSet
from reconciler.safetext import json_text, plural, redact_and_escape

if TYPE_CHECKING:
    from reconciler.plan.model import FieldChange, InviteChange, NotUpdatable, Plan


class PlanRenderer:
    """A way to show a plan: in pieces (``chunks``, printed as they come), or whole."""

    def chunks(self, plan: Plan) -> Iterator[str]:
        raise NotImplementedError

    def render(self, plan: Plan) -> str:
        return "".join(self.chunks(plan))


def renderer_for(name: str, color: bool) -> PlanRenderer:
    if name == "json":
        return JsonRenderer()
    if name == "markdown":
        from reconciler.output.markdown import MarkdownRenderer

        return MarkdownRenderer()
    from reconciler.output.text import TextRenderer

    return TextRenderer(color=color)


class JsonRenderer(PlanRenderer):
    """The plan as a JSON document: the saved plan file's own text (``reconciler.plan.saved``)."""

    def chunks(self, plan: Plan) -> Iterator[str]:
        from reconciler.plan.saved import plan_chunks

        return plan_chunks(plan)


# Wording shared by every output format.


ECHO_BATCH = 64 * 1024  # characters per write: few system calls, little held at once
# A value the platform does not hold, as text and Markdown plans show it (JSON keeps null:
# the document is a contract, docs/plans.md).
NOT_SET = "(not set)"


def shown_value(value: object) -> str:
    """A plan's value for a person: JSON's notation, escaped, and `(not set)` for none."""
    return NOT_SET if value is None else json_text(value)


def echo_chunks(chunks: Iterable[str], err: bool = False, color: bool | None = None) -> None:
    """Print ``chunks`` as one text, in batches of about ``ECHO_BATCH`` characters.

    A plan of 200,000 changes is printed as it is rendered, never held whole. ``color``
    is click.echo's: None keeps or strips styles as the run decided for stdout.
    """
    batch = ""
    for chunk in chunks:
        batch += chunk
        if len(batch) >= ECHO_BATCH:
            click.echo(batch, nl=False, err=err, color=color)
            batch = ""
    if batch:
        click.echo(batch, nl=False, err=err, color=color)


def stop_writing_to_stdout() -> None:
    """The reader of stdout has gone (`reconcile plan | head -1`): end quietly, as git does.

    No message and no traceback: whoever closed the pipe wanted no more. What is
    still buffered can never be written; pointing stdout at /dev/null keeps the
    interpreter's flush at exit from reporting the broken pipe a second time.
    The exit code stays 1: the output was cut short.
    """
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):  # not a file (in-process runs): nothing to do
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, fd)
    finally:
        os.close(devnull)


class Stdout:
    """Lines on stdout until it fails (`apply | head`, a full disk): then ``stop`` is told
    why, so no further write or e-mail is started, and the caller says the rest on stderr."""

    def __init__(self, stop: Callable[[str], None]) -> None:
        self.lost = False
        self._stop = stop

    def echo(self, line: str, write: Callable[[str], None] = click.echo) -> bool:
        """Whether ``line`` was written on stdout (by ``write``)."""
        if self.lost:
            return False
        try:
            write(line)
        except OSError as exc:
            self.lost = True
            self._stop(f"stdout could not be written ({exc.strerror or type(exc).__name__})")
            stop_writing_to_stdout()
            return False
        return True


def summary_line(plan: Plan) -> str:
    s = plan.summary
    # The one part that cannot be undone is counted apart from field changes.
    resent = f" ({plural(s.resend, 'invitation')} e-mailed again)" if s.resend else ""
    parts = [f"{s.update} to update{resent}"]
    if s.conflict:
        # Never counted as an update: apply writes nothing to an invite in conflict.
        parts.append(f"{plural(s.conflict, 'conflict')} (not written)")
    parts += [f"{s.unchanged} unchanged", plural(s.failed, "error")]
    if plan.not_updatable:
        parts.append(f"{len(plan.not_updatable)} no longer updatable")
    if plan.changed_since is not None:  # a plan of a change's own counts
        if plan.outside_change:
            parts.append(
                f"{plural(len(plan.outside_change), 'invite')} differing outside the change"
            )
        since = redact_and_escape(plan.changed_since)
        parts.append(f"{plural(plan.not_read or 0, 'invite')} not read (not changed since {since})")
    return f"Plan: {', '.join(parts)}."


CONFLICT_NOTE = (
    "changed on the platform since {ref}: apply leaves this invite alone unless --force-conflicts"
)
OUTSIDE_CHANGE_HEADING = "Differs on the platform, not part of this change"
OUTSIDE_CHANGE_NOTE = (
    "never written by this run; a full plan (without --changed-since) shows and fixes it"
)


def invite_urls_note(plan: Plan, quoted: Callable[[str], str] = redact_and_escape) -> str | None:
    """Where the plan read its invites and where apply writes them, when reconciler.yaml
    sets the paths (a pull request can): the reviewer sees the address a re-send goes to."""
    urls = plan.invite_urls
    if urls is None:
        return None
    return (
        f"Paths from reconciler.yaml: invites read at GET {quoted(urls['read'])}, "
        f"updated at PATCH {quoted(urls['update'])}, re-sent at POST {quoted(urls['resend'])}"
    )


def max_changes_warning(plan: Plan) -> str | None:
    problem = plan.too_much_change()
    return None if problem is None else f"apply will refuse this plan: {problem.reason}"


class Row(NamedTuple):
    """One line of what changes in an invite, as every format shows it: a field, or a
    contact's sub-field. Its label and values as the record holds them, not yet escaped."""

    label: str
    before: object
    after: object
    items: list[str] | None = None  # a set's: `+ "x"` and `- "y"`, each item in JSON
    kept: bool = False  # a sub-field the PATCH carries from the platform, unchanged
    conflict: bool = False  # changed on the platform since REF, where it was ``was``
    was: object = None


def field_rows(change: FieldChange) -> list[Row]:
    """A set's items added and removed, a contact's changed sub-fields, or the value."""
    before, after, delta = change.before, change.after, change.delta
    if isinstance(before, IdentifierSet) and isinstance(after, IdentifierSet):
        items = [f"+ {json_text(i)}" for i in delta.added]
        return [
            Row(change.field, before, after, items + [f"- {json_text(i)}" for i in delta.removed])
        ]
    if isinstance(before, Contact) and isinstance(after, Contact):
        return [Row(f"{change.field}.{key}", old, new) for key, old, new in delta.sub_changes]
    return [Row(change.field, before, after)]


def change_rows(change: InviteChange) -> list[Row]:
    """Each field the PATCH carries, in its order: a field in conflict as one row; else its
    rows, then every sub-field it carries that the files leave alone."""
    rows = []
    for field in change.field_changes:
        name = field.field
        if name in change.conflicts:
            rows.append(
                Row(name, field.before, field.after, conflict=True, was=change.conflicts[name])
            )
            continue
        rows += field_rows(field)
        rows += [
            Row(f"{name}.{sub}", value, value, kept=True) for sub, value in change.kept_values(name)
        ]
    return rows


NOT_UPDATABLE_HEADING = "No longer updatable"


def by_status(invites: Iterable[NotUpdatable]) -> dict[str, list[NotUpdatable]]:
    """The invites no longer updatable, redacted, by status: grouped in one pass, as the
    server names the statuses and there may be as many as invites."""
    groups: dict[str, list[NotUpdatable]] = {}
    for invite in invites:
        shown = invite.redacted()
        groups.setdefault(shown.status, []).append(shown)
    return groups


NOT_PENDING_NOTE = "{status}, not pending: it can no longer be updated and apply leaves it alone"
NOT_UPDATABLE_FIX = (
    "remove it from {source}, or bring the file in line with `reconcile export {invite_id}`"
)


def resend_note(change: InviteChange, quoted: Callable[[str], str]) -> str:
    """How every plan format says that a change e-mails the business."""
    to = f" to {quoted(change.recipient)}" if change.recipient else ""
    return f"e-mails the invitation again{to}"


KEPT_NOTE = "kept from the platform, not in the files"
# An address changed without a re-send: nobody is e-mailed, which a reviewer should know.
SILENT_ADDRESS_NOTE = (
    "no e-mail: the invitation is not sent again to the new address "
    "(resendOnChange does not ask for it)"
)


def _backticked(name: str) -> str:
    return f"`{redact_and_escape(name)}`"


def kept_warning(
    field: str,
    subs: Sequence[str],
    code: Callable[[str], str] = _backticked,
    plain: Callable[[str], str] = redact_and_escape,
) -> str:
    """When a contact's name or e-mail changes and kept sub-fields ride along.

    ``code`` shows a field name literally (Markdown's code): the sub-fields are named by
    the server, so a backtick or a link in one must not become part of the sentence.
    """
    named = ", ".join(code(f"{field}.{sub}") for sub in subs)
    it = "it" if len(subs) == 1 else "them"
    return (
        f"the new contact keeps the previous one's {', '.join(map(plain, subs))}: the PATCH "
        f"replaces {code(field)} whole, and the files do not manage {named}; add {it} to the "
        f"entry to change {it}"
    )
