"""The checks a run makes beyond the schema: the config's policies and the built-in ones.

Built in, as warnings unless reconciler.yaml's `checks` says otherwise (`error`, `off`):

- ``duplicate-name``: two invites whose business `name` is the same once case, runs of
  spaces (collapsed to one, ends trimmed) and Unicode compatibility forms (NFKC) are
  ignored: `Acme Ltd` and `ACME  ltd`, likely one business invited twice;
- ``duplicate-email``: two invites with the same `email` (compared without case);
- ``surrounding-space``: text that starts or ends with a space, sent as is and invisible
  in every UI;
- ``comment-in-value``: a plain value followed by ` #` and text (`name: Store #12`),
  which YAML reads as the value `Store` and a comment.
"""

from __future__ import annotations

import re
import unicodedata
from array import array
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from reconciler.errors import FileProblem
from reconciler.model.invite import DesiredInvite, SourceLocation
from reconciler.safetext import escape, quote_value
from reconciler.schema.policies import Policies
from reconciler.yamlload.comments import cut_values
from reconciler.yamlload.positions import Lines

Level = Literal["error", "warning", "off"]
BUILT_IN: dict[str, Level] = {
    "duplicate-name": "warning",
    "duplicate-email": "warning",
    "surrounding-space": "warning",
    "comment-in-value": "warning",
}


@dataclass(frozen=True)
class Rules:
    """What a run checks beyond the schema, as the settings give it."""

    policies: Policies | None = None
    levels: Mapping[str, Level] = field(default_factory=lambda: dict(BUILT_IN))

    def level(self, check: str) -> Level:
        return self.levels.get(check, BUILT_IN[check])


NO_RULES = Rules(levels={name: "off" for name in BUILT_IN})
Mark = Callable[[tuple[Any, ...]], tuple[int, int]]


def business_key(name: str) -> str:
    """``name`` as the duplicate-name check compares it."""
    if name.isascii():  # NFKC changes no ASCII text, and casefold is lower there
        return " ".join(name.lower().split())
    # Folded in two parts, parted at the last space: a space is a starter nothing
    # composes with, so NFKC and casefold give the same text either way; names that
    # differ by their last word (`... №1`, `... №2`) fold their first part once.
    head, space, tail = name.rpartition(" ")
    first = _HEADS.get(head)
    if first is None:
        first = _folded(head)
        if len(head) <= _HEAD_LENGTH and len(_HEADS) < _HEADS_KEPT:
            _HEADS[head] = first
    folded = first + space + (tail.lower() if tail.isascii() else _folded(tail))
    # What shows on no screen (a zero-width joiner, a bidi mark, a soft hyphen, a variation
    # selector: the files may hold them, emoji and some scripts need them) must not make
    # two names that look alike two businesses.
    # A format character is never printable: a name that is, with no variation selector
    # (printable), has nothing to drop, and is not walked a character at a time.
    if not folded.isprintable() or _VARIATION_SELECTOR.search(folded):
        folded = "".join(c for c in folded if not _invisible(c))
    return " ".join(folded.split())


_VARIATION_SELECTOR = re.compile("[\ufe00-\ufe0f]")
# The first parts of names already folded: at most 4,096, of up to 200 characters.
_HEADS: dict[str, str] = {}
_HEADS_KEPT = 4096
_HEAD_LENGTH = 200


def _folded(text: str) -> str:
    # Turkish: `İ` folds to `i` and a combining dot, `ı` stays dotless; `LİMİTED` typed on
    # a Turkish keyboard and `Limited` are one business.
    folded = unicodedata.normalize("NFKC", text).casefold()
    return folded.replace("i\u0307", "i").replace("\u0131", "i")


def _invisible(char: str) -> bool:
    return unicodedata.category(char) == "Cf" or "\ufe00" <= char <= "\ufe0f"


@dataclass
class Compared:
    """One file's invites the schema accepted, for the checks across entries: each one's
    `name` and `email` as written (None if not text), and the offsets of those values
    (in an array: no object an invite)."""

    invites: list[DesiredInvite] = field(default_factory=list)
    names: list[str | None] = field(default_factory=list)
    emails: list[str | None] = field(default_factory=list)
    places: array[int] = field(default_factory=lambda: array("q"))


class RunChecks:
    """The rules applied to each entry of a run, with what the cross-entry checks have seen."""

    def __init__(self, rules: Rules) -> None:
        self.policies = rules.policies
        # The first invite of each business name and e-mail seen in the run, once compared.
        self.names: dict[str, DesiredInvite] | None = None
        self.emails: dict[str, DesiredInvite] | None = None
        self.name_level = rules.level("duplicate-name")
        self.email_level = rules.level("duplicate-email")
        self.space_level = rules.level("surrounding-space")
        self.comment_level = rules.level("comment-in-value")
        if self.name_level != "off":
            self.names = {}
        if self.email_level != "off":
            self.emails = {}
        # Whether a duplicate check is on: the invites read are to be ``Compared``.
        self.compares = self.names is not None or self.emails is not None

    def check(
        self, entry: dict[str, Any], source: SourceLocation, mark: Mark, spaced: bool = True
    ) -> list[FileProblem]:
        """The problems of one entry the schema accepted (``mark``: a path's line, column;
        ``spaced``: False when the caller knows no text in it starts or ends with a space)."""
        problems: list[FileProblem] = []
        if self.policies is not None:
            problems += self.policies.check(entry, source.path, mark)
        if spaced and self.space_level != "off":
            problems += self._spaces(entry, source.path, mark)
        return problems

    def across(self, compared: Compared, path: str, lines: Lines) -> list[FileProblem]:
        """duplicate-name and duplicate-email over one file's invites (``compared``, read
        from ``path``), against every invite of the run before them.

        Run once the file is read, not entry by entry: the keys the run keeps (a
        folded name and e-mail an invite) are then made together, not scattered among
        the loader's short-lived objects, which cost validate of 20,000 invites about
        5% of its cycles in cache misses.
        """
        invites, places = compared.invites, compared.places
        problems: list[FileProblem] = []
        names = self.names
        if names is not None:
            for index, name in enumerate(compared.names):
                if name is None:
                    continue
                invite = invites[index]
                first = names.setdefault(business_key(name), invite)
                if first is not invite:
                    problems.append(
                        _problem(
                            path,
                            lines.mark(places[2 * index]),
                            f"duplicate-name: business name {quote_value(name)} is the same as "
                            f"the one at {first.source} once case, spacing and compatibility "
                            "forms are ignored (likely the same business invited twice)",
                            self.name_level,
                        )
                    )
        emails = self.emails
        if emails is not None:
            for index, email in enumerate(compared.emails):
                if email is None:
                    continue
                invite = invites[index]
                # An ASCII address in lower case is its own key: no second copy of it kept.
                key = email if email.isascii() and email.islower() else email.casefold()
                first = emails.setdefault(key, invite)
                if first is not invite:
                    problems.append(
                        _problem(
                            path,
                            lines.mark(places[2 * index + 1]),
                            f"duplicate-email: {quote_value(email)} is also the e-mail of the "
                            f"invite at {first.source}",
                            self.email_level,
                        )
                    )
        return problems

    def cut_by_comments(self, path: str, text: str) -> list[FileProblem]:
        """The plain values of a file that a comment cuts short (the caller asks only for
        a file whose bytes hold ` #` before text: ``yamlload.comments.suspect``)."""
        if self.comment_level == "off":
            return []
        return [
            _problem(
                path,
                (cut.line, cut.column),
                f"comment-in-value: YAML reads this as {quote_value(cut.value)} and a comment "
                f"from the `#`; if the `#` is part of the value, quote it whole: "
                f"{quote_value(cut.written)}",
                self.comment_level,
            )
            for cut in cut_values(text)
        ]

    def _spaces(self, entry: dict[str, Any], path: str, mark: Mark) -> list[FileProblem]:
        # All the entry's text in one string, parted by NUL (the schema has refused control
        # characters in text): a space at the end of a part is " \0" or "\0 " there. One
        # join and two searches an entry; only an entry with one is walked.
        texts: list[Any] = []
        for value in entry.values():
            kind = type(value)
            if kind is str:
                texts.append(value)
            elif kind is list:
                texts += value
            elif kind is dict:
                texts += value.values()
        try:
            joined = "\0".join(texts)
        except TypeError:  # not text (a schema of another kind): only the text is looked at
            joined = "\0".join(t for t in texts if type(t) is str)
        if not (" \0" in joined or "\0 " in joined or joined[:1] == " " or joined[-1:] == " "):
            return []
        found: list[tuple[Any, ...]] = []
        for key, value in entry.items():
            if type(value) is str and _spaced(value):
                found.append((key,))
            elif type(value) is list:
                found += [(key, i) for i, text in enumerate(value) if _spaced(text)]
            elif type(value) is dict:
                found += [(key, k) for k, text in value.items() if _spaced(text)]
        if not found:
            return []
        problems = []
        for where in found:
            shown = ".".join(str(p) for p in where if isinstance(p, str))
            value = entry[where[0]] if len(where) == 1 else entry[where[0]][where[1]]
            message = (
                f"surrounding-space: `{escape(shown)}`: {quote_value(value)} starts or ends "
                "with a space, which is sent as is and shows in no UI; remove it"
            )
            problems.append(_problem(path, mark(where), message, self.space_level))
        return problems


def _spaced(value: Any) -> bool:
    return type(value) is str and (value[:1] == " " or value[-1:] == " ")


def _problem(path: str, at: tuple[int, int], message: str, level: Level) -> FileProblem:
    return FileProblem(path, at[0], at[1], message, "error" if level == "error" else "warning")
