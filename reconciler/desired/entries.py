"""Each entry of an invite file checked and turned into a record as soon as it is read.

The loader hands every entry of `invites:` here while the file is still being
parsed; the entry's positions are dropped once it is checked, so memory holds
the compact records, not the document.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable
from typing import Any

from reconciler.desired.holdable import character
from reconciler.desired.rules import Compared, RunChecks
from reconciler.errors import FileProblem, ReconcilerError
from reconciler.model.fields import (
    ID_KEY,
    RECONCILER_KEYS,
    RESEND_KEY,
    field_kinds,
    fields_from_json,
)
from reconciler.model.invite import ID_RULE, INVITE_ID, DesiredInvite, SourceLocation, resend_rule
from reconciler.model.values import MAX_MARKS_IN_A_ROW, marks_in_a_row, nfc, too_many_marks
from reconciler.safetext import NOT_IN_TEXT, escape, quote_value
from reconciler.schema.check import invite_validators, validate
from reconciler.schema.messages import Where
from reconciler.yamlload.items import Item
from reconciler.yamlload.positions import Lines, Located

_NONE: frozenset[str] = frozenset()


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


class EntryReader:
    """Takes the entries of one file (the loader's item hook); keeps records and problems."""

    def __init__(self, source: str, lines: Lines, checks: RunChecks | None = None) -> None:
        self.source = source
        self.lines = lines
        self.checks = checks  # the policies and built-in checks of the run, if any
        self.schema = invite_validators()
        # Each field's typed value made from a value the schema has checked: a call of
        # its type (str, IdentifierSet, Contact), for 200,000 entries.
        self.makers = {name: kind.value_type for name, kind in field_kinds().items()}
        self.invites: list[DesiredInvite] = []
        self.problems: list[FileProblem] = []
        self.compared = Compared()  # for the checks across entries, once the file is read
        self._invisible: set[FileProblem] = set()

    def __call__(self, item: Item) -> None:
        # One normal form: what the files say is checked, compared and sent in NFC, so
        # the schema's bounds hold for what is sent (NFC can lengthen text: U+0958 is
        # two characters in NFC) and two spellings of one item are one item.
        # Almost every value is ASCII: the entry's text is joined by NUL and looked at
        # whole, in C; only the values that are not ASCII are looked at again.
        joined, texts = _text_of(item.value)
        # A space at an end of a value is at an end of `joined` or next to a NUL (a value
        # holding " \0" itself only has the built-in check look closer).
        spaced = " \0" in joined or "\0 " in joined or joined[:1] == " " or joined[-1:] == " "
        marked = _NONE
        entry = item.value
        invisible = False
        if texts:  # an entry all in ASCII (most) has nothing more to look at
            # NUL composes with nothing, is no mark, and NOT_IN_TEXT does not refuse it:
            # the joined text is NFC, holds too many marks in a row or a refused
            # character, exactly when a value does.
            unusual = "\0".join(texts)
            if too_many_marks(unusual):
                # Refused, whether in NFC or not, and never normalised (MAX_MARKS_IN_A_ROW).
                marked = frozenset(t for t in texts if too_many_marks(t))
            if not unicodedata.is_normalized("NFC", unusual):
                entry = _nfc_copy(entry, marked)
            invisible = NOT_IN_TEXT.search(unusual) is not None
        problems: list[FileProblem] = []
        if not self.schema.entry_is_valid(entry):
            located = item.located(self.lines)._replace(value=entry)
            where = Where(located, self.source, ("invites", item.index))
            problems = validate(self.schema.entry, where)
            self.problems.extend(problems)
        # Entries with a usable id are kept even when they have problems, so that
        # duplicate ids are reported in the same run; any problem stops the run anyway.
        if not isinstance(entry, dict):
            return
        ident = entry.get(ID_KEY)
        if not isinstance(ident, str):
            return
        if not INVITE_ID.fullmatch(ident) and not problems:
            self._bad_id(ident, item.located(self.lines))
        resend = resend_rule(entry.get(RESEND_KEY, False))
        line, column = item.mark
        source = SourceLocation(self.source, line, column)
        if problems or invisible or marked:
            fields = {key: value for key, value in entry.items() if key not in RECONCILER_KEYS}
            if invisible:
                self._refuse_invisible(fields, item, problems)
            if marked:
                self._refuse_mark_runs(fields, item, problems, marked)
            if problems or marked:
                # Kept for its id alone (the run stops anyway): a value the schema refused
                # is left out, not typed.
                self.invites.append(DesiredInvite(ident, fields_from_json(fields), source, resend))
                return
        # Typed here, once, each value as its kind holds it; the schema has checked them all.
        # Text is its own typed value: only the others are made (a contact, the sets).
        typed = dict(entry)  # the entry itself may be shared through an alias
        for key in RECONCILER_KEYS:
            typed.pop(key, None)
        makers = self.makers
        for name, value in typed.items():
            if type(value) is not str:
                typed[name] = makers[name](value)
        invite = DesiredInvite(ident, typed, source, resend)
        self.invites.append(invite)
        checks = self.checks
        if checks is not None:
            if spaced or checks.policies is not None:  # else `check` has nothing to look at
                # Placed only when one fails: most entries never need their positions.
                def mark(path: tuple[Any, ...]) -> tuple[int, int]:
                    return item.located(self.lines).mark(path)

                self.problems += checks.check(entry, source, mark, spaced)
            if checks.compares:
                name, email = entry.get("name"), entry.get("email")
                compared = self.compared
                compared.invites.append(invite)
                compared.names.append(name if type(name) is str else None)
                compared.emails.append(email if type(email) is str else None)
                # Where a duplicate would be shown: the value, as the schema's errors are.
                at = item.spot.at if item.spot is not None else None
                own = item.position
                if type(at) is dict:
                    compared.places.append(at.get("name", own))
                    compared.places.append(at.get("email", own))
                else:
                    compared.places.append(own)
                    compared.places.append(own)

    def _refuse_invisible(
        self, fields: dict[str, Any], item: Item, problems: list[FileProblem]
    ) -> None:
        """A problem for each text value holding a character that ``NOT_IN_TEXT`` refuses.

        ASCII text (almost all of it) is passed over at once. A value the schema has
        already refused (a control character, say) is not reported twice.
        """
        # Each kind of character a value holds, each said once: fixing one must not
        # reveal the next only on the following run.
        found = [
            (path, text, char)
            for path, text in _texts(fields, ())
            if not text.isascii()
            for char in dict.fromkeys(NOT_IN_TEXT.findall(text))
        ]
        if not found:
            return
        located = item.located(self.lines)
        reported = {(p.line, p.column) for p in problems}
        for path, text, char in found:
            line, column = located.mark(path)
            if (line, column) in reported:
                continue
            where = ".".join(str(p) for p in path if isinstance(p, str))
            message = f"`{escape(where)}`: {quote_value(text)} {invisible_problem(char)}"
            problem = FileProblem(self.source, line, column, message)
            if problem not in self._invisible:  # a value shared through an alias: once
                self._invisible.add(problem)
                self.problems.append(problem)

    def _refuse_mark_runs(
        self,
        fields: dict[str, Any],
        item: Item,
        problems: list[FileProblem],
        marked: frozenset[str],
    ) -> None:
        """A problem for each text value of ``marked`` (too many combining marks in a
        row), unless the schema has refused it already (too long, say)."""
        located = item.located(self.lines)
        reported = {(p.line, p.column) for p in problems}
        for path, text in _texts(fields, ()):
            if text not in marked:
                continue
            line, column = located.mark(path)
            if (line, column) in reported:
                continue
            count = marks_in_a_row(text)
            where = ".".join(str(p) for p in path if isinstance(p, str))
            message = (
                f"`{escape(where)}`: {quote_value(text)} holds {count:,} combining marks in a "
                f"row (at most {MAX_MARKS_IN_A_ROW}); no text needs so many"
            )
            self.problems.append(FileProblem(self.source, line, column, message))

    def _bad_id(self, ident: str, entry: Located) -> None:
        line, column = entry.mark(("id",))
        message = f"`id`: {quote_value(ident)} is not a valid inviteId ({ID_RULE})"
        self.problems.append(FileProblem(self.source, line, column, message))


def _text_of(entry: Any) -> tuple[str, list[str]]:
    """Every string of ``entry`` (its values, a list's items, a mapping's values) joined by
    NUL, and those of them that are not ASCII.

    Shaped for an invite: a value is text, a list of text or a mapping of text, each
    list and mapping joined in C; only one that holds something else is walked.
    """
    if type(entry) is not dict:
        strings: list[str] = []
        _strings(entry, strings)
        return "\0".join(strings), [t for t in strings if not t.isascii()]
    parts: list[str] = []
    texts: list[str] = []
    for value in entry.values():
        kind = type(value)
        if kind is str:
            parts.append(value)
            if not value.isascii():
                texts.append(value)
        elif kind is list or kind is dict:
            items = value if kind is list else list(value.values())
            try:
                part = "\0".join(items)
            except TypeError:  # not all text: walked
                items = []
                _strings(value, items)
                part = "\0".join(items)
            parts.append(part)
            if not part.isascii():
                texts += [t for t in items if not t.isascii()]
    return "\0".join(parts), texts


def _strings(value: Any, found: list[str]) -> None:
    """Append to ``found`` every string in ``value``: a mapping's values, a list's items."""
    if type(value) is str:
        found.append(value)
        return
    items = value.values() if isinstance(value, dict) else value if isinstance(value, list) else ()
    for item in items:
        if type(item) is str:  # most: appended without a call
            found.append(item)
        elif isinstance(item, (dict, list)):
            _strings(item, found)


def _nfc_copy(value: Any, marked: frozenset[str]) -> Any:
    """``value`` (an entry as read) with every string in NFC, keys as they are; a string
    of ``marked`` is left as it is (it is refused)."""
    if type(value) is str:
        return value if value in marked else nfc(value)
    if isinstance(value, dict):
        return {k: _nfc_copy(v, marked) for k, v in value.items()}
    if isinstance(value, list):
        return [_nfc_copy(item, marked) for item in value]
    return value


def _texts(value: Any, path: tuple[Any, ...]) -> Iterable[tuple[tuple[Any, ...], str]]:
    if isinstance(value, str):
        yield path, value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _texts(item, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _texts(item, (*path, index))


def invisible_problem(char: str) -> str:
    """Why a text value may not hold ``char`` (one of ``NOT_IN_TEXT``), and the fix."""
    shown = character(char)
    category = unicodedata.category(char)
    if category == "Zs":
        return f"holds {shown}, which looks like a space but is not one; write a plain space"
    if category in ("Zl", "Zp"):
        return f"holds {shown}, a line break; write the value on one line"
    if category == "Cs":
        return f"holds {shown}, half of a UTF-16 pair and no character at all; remove it"
    return f"holds {shown}, which does not show on screen (two values would look alike); remove it"
