"""Adopt's edits to the invite files: each file's new text made from the very bytes its
values were loaded from, read back through the loader and checked to hold exactly the
values meant, every file before any is written."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from reconciler.desired.files import find_files
from reconciler.desired.rewrite import Rewritten, Wanted, rewrite
from reconciler.desired.state import MAX_FILE_BYTES, load_text
from reconciler.errors import ReconcilerError
from reconciler.files import ReadFile, read_for_rewrite
from reconciler.model.invite import Contact, DesiredInvite, Fields, ResendRule, canonical
from reconciler.safetext import redact_and_escape

_BOM = "\ufeff"


def read_files(where: list[str]) -> dict[str, ReadFile]:
    """Every invite file under ``where`` as read now; one that cannot be read is left to
    the loader, which reports it."""
    read = {}
    for file in find_files(where)[0]:
        try:
            read[str(file)] = read_for_rewrite(str(file), MAX_FILE_BYTES)
        except OSError:
            continue
    return read


def refuse_changed_while_loading(read: dict[str, ReadFile]) -> None:
    """The values loaded are those of the bytes kept: refuse a file edited while loading."""
    for path, was in read.items():
        try:
            now = read_for_rewrite(path, MAX_FILE_BYTES).data
        except OSError:
            now = None
        if now != was.data:
            raise ReconcilerError(
                f"{redact_and_escape(path)}: changed while it was read; nothing was read from "
                "the platform and no file was changed. Run again"
            )


@dataclass
class EditedFile:
    text: str  # the new text, BOM included when the file had one
    rewritten: Rewritten

    @property
    def changed(self) -> bool:
        """Whether it is written: written through a symlink to the file it names
        (replace_read), the link being the user's, which stays."""
        return bool(self.rewritten.edits or self.rewritten.removed)


def rewrite_all(
    wanted: dict[str, list[Wanted]], everything: list[DesiredInvite], read: dict[str, ReadFile]
) -> list[tuple[str, EditedFile]]:
    """Each file's new text, from the bytes the values were loaded from, every one read
    back and checked before any is written."""
    by_file: dict[str, list[DesiredInvite]] = defaultdict(list)
    for invite in everything:
        by_file[invite.source.path].append(invite)
    done = []
    for path, wants in wanted.items():
        try:
            raw = read[path].text
        except (KeyError, UnicodeDecodeError) as exc:  # the loader refuses both first
            raise ReconcilerError(
                f"{redact_and_escape(path)}: cannot read it again: {exc}; no file was changed"
            ) from None
        bom = _BOM if raw.startswith(_BOM) else ""
        text = raw.removeprefix(_BOM)
        places = [(i.source.line, i.source.column) for i in by_file[path]]
        rewritten = rewrite(text, wants, places)
        if rewritten.text != text:
            _check(path, rewritten, by_file[path])
        done.append((path, EditedFile(bom + rewritten.text, rewritten)))
    return done


def _check(path: str, rewritten: Rewritten, before: list[DesiredInvite]) -> None:
    """Refuse, writing nothing, unless the new text reads back as exactly what was meant."""
    invites, problems = load_text(rewritten.text, path)
    if problems:
        first = problems[0]
        raise ReconcilerError(
            f"{redact_and_escape(path)}: adopting would make the file invalid ({first.line}: "
            f"{first.message}); no file was changed. Edit it by hand to the values listed by "
            "`reconcile plan`"
        )
    expected = {invite.id: (invite.fields, invite.resend_on_change) for invite in before}
    for removed in rewritten.removed:
        expected.pop(removed.id, None)
    for edit in rewritten.edits:
        fields = expected[edit.id][0]
        name, _, sub = edit.field.partition(".")
        contact = fields.get(name)
        if sub and isinstance(contact, Contact) and isinstance(edit.new, str):
            fields[name] = contact.merged(Contact({sub: edit.new}))
        elif edit.new is not None:
            fields[name] = edit.new
    got = {invite.id: (invite.fields, invite.resend_on_change) for invite in invites}
    # Plain == first: every entry not edited reads back as the very same values.
    if got.keys() != expected.keys() or any(
        got[i] != expected[i] and _compared(got[i]) != _compared(expected[i]) for i in got
    ):
        raise ReconcilerError(
            f"{redact_and_escape(path)}: adopt could not edit the file safely (it would not read "
            "back as the platform's values); no file was changed. Edit it by hand to the values "
            "listed by `reconcile plan`"
        )


def _compared(entry: tuple[Fields, ResendRule]) -> tuple[dict[str, object], ResendRule]:
    fields, resend = entry
    return {name: canonical(value) for name, value in fields.items()}, resend
