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

import unicodedata
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from reconciler.errors import FileProblem
from reconciler.model.invite import DesiredInvite
from reconciler.safetext import escape, quote_value
from reconciler.schema.policies import Policies
from reconciler.yamlload.source import cut_values

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
Texts = list[tuple[tuple[Any, ...], str]]  # each text of an entry, with its path


def business_key(name: str) -> str:
    """``name`` as the duplicate-name check compares it."""
    # Turkish: `İ` folds to `i` and a combining dot, `ı` stays dotless; `LİMİTED` typed on
    # a Turkish keyboard and `Limited` are one business.
    folded = unicodedata.normalize("NFKC", name).casefold()
    folded = folded.replace("i\u0307", "i").replace("\u0131", "i")
    # What shows on no screen (a zero-width joiner, a bidi mark, a soft hyphen, a variation
    # selector: the files may hold them, emoji and some scripts need them) must not make
    # two names that look alike two businesses.
    shown = "".join(c for c in folded if not _invisible(c))
    return " ".join(shown.split())


def _invisible(char: str) -> bool:
    return unicodedata.category(char) == "Cf" or "\ufe00" <= char <= "\ufe0f"


class RunChecks:
    """The rules applied to each entry of a run, with the first invite of each business
    name and e-mail seen in the run (for duplicate-name and duplicate-email)."""

    def __init__(self, rules: Rules) -> None:
        self.policies = rules.policies
        self.levels = {name: rules.level(name) for name in BUILT_IN}
        self.names: dict[str, DesiredInvite] = {}
        self.emails: dict[str, DesiredInvite] = {}

    def check(
        self, entry: dict[str, Any], texts: Texts, invite: DesiredInvite, mark: Mark
    ) -> list[FileProblem]:
        """The problems of one entry the schema accepted (``texts``: each of its texts),
        read as ``invite`` (``mark``: a path's line and column), against the invites of
        the run read before it."""
        path = invite.source.path
        problems: list[FileProblem] = []
        if self.policies is not None:
            problems += self.policies.check(entry, path, mark)
        for where, text in texts:
            if text[:1] == " " or text[-1:] == " ":
                shown = ".".join(str(p) for p in where if isinstance(p, str))
                message = (
                    f"surrounding-space: `{escape(shown)}`: {quote_value(text)} starts or ends "
                    "with a space, which is sent as is and shows in no UI; remove it"
                )
                problems += self._problem("surrounding-space", path, mark(where), message)
        name, email = entry.get("name"), entry.get("email")
        first = _first(self.names, name, business_key, invite)
        if first is not None:
            message = (
                f"duplicate-name: business name {quote_value(name)} is the same as the one at "
                f"{first.source} once case, spacing and compatibility forms are ignored "
                "(likely the same business invited twice)"
            )
            problems += self._problem("duplicate-name", path, mark(("name",)), message)
        first = _first(self.emails, email, str.casefold, invite)
        if first is not None:
            message = (
                f"duplicate-email: {quote_value(email)} is also the e-mail of the invite at "
                f"{first.source}"
            )
            problems += self._problem("duplicate-email", path, mark(("email",)), message)
        return problems

    def cut_by_comments(self, path: str, text: str) -> list[FileProblem]:
        """The plain values of a file that a comment cuts short (the caller asks only for
        a file whose bytes hold ` #` before text: ``yamlload.source.suspect``)."""
        problems: list[FileProblem] = []
        for cut in cut_values(text) if self.levels["comment-in-value"] != "off" else ():
            message = (
                f"comment-in-value: YAML reads this as {quote_value(cut.value)} and a comment "
                f"from the `#`; if the `#` is part of the value, quote it whole: "
                f"{quote_value(cut.written)}"
            )
            problems += self._problem("comment-in-value", path, (cut.line, cut.column), message)
        return problems

    def _problem(
        self, check: str, path: str, at: tuple[int, int], message: str
    ) -> list[FileProblem]:
        """``message`` as a problem of the built-in ``check``, at its level (none if off)."""
        level = self.levels[check]
        if level == "off":
            return []
        return [
            FileProblem(path, at[0], at[1], message, "error" if level == "error" else "warning")
        ]


def _first(
    seen: dict[str, DesiredInvite], value: Any, key: Callable[[str], str], invite: DesiredInvite
) -> DesiredInvite | None:
    """The invite of the run first seen with ``value`` (compared by ``key``), if not
    ``invite``: ``invite`` is kept as the first of its own."""
    if not isinstance(value, str):
        return None
    first = seen.setdefault(key(value), invite)
    return None if first is invite else first
