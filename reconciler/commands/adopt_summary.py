"""What `reconcile adopt` did, for a pull request's body: adopted, pending apply, conflicts.

Three lists apart, so a reviewer sees at once which values the platform changed
(drift, adopted into the files), which reviewed changes are merely waiting for an
apply (left alone), and which changed on both sides. Every value from a file or the
platform is shown literally inside ``<code>``: no Markdown, HTML, mention or link
of a server's choosing survives into the body.
"""

from __future__ import annotations

import html
from collections.abc import Iterable
from dataclasses import dataclass

from reconciler.desired.rewrite import Rewritten
from reconciler.files import write_output
from reconciler.model.invite import FieldValue, SourceLocation
from reconciler.safetext import json_text, redact_and_escape

_SIGNS = str.maketrans({c: f"&#{ord(c)};" for c in "|`*_[]\\~@#"})
_LIMIT = 60_000  # a GitHub pull request body holds 65,536 characters


@dataclass(frozen=True)
class Held:
    """A field adopt left alone: changed in the files since the ref."""

    id: str
    source: SourceLocation
    field: str
    wanted: FieldValue  # what the files say
    platform: FieldValue | None
    at_ref: FieldValue | None  # None: new since the ref
    conflict: bool  # the platform holds neither the ref's value nor the files'

    def line(self, ref: str) -> str:
        where = f"{redact_and_escape(self.source.path)}:{self.source.line}"
        head = f"{where}: {redact_and_escape(self.id)} {redact_and_escape(self.field)}"
        ref_shown = redact_and_escape(ref)
        if self.conflict:
            return (
                f"{head}: conflict, changed in git since {ref_shown} and on the platform "
                f"(at {ref_shown}: {json_text(self.at_ref)}, on the platform: "
                f"{json_text(self.platform)}, in the files: {json_text(self.wanted)}); "
                "left as it is"
            )
        return (
            f"{head}: not applied yet: changed in git since {ref_shown} "
            f"(on the platform: {json_text(self.platform)}, in the files: "
            f"{json_text(self.wanted)})"
        )


def _plain(text: str) -> str:
    return html.escape(redact_and_escape(text), quote=False).translate(_SIGNS)


def _code(text: str) -> str:
    return f"<code>{_plain(text)}</code>"


def _value(value: object) -> str:
    return "(none)" if value is None else _code(json_text(value))


def _lines(rows: Iterable[str], empty: str) -> list[str]:
    rows = list(rows)
    return rows if rows else [empty]


def summary_markdown(files: list[tuple[str, Rewritten]], held: list[Held], ref: str | None) -> str:
    adopted = [
        f"- {_code(e.id)} {_code(e.field)} ({_code(path)}:{e.line}): "
        f"{_value(e.old)} → {_value(e.new)}"
        for path, rewritten in files
        for e in rewritten.edits
    ]
    adopted += [
        f"- {_code(r.id)} ({_code(path)}:{r.line}): entry removed, no longer pending"
        for path, rewritten in files
        for r in rewritten.removed
    ]
    refused = [
        f"- {_code(r.id)} {_code(r.field or 'entry')} ({_code(path)}:{r.line}): "
        + ("not removed" if r.field is None else f"not edited to {_value(r.new)}")
        + f": {_plain(r.reason)}"  # rewrite's words, which may quote the platform's value
        for path, rewritten in files
        for r in rewritten.refused
    ]
    since = f" since {_code(ref)}" if ref else ""
    pending = [
        f"- {_code(h.id)} {_code(h.field)} ({_code(h.source.path)}:{h.source.line}): "
        f"the files say {_value(h.wanted)}, the platform still {_value(h.platform)}"
        for h in held
        if not h.conflict
    ]
    conflicts = [
        f"- {_code(h.id)} {_code(h.field)} ({_code(h.source.path)}:{h.source.line}): "
        f"at the last apply {_value(h.at_ref)}, on the platform {_value(h.platform)}, "
        f"in the files {_value(h.wanted)}"
        for h in held
        if h.conflict
    ]
    parts = [
        f"### Adopted from the platform ({len(adopted)})",
        "",
        "Changed on the platform, outside git: this pull request writes them into the files.",
        "",
        *_lines(adopted, "_None._"),
        "",
        f"### Pending apply ({len(pending)})",
        "",
        f"Changed in git{since} and not applied yet: left as they are in the files; the next "
        "successful apply writes them to the platform.",
        "",
        *_lines(pending, "_None._"),
        "",
        f"### Conflicts ({len(conflicts)})",
        "",
        f"Changed in git{since} and on the platform: left as they are; decide which to keep.",
        "",
        *_lines(conflicts, "_None._"),
    ]
    if refused:
        parts += ["", f"### Not adopted ({len(refused)})", "", *refused]
    text = "\n".join(parts) + "\n"
    if len(text) > _LIMIT:
        text = text[:_LIMIT] + "\n\n_Cut short here; the job log lists every value._\n"
    return text


def write_summary(
    path: str, files: list[tuple[str, Rewritten]], held: list[Held], ref: str | None
) -> None:
    write_output(path, summary_markdown(files, held, ref), "the summary")
