"""`adopt`: bring what changed on the platform into the invite files.

The opposite direction of apply: every managed field of the files is set to the
platform's current value, edited in place (``desired.rewrite``). Each file's new text
is made from the very bytes its values were loaded from, read back through the loader
and checked to hold exactly the values meant, every file before any is written. With
a ref (--changed-since), a field changed in the files since it is left alone
(``Held``): not applied yet, or a conflict.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from reconciler.api.exceptions import ApiError
from reconciler.desired.changed_since import ChangedEntry, changed_entries
from reconciler.desired.files import find_files
from reconciler.desired.rewrite import Rewritten, Wanted, rewrite
from reconciler.desired.state import (
    EVERYTHING,
    MAX_FILE_BYTES,
    Selection,
    load_desired_state,
    load_text,
    select_invites,
)
from reconciler.errors import ReconcilerError
from reconciler.files import ReadFile, read_for_rewrite, replace_all
from reconciler.model.invite import (
    Contact,
    CurrentInvite,
    DesiredInvite,
    Done,
    Failed,
    Fields,
    FieldValue,
    NotRun,
    Outcome,
    ResendRule,
    SourceLocation,
    canonical,
    kind_of,
    stop_if_run_fatal,
)
from reconciler.plan.make import compare_invite
from reconciler.plan.model import FailedInvite
from reconciler.safetext import holds_secret, redact, redact_and_escape
from reconciler.service.online import Service


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


@dataclass
class Adoption:
    """The files as read, byte for byte, and the invites chosen: before any request."""

    read: dict[str, ReadFile]
    everything: list[DesiredInvite]
    chosen: list[DesiredInvite]
    pending: dict[str, ChangedEntry]  # the files' changes since the ref
    ref: str | None  # --changed-since: never write a field changed in the files since it
    prune: bool  # remove the entries of invites no longer pending


@dataclass
class Adopted:
    """What adopt did: each file edited (written when changed), and what it did not do."""

    files: list[tuple[str, Rewritten]]
    failed: list[FailedInvite]  # not read, or holding a secret
    held: list[Held]
    ref: str | None


def read_for_adopt(
    where: list[str],
    selection: Selection = EVERYTHING,
    changed_since: str | None = None,
    *,
    prune_not_pending: bool = False,
) -> Adoption:
    """Each file as read, byte for byte: the platform's values go into exactly this text,
    and a file is replaced only while it still holds it (an edit meanwhile is refused)."""
    read = read_files(where)
    everything = load_desired_state(where).invites
    refuse_changed_while_loading(read)
    chosen = select_invites(everything, selection, ", ".join(where))
    pending: dict[str, ChangedEntry] = {}
    if changed_since is not None:
        # The files' changes since REF, before any request: a bad REF costs nothing.
        pending = changed_entries(changed_since, where, everything) or {}
    return Adoption(read, everything, chosen, pending, changed_since, prune_not_pending)


def adopt(service: Service, adoption: Adoption) -> Adopted:
    """Read the chosen invites, edit the files to their values, and replace those changed
    (all or none). Never writes to the API."""
    found = _Found(adoption.pending, adoption.prune)
    with service.readings(adoption.chosen) as readings:
        for desired, outcome in readings:
            found.read(desired, outcome)
    files = rewrite_all(found.wanted, adoption.everything, adoption.read)
    # Written through a symlink to the file it names (replace_read): the link is the user's.
    changed = [
        (adoption.read[path], text) for path, text, done in files if done.edits or done.removed
    ]
    replace_all(changed, "the invite file")
    return Adopted(
        [(path, done) for path, _, done in files], found.failed, found.held, adoption.ref
    )


@dataclass
class _Found:
    """What each invite read asks of its entry, by file."""

    pending: dict[str, ChangedEntry]  # --changed-since
    prune: bool
    wanted: dict[str, list[Wanted]] = field(default_factory=lambda: defaultdict(list))
    failed: list[FailedInvite] = field(default_factory=list)
    held: list[Held] = field(default_factory=list)  # changed in git since REF: left alone

    def read(self, desired: DesiredInvite, outcome: Outcome[CurrentInvite, ApiError]) -> None:
        match outcome:
            case Done(current):
                self.take(desired, current)
            case Failed(error):
                stop_if_run_fatal(error)
                self.failed.append(
                    FailedInvite(
                        desired.id,
                        desired.source,
                        redact(str(error)),
                        error.status,
                        error.request_id,
                    )
                )
            case NotRun():
                raise ReconcilerError("interrupted while reading invites; no file was changed")

    def take(self, desired: DesiredInvite, current: CurrentInvite) -> None:
        source = desired.source
        if self.prune and not current.is_pending:
            status = str(current.status or "in an unknown state")
            wanted = Wanted(desired.id, source.line, source.column, {}, {}, remove=status)
            self.wanted[source.path].append(wanted)
            return
        differing = self._not_secret(desired, current)
        self._hold_pending(desired, current, differing)
        if not differing:
            return
        # Text as the files hold it: in NFC, as the loader reads it back.
        held = {f: _normalized(f, current.fields.get(f)) for f in differing}
        mine = {f: desired.fields[f] for f in differing}
        self.wanted[source.path].append(Wanted(desired.id, source.line, source.column, held, mine))

    def _not_secret(self, desired: DesiredInvite, current: CurrentInvite) -> Fields:
        """The fields that differ, but those whose platform value holds a secret."""
        differing = compare_invite(desired.fields, current.fields)
        # A server may echo the secret or a token in a value: never into git, and never
        # written as "[redacted]" either, which the next apply would send as the value.
        echoed = [f for f in differing if _holds_secret(f, current.fields.get(f))]
        if echoed:
            fields = ", ".join(f"`{f}`" for f in echoed)
            message = f"the platform's {fields} holds the client secret or a token: not adopted"
            self.failed.append(FailedInvite(desired.id, desired.source, message))
        return {f: v for f, v in differing.items() if f not in echoed}

    def _hold_pending(
        self, desired: DesiredInvite, current: CurrentInvite, differing: Fields
    ) -> None:
        """Take out of ``differing`` the fields changed in the files since the ref."""
        changed = self.pending.get(desired.id)
        if changed is None:
            return
        for name in [f for f in differing if f in changed.fields]:
            platform = current.fields.get(name)
            at_ref = None if changed.at_ref is None else changed.at_ref.get(name)
            # The platform still holds REF's value (or the field is new since REF):
            # the change is not applied yet. Anything else: changed on both sides.
            conflict = at_ref is not None and (
                platform is None or not kind_of(name).equal(platform, at_ref)
            )
            written = desired.fields[name]
            self.held.append(
                Held(desired.id, desired.source, name, written, platform, at_ref, conflict)
            )
            del differing[name]


def _holds_secret(name: str, value: FieldValue | None) -> bool:
    return value is not None and any(holds_secret(t) for _, t in kind_of(name).texts(value))


def _normalized(name: str, value: FieldValue | None) -> FieldValue | None:
    return None if value is None else kind_of(name).normalized(value)


# -- the files, edited -------------------------------------------------------

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


def rewrite_all(
    wanted: dict[str, list[Wanted]], everything: list[DesiredInvite], read: dict[str, ReadFile]
) -> list[tuple[str, str, Rewritten]]:
    """Each file's new text (BOM included when it had one), from the bytes the values were
    loaded from, every one read back and checked before any is written."""
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
        rewritten = rewrite(text, wants)
        if rewritten.text != text:
            _check(path, rewritten, by_file[path])
        done.append((path, bom + rewritten.text, rewritten))
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
    expected = _meant(rewritten, before)
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


def _meant(
    rewritten: Rewritten, before: list[DesiredInvite]
) -> dict[str, tuple[Fields, ResendRule]]:
    """Each entry's values as the edits mean them: the file's before, edited, less those removed."""
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
    return expected


def _compared(entry: tuple[Fields, ResendRule]) -> tuple[dict[str, object], ResendRule]:
    fields, resend = entry
    return {name: canonical(value) for name, value in fields.items()}, resend
