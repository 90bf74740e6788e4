"""Desired state: the invites as the YAML files in git say they should be.

Each entry of `invites:` is checked and turned into a record as soon as the loader has
read it, while the file is still being parsed; its positions are dropped once it is
checked, so memory holds the compact records, not the document. What a file can hold
of values from elsewhere (``unheld``, for `export` and `adopt`) is found by the same
checks; which invites a run plans is ``select_invites``.
"""

from __future__ import annotations

import gc
import os
import unicodedata
from collections.abc import Collection, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from difflib import get_close_matches
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple
from urllib.parse import quote

from reconciler.desired.files import find_files
from reconciler.desired.rules import NO_RULES, Rules, RunChecks, Texts
from reconciler.errors import FileProblem, InputError, ReconcilerError
from reconciler.files import open_regular
from reconciler.model.invite import (
    ID_KEY,
    ID_RULE,
    INVITE_ID,
    MAX_MARKS_IN_A_ROW,
    RECONCILER_KEYS,
    RESEND_KEY,
    DesiredInvite,
    Fields,
    FieldValue,
    SourceLocation,
    field_kinds,
    fields_from_json,
    fields_json,
    kind_of,
    marks_in_a_row,
    nfc,
    resend_rule,
    too_many_marks,
)
from reconciler.safetext import NOT_IN_TEXT, escape, quote_value
from reconciler.schema.check import invite_validators, validate
from reconciler.schema.messages import Where, describe
from reconciler.yamlload.builder import START, Lines, Located, Mark
from reconciler.yamlload.source import FileSource, stream, suspect

if TYPE_CHECKING:
    from reconciler.desired.changed_since import ChangedSince

# A bound on what one file may hold: 200,000 invites take about 60 MB.
MAX_FILE_BYTES = 256 * 1024 * 1024
_TOO_LARGE = f"larger than {MAX_FILE_BYTES // 2**20} MiB; split it into several files"


@dataclass
class DesiredState:
    invites: list[DesiredInvite]
    files: list[str] = field(default_factory=list)
    # --changed-since REF: what the change did to each invite read (None: a full run).
    changed_since: ChangedSince | None = None
    # What the policies and built-in checks of warning severity found: shown, fail nothing.
    warnings: list[FileProblem] = field(default_factory=list)


def load_desired_state(paths: list[str], rules: Rules = NO_RULES) -> DesiredState:
    """Read and check every file (with ``rules``: the config's policies and the built-in
    checks); raise InputError listing all problems found, when one is an error."""
    files, problems = find_files(paths)
    return _state([(str(file), file) for file in files], rules, problems)


def load_texts(sources: list[tuple[str, str]], rules: Rules = NO_RULES) -> DesiredState:
    """The desired state of files read elsewhere, as (path, text): every check of
    ``load_desired_state`` but finding and reading them (Ansible's controller read them)."""
    return _state(sources, rules, [])


def _state(
    sources: Sequence[tuple[str, str | Path]], rules: Rules, problems: list[FileProblem]
) -> DesiredState:
    checks = RunChecks(rules) if rules is not NO_RULES else None
    invites: list[DesiredInvite] = []
    for path, source in sources:
        if isinstance(source, Path):
            file_invites, file_problems = load_file(source, checks)
        else:
            file_invites, file_problems = _load(source, path, Lines(source), checks)
        invites.extend(file_invites)
        problems.extend(file_problems)
    problems.extend(_duplicate_ids(invites))
    if any(p.is_error for p in problems):
        raise InputError(problems)
    return DesiredState(invites, [path for path, _ in sources], warnings=sorted(problems))


def load_file(
    file: Path, checks: RunChecks | None = None
) -> tuple[list[DesiredInvite], list[FileProblem]]:
    """The invites of one file and its problems (duplicate ids across files aside)."""
    source = str(file)
    try:
        with open_regular(file) as stream:
            if os.fstat(stream.fileno()).st_size > MAX_FILE_BYTES:
                return [], [FileProblem(source, 1, 1, _TOO_LARGE)]
            # Read in chunks as it is parsed: a 60 MB file is never held whole.
            return _load(FileSource(stream, MAX_FILE_BYTES), source, Lines(file.read_bytes), checks)
    except OSError as exc:
        return [], [FileProblem(source, 1, 1, f"cannot read: {exc.strerror}")]


def load_text(text: str, path: str) -> tuple[list[DesiredInvite], list[FileProblem]]:
    """The invites in ``text``, read as the file ``path``, and every problem in it."""
    return _load(text, path, Lines(text))


def _load(
    source: str | FileSource, path: str, lines: Lines, checks: RunChecks | None = None
) -> tuple[list[DesiredInvite], list[FileProblem]]:
    reader = EntryReader(path, checks)
    with _collector_paused():
        document, problems = stream(source, path, lines, "invites", reader)
        reader.flush()
    if document is None:
        return [], problems
    if document.value is None:
        message = "file is empty; expected a mapping with an `invites:` list"
        return [], [*problems, FileProblem(path, 1, 1, message)]
    if not isinstance(document.value, dict):
        message = "top level must be a mapping with an `invites:` list"
        return [], [*problems, FileProblem(path, *document.mark(), message)]
    # Each entry was checked by ``reader``; rules on the entries together are refused with
    # the schema (``invite_validators``): the document's placeholders stand in for them.
    schema = invite_validators()
    if not schema.file_is_valid(document.value):
        problems.extend(validate(schema.file, Where(document, path)))
    problems += dict.fromkeys(reader.problems)  # a value shared through an alias: said once
    # `name: Store #12`, rarely: such a file is parsed again, unless it failed already.
    if checks is not None and _suspect(source) and not any(p.is_error for p in problems):
        problems.extend(checks.cut_by_comments(path, lines.text))
    return reader.invites, problems


def _suspect(source: str | FileSource) -> bool:
    if isinstance(source, FileSource):
        return source.suspect
    return suspect(source.encode("utf-8", "surrogatepass"))


@contextmanager
def _collector_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while a file is read: loading creates only
    trees of dicts and lists, never cycles, yet every few hundred new containers the
    collector would walk all the invites read so far (7% of a 20,000-invite load, best of
    five: 2.21 s against 2.06 s; validate's CPU is in the issue's envelope)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _duplicate_ids(invites: list[DesiredInvite]) -> list[FileProblem]:
    first_seen: dict[str, DesiredInvite] = {}
    problems = []
    for invite in invites:
        # Compared as they will be sent: the id as it goes into the request's URL.
        sent = invite.id if INVITE_ID.fullmatch(invite.id) else quote(invite.id, safe="")
        first = first_seen.setdefault(sent, invite)
        if first is not invite:
            problems.append(
                FileProblem(
                    invite.source.path,
                    invite.source.line,
                    invite.source.column,
                    f"invite id `{escape(invite.id)}` is already defined at {first.source}",
                )
            )
    return problems


# -- each entry, checked and typed as it is read ---------------------------------------------


# Entries are held and judged by the schema this many at a time, then taken in order:
# email-validator's checks run back to back and stay in the CPU's caches (validate of
# 20,000 invites: 0.87-0.91 of the CPU of one entry at a time, 2.21 s against 2.47 s).
WINDOW = 256


class EntryReader:
    """Takes the entries of one file (the loader's item hook; ``flush`` once the file is
    read); keeps records and problems."""

    def __init__(self, source: str, checks: RunChecks | None = None) -> None:
        self.source = source
        self.checks = checks  # the policies and built-in checks of the run, if any
        self.schema = invite_validators()
        # Each field's typed value (str, IdentifierSet, Contact), made from a checked value.
        self.makers = {name: kind.value_type for name, kind in field_kinds().items()}
        self.invites: list[DesiredInvite] = []
        self.problems: list[FileProblem] = []
        self.held: list[tuple[int, Located, Mark]] = []

    def __call__(self, index: int, located: Located, mark: Mark) -> None:
        self.held.append((index, located, mark))
        if len(self.held) == WINDOW:
            self.flush()

    def flush(self) -> None:
        """Check the entries held: each one's schema verdict first, then the rest."""
        judged = [(index, *self._judge(located), mark) for index, located, mark in self.held]
        self.held.clear()
        for item in judged:
            self._take(*item)

    def _judge(self, located: Located) -> tuple[Located, Texts, bool]:
        """The entry in NFC, its texts, and whether the schema's quick check accepts it."""
        entry = located.value
        texts = _texts(entry, (), [])
        if not all(text.isascii() or unicodedata.is_normalized("NFC", text) for _, text in texts):
            # One normal form: what the files say is checked, compared and sent in NFC, so
            # the schema's bounds hold for what is sent (NFC can lengthen text: U+0958 is
            # two characters in NFC) and two spellings of one item are one item.
            entry = _in_nfc(entry)
            texts = _texts(entry, (), [])
            located = located._replace(value=entry)
        return located, texts, self.schema.entry_is_valid(entry)

    def _take(self, index: int, located: Located, texts: Texts, valid: bool, mark: Mark) -> None:
        entry = located.value
        problems = []
        if not valid:
            problems = validate(self.schema.entry, Where(located, self.source, ("invites", index)))
        self.problems += problems
        ident = entry.get(ID_KEY) if isinstance(entry, dict) else None
        if not isinstance(ident, str):
            return
        if not INVITE_ID.fullmatch(ident) and not problems:
            message = f"`id`: {quote_value(ident)} is not a valid inviteId ({ID_RULE})"
            self.problems.append(FileProblem(self.source, *located.mark(("id",)), message))
        # Entries with a usable id are kept even when they have problems, so that duplicate
        # ids are reported in the same run; any problem stops the run anyway. One refused is
        # kept for its id alone: a value the schema refused left out, not typed, not checked.
        refused = self._text_problems(texts, located, problems) or bool(problems)
        source = SourceLocation(self.source, *mark)
        resend = resend_rule(entry.get(RESEND_KEY, False))
        fields = {k: v for k, v in entry.items() if k not in RECONCILER_KEYS}
        if refused:
            self.invites.append(DesiredInvite(ident, fields_from_json(fields), source, resend))
            return
        typed = {name: self.makers[name](value) for name, value in fields.items()}
        invite = DesiredInvite(ident, typed, source, resend)
        self.invites.append(invite)
        if self.checks is not None:
            self.problems += self.checks.check(entry, texts, invite, located.mark)

    def _text_problems(self, texts: Texts, located: Located, problems: list[FileProblem]) -> bool:
        """A problem for each field's text a file may not hold (``text_problems``), unless
        the schema has refused it already (a control character, too long); whether one
        had too many combining marks in a row."""
        reported = {(p.line, p.column) for p in problems}
        marked = False
        for path, text in texts:
            reasons = [] if path[0] in RECONCILER_KEYS else text_problems(text)
            marked = marked or (bool(reasons) and too_many_marks(text))
            at = located.mark(path) if reasons else None
            if at is None or at in reported:
                continue
            where = ".".join(str(p) for p in path if isinstance(p, str))
            # A value shared through an alias is said once (``_load`` drops repeats).
            self.problems += [
                FileProblem(self.source, *at, f"`{escape(where)}`: {quote_value(text)} {reason}")
                for reason in reasons
            ]
        return marked


def text_problems(text: str) -> list[str]:
    """Why a file may not hold ``text``, beyond the schema: each kind of character
    ``NOT_IN_TEXT`` refuses that it holds (each said once: fixing one must not reveal the
    next only on the following run), too many combining marks in a row."""
    if text.isascii():  # ASCII holds neither
        return []
    reasons = [invisible_problem(c) for c in dict.fromkeys(NOT_IN_TEXT.findall(text))]
    if too_many_marks(text):
        reasons.append(
            f"holds {marks_in_a_row(text):,} combining marks in a row (at most "
            f"{MAX_MARKS_IN_A_ROW}); no text needs so many"
        )
    return reasons


def _in_nfc(value: Any) -> Any:
    """``value`` (an entry as read) with every text in NFC, keys as they are; a text
    with too many combining marks in a row is left as it is (refused, and NFC reorders
    such a run in quadratic time)."""
    if isinstance(value, str):
        return value if too_many_marks(value) else nfc(value)
    if isinstance(value, dict):
        return {k: _in_nfc(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_in_nfc(item) for item in value]
    return value


def _texts(value: Any, path: tuple[Any, ...], found: Texts) -> Texts:
    """``found`` with every text in ``value`` and its path: a mapping's values, a list's
    items."""
    if isinstance(value, str):
        found.append((path, value))
    elif isinstance(value, dict):
        for key, item in value.items():
            _texts(item, (*path, key), found)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _texts(item, (*path, index), found)
    return found


def invisible_problem(char: str) -> str:
    """Why a text value may not hold ``char`` (one of ``NOT_IN_TEXT``), and the fix; the
    character named as U+00A0 NO-BREAK SPACE."""
    shown = f"U+{ord(char):04X} {unicodedata.name(char, '')}".rstrip()
    category = unicodedata.category(char)
    if category == "Zs":
        return f"holds {shown}, which looks like a space but is not one; write a plain space"
    if category in ("Zl", "Zp"):
        return f"holds {shown}, a line break; write the value on one line"
    if category == "Cs":
        return f"holds {shown}, half of a UTF-16 pair and no character at all; remove it"
    return f"holds {shown}, which does not show on screen (two values would look alike); remove it"


def refuse_bad_ids(ids: Iterable[str], given_as: str) -> None:
    """Refuse ids given on the command line that no invite can have, before any request."""
    bad = [i for i in dict.fromkeys(ids) if not INVITE_ID.fullmatch(i)]
    if bad:
        shown = ", ".join(quote_value(i) for i in bad[:10]) + (
            f" and {len(bad) - 10} more" if len(bad) > 10 else ""
        )
        raise ReconcilerError(
            f"{given_as} {shown}: not a valid invite id ({ID_RULE}); nothing was read"
        )


# -- what a file can hold of values from elsewhere (`export`, `adopt`) ------------------------

Part = tuple[str, str | None]  # a field, and its sub-field (None: the field's own value)
CANNOT_HOLD = "validate would refuse it"


def unheld(invite_id: str, fields: Fields) -> dict[Part, str]:
    """What validate would refuse of ``fields`` in an entry: (field, sub-field or None):
    why, in validate's own words, the value quoted."""
    found = _schema_refusals(invite_id, fields)
    for name, value in fields.items():
        for part, text in kind_of(name).texts(value):
            match = NOT_IN_TEXT.search(text)
            if match is not None:
                found.setdefault((name, part), f"{quote_value(text)} {invisible_problem(match[0])}")
    # A whole field refused needs no word for its sub-fields as well.
    return {
        (name, part): reason
        for (name, part), reason in found.items()
        if part is None or (name, None) not in found
    }


def _schema_refusals(invite_id: str, fields: Fields) -> dict[Part, str]:
    """What the invite schema refuses of ``fields``, by (field, sub-field or None)."""
    found: dict[Part, str] = {}
    entry = {ID_KEY: invite_id, **fields_json(fields)}
    where = Where(Located(entry, None, START, Lines("")), "a file")
    for error in invite_validators().entry.iter_errors(entry):
        path = tuple(error.absolute_path)
        if not path:  # about the entry as a whole: a required sub-field is under its field
            continue
        part = path[1] if len(path) > 1 and isinstance(path[1], str) else None
        problems = describe(error, where)
        reason = problems[0].message if problems else "the schema refuses it"
        found.setdefault((str(path[0]), part), _unquoted(reason))
    return found


def cannot_hold(
    invite_id: str, name: str, value: FieldValue, part: str | None = None
) -> str | None:
    """Why a file cannot hold ``value`` as field ``name`` (its sub-field ``part`` only, when
    given), or None: it can. The value as a file holds it (in NFC, a set without repeats)."""
    problems = unheld(invite_id, {name: kind_of(name).for_file(value, name, [])})
    if part is None:  # the whole value is written: a problem with any part of it
        why = next(iter(problems.values()), None)
    else:
        why = problems.get((name, part)) or problems.get((name, None))
    return None if why is None else f"{CANNOT_HOLD}: {why}"


def _unquoted(message: str) -> str:
    """A validate message without its leading "`field`: ", which the caller names already."""
    return message.split(": ", 1)[1] if message.startswith("`") and ": " in message else message


# -- which invites a run reads and plans: --target, --exclude, --changed-since ----------------


class Selection(NamedTuple):
    targets: tuple[str, ...] = ()
    excludes: tuple[str, ...] = ()
    changed_since: str | None = None

    @property
    def is_everything(self) -> bool:
        return not (self.targets or self.excludes or self.changed_since)


EVERYTHING = Selection()


def select_invites(
    invites: list[DesiredInvite],
    selection: Selection,
    where: str,
    changed: Collection[str] | None = None,
) -> list[DesiredInvite]:
    """The invites to read and plan, in file order. ``where`` names the files, for errors."""
    known = {invite.id for invite in invites}
    for option, ids in (("--target", selection.targets), ("--exclude", selection.excludes)):
        _refuse_unknown(option, ids, known, where)
    wanted = (set(selection.targets) or known) - set(selection.excludes)
    if changed is not None:
        wanted &= set(changed)
    return [invite for invite in invites if invite.id in wanted]


def _refuse_unknown(option: str, ids: Collection[str], known: set[str], where: str) -> None:
    unknown = [i for i in dict.fromkeys(ids) if i not in known]
    if unknown:
        raise ReconcilerError(
            f"{option} {', '.join(map(escape, unknown))}: no invite with "
            f"{'this id' if len(unknown) == 1 else 'these ids'} in the files read ({where})"
            f"{_did_you_mean(unknown, known)}"
        )


def _did_you_mean(unknown: list[str], known: Collection[str]) -> str:
    """The ids of the files nearest to each one typed (a typo: `inv_8f2k2` for `inv_8f2k1`)."""
    near = {typed: get_close_matches(typed, known, n=1, cutoff=0.75) for typed in unknown}
    hints = [(typed, match[0]) for typed, match in near.items() if match]
    if not hints:
        return ""
    if len(unknown) == 1:
        return f"; did you mean {escape(hints[0][1])}?"
    shown = ", ".join(f"{escape(match)} for {escape(typed)}" for typed, match in hints)
    return f"; did you mean {shown}?"
