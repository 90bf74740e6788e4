"""Strings from outside (files, servers, the environment) made safe to show.

One verb per operation, named for what it does:

- ``escape``: no control character from outside ever reaches a terminal, a CI
  log or a ``path:line:col`` line raw. A file name holding ``ESC ] 0;...BEL``
  would retitle the terminal; a newline would split one error into two.
  Invisible characters (``INVISIBLE``: format, default-ignorable, separators,
  look-alike spaces) are escaped too, so two values that differ never print alike.
- ``redact``: the client secret (in each encoding it is sent in) and every token
  issued in this run never reach output, even when a server echoes them back.
  The API client registers them with ``register_secret`` (tokens come and go with
  ``replace_secrets``) as soon as it holds them; ``holds_secret`` asks whether a
  text holds one; ``watch_secrets`` tells a host that masks output of its own (an
  Ansible module's no-log values) each one as it is known. Redaction is only for
  what a server said: error messages, and the server's values in plans and the
  audit log. It never edits data: not a value from the files, not what is compared
  or sent, and it matches only the secrets themselves, never a pattern over
  ordinary words.
- ``cut``: a text from outside bounded before it is redacted, without the start of a
  secret the cut splits (redaction matches only whole secrets).
- ``redact_and_escape``: both, for one line a server or the environment said;
  ``redact_and_escape_lines`` for a message of several lines.
- ``quote_value``: a value from a file quoted (as Python's repr), escaped and cut short.
- ``json_text``: a field's value in JSON notation, escaped (plans, drift, adopt).
- ``escape_json_text``: JSON written to a file (a saved plan, the audit log) with
  the unsafe characters as ``\\u`` escapes, so that it still parses to the same values.
"""

from __future__ import annotations

import datetime
import html
import json
import re
import threading
from collections.abc import Callable, Iterable, Mapping

REDACTED = "[redacted]"

# Characters that do not show as themselves on a screen, so that two different
# values would look alike ("Acme<U+200B>Ltd" prints as "AcmeLtd", "jane<U+206F>@"
# as "jane@"), or that reorder or break the text around them. Precomputed (start-up
# is benchmarked; tests/unit/test_safetext.py checks it against unicodedata):
# - every format character (General_Category Cf, Unicode 15): soft hyphen, Arabic
#   number marks, zero-width space/joiners, bidi marks, embeddings, overrides and
#   isolates, word joiner and invisible operators, BOM, interlinear annotation,
#   Egyptian hieroglyph and shorthand format controls, musical beam marks, tags;
# - every Default_Ignorable_Code_Point (DerivedCoreProperties.txt) that is not Cf:
#   combining grapheme joiner U+034F, Hangul fillers, Khmer inherent vowels,
#   Mongolian free variation selectors, variation selectors (U+FE00-FE0F,
#   U+E0100-E01EF) and the reserved ranges held for more of them;
# - line and paragraph separators (Zl, Zp), and the spaces that look like U+0020
#   but are not it: NBSP, U+1680, U+2000-200A, U+202F, U+205F (U+3000, the
#   ideographic space of CJK text, is as wide as a character and stays).
INVISIBLE = (
    "\xa0\xad\u034f\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891\u08e2\u115f\u1160"
    "\u1680\u17b4\u17b5\u180b-\u180f\u2000-\u200f\u2028-\u202f\u205f-\u206f\u3164"
    "\ufe00-\ufe0f\ufeff\uffa0\ufff0-\ufffb\U000110bd\U000110cd\U00013430-\U0001343f"
    "\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0000-\U000e0fff"
)
# Lone surrogates (U+D800-U+DFFF, which JSON can hold as "\ud800" and a YAML double-
# quoted scalar too) are not characters and cannot be encoded to UTF-8 at all:
# printing one would end the output half-way with UnicodeEncodeError.
_SURROGATES = "\ud800-\udfff"
# Of the invisible characters, a text value in an invite file may hold only these:
# ZWNJ and ZWJ, which Persian, the Indic scripts and emoji sequences need to spell
# a name right. They are still shown as escapes in every output.
ALLOWED_INVISIBLE = frozenset("\u200c\u200d")
# What a text value in an invite file may not hold (control characters aside, which
# the schema refuses with its own words).
_REFUSED = INVISIBLE.replace("\u2000-\u200f", "\u2000-\u200b\u200e\u200f")
NOT_IN_TEXT = re.compile(f"[{_REFUSED}{_SURROGATES}]")
# NON_ASCII_UNSAFE is the part json.dumps(ensure_ascii=False) leaves raw: the JSON
# writer escapes exactly this class, so the two cannot drift apart.
NON_ASCII_UNSAFE = f"\x7f-\x9f{INVISIBLE}{_SURROGATES}"
_UNSAFE = re.compile(f"[\x00-\x1f{NON_ASCII_UNSAFE}]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t", "\x1b": "\\x1b", "\x07": "\\x07"}
# A secret shorter than this would redact ordinary words from every message: the
# settings refuse such a client secret at start, and the client refuses such a token.
MIN_SECRET_LENGTH = 6
QUOTED_CHARS = 120  # characters of a value a message quotes


def _escape_one(match: re.Match[str]) -> str:
    char = match.group()
    named = _NAMED.get(char)
    if named:
        return named
    code = ord(char)
    if code <= 0xFF:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


_JSON_UNSAFE = re.compile(f"[{NON_ASCII_UNSAFE}]")


def _json_escape_one(match: re.Match[str]) -> str:
    # json's own \u escape; past U+FFFF (a tag character), JSON's UTF-16 pair of them.
    return json.dumps(match.group())[1:-1]


def escape_json_text(text: str) -> str:
    """JSON text of ``json.dumps(ensure_ascii=False)`` with the unsafe characters as \\u escapes.

    They parse back to the same strings, but cannot act on, or hide text from, a
    terminal that prints the file (C0 controls are escaped by json.dumps already).
    """
    return _JSON_UNSAFE.sub(_json_escape_one, text)


def escape(text: str) -> str:
    """``text`` with every control or reordering character shown as an escape."""
    return _UNSAFE.sub(_escape_one, text)


def quote_value(value: object, limit: int | None = QUOTED_CHARS) -> str:
    """A value from a file, quoted and escaped, cut short past ``limit`` characters."""
    text = value if isinstance(value, str) else str(value)
    if limit is not None and len(text) > limit:
        return escape(repr(text[:limit]))[:-1] + "…'"
    return escape(repr(text))


def json_text(value: object) -> str:
    """A value as the user wrote it in YAML terms: strings quoted, lists inline, escaped.

    JSON's notation: a text field's value quoted, a set's items (a list or tuple) as a
    list, a contact (a mapping) as an object, None as ``null``. Not redacted: a plan's
    records are (``redacted()``) where the server said them, and a value from the files is
    shown as it will be sent.
    """
    return escape(json.dumps(value, ensure_ascii=False, default=_mapping_as_object))


def _mapping_as_object(value: object) -> dict[object, object]:
    if isinstance(value, Mapping):
        return dict(value)
    raise TypeError(f"{type(value).__name__} is not a value a field holds")


class Redactor:
    """Secrets known to this process, and what replaces them in any text."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._secrets: tuple[str, ...] = ()
        # Compiled when the secrets change; replaced whole, so safe to read unlocked. Case
        # ignored: a server that upper-cases what it echoes, or percent-encodes it in
        # lower-case hex, must not get a secret through.
        self._pattern: re.Pattern[str] | None = None
        self._replaceable: set[str] = set()  # forms from ``replace``: tokens, dropped in time
        self._watchers: list[Callable[[str], None]] = []

    def watch(self, watcher: Callable[[str], None]) -> None:
        """Call ``watcher`` with each secret and token redacted, in each form, as it becomes
        known (and at once with those known already): for a host that masks its own output
        as well, such as an Ansible module's no-log values. A token dropped from redaction
        later is not taken back from the watcher."""
        with self._lock:
            self._watchers.append(watcher)
            held = self._secrets
        for form in held:
            watcher(form)

    def _tell(self, forms: Iterable[str]) -> None:
        for form in forms:
            for watcher in self._watchers:
                watcher(form)

    def register(self, secret: str | None) -> None:
        """From now on, ``secret`` is replaced by ``[redacted]`` wherever text is redacted."""
        with self._lock:
            forms = _forms(secret)
            self._replaceable -= forms  # registered: kept for the rest of the run
            if forms - set(self._secrets):
                self._use(set(self._secrets) | forms)
        self._tell(forms)

    def replace(self, old: Iterable[str], new: Iterable[str]) -> None:
        """From now on ``new`` is redacted and ``old`` no longer is (unless registered with
        ``register``): a run that gets a token per minute keeps a short list."""
        with self._lock:
            gone = {form for secret in old for form in _forms(secret)} & self._replaceable
            added = {form for secret in new for form in _forms(secret)} - set(self._secrets)
            self._replaceable = (self._replaceable - gone) | added
            self._use((set(self._secrets) - gone) | added)
        self._tell(added)

    def _use(self, secrets: set[str]) -> None:
        # Longest first, so a secret containing another is removed whole.
        self._secrets = tuple(sorted(secrets, key=len, reverse=True))
        alternatives = "|".join(map(re.escape, self._secrets))
        self._pattern = re.compile(alternatives, re.IGNORECASE) if secrets else None

    def redact(self, text: str) -> str:
        """``text`` without any registered secret or token: for what a server said only.

        Never a pattern over ordinary words ("Flag Bearer Ltd." stays as it is), and
        never applied to a value from the files, to a compare or to what is sent.
        """
        pattern = self._pattern
        return pattern.sub(REDACTED, text) if pattern else text

    def cut(self, text: str, limit: int) -> str:
        """The first ``limit`` characters of ``text``, for a text to be redacted and bounded
        that may be too long to redact whole: when the cut splits a secret, its start is cut
        off too (``redact`` finds only whole secrets, so ``redact(text[:limit])`` would show
        most of one that straddles the cut)."""
        if len(text) <= limit:
            return text
        head = text[:limit]
        # The longest end of the head that starts a secret: what is left of a secret
        # the cut split, which redaction would no longer know. Compared end by end, case
        # ignored as redaction ignores it (lower() may change a text's length).
        split = max(
            (
                k
                for secret in self._secrets
                for k in range(min(len(secret) - 1, limit), 0, -1)
                if head[-k:].lower() == secret[:k].lower()
            ),
            default=0,
        )
        return head[: limit - split]

    def holds_secret(self, text: str) -> bool:
        """Whether ``text`` holds a registered secret or token.

        What a server says is written to git only without one: export and adopt leave
        such a value out rather than write it redacted, which would change the data.
        """
        pattern = self._pattern
        return pattern is not None and pattern.search(text) is not None


def _forms(secret: str | None) -> set[str]:
    if not secret or len(secret) < MIN_SECRET_LENGTH:
        return set()  # refused before it is ever held (settings, auth): never redacts words
    return {secret, html.escape(secret)}


_REDACTOR = Redactor()  # the process's: the API client registers, every output redacts
register_secret = _REDACTOR.register
replace_secrets = _REDACTOR.replace
watch_secrets = _REDACTOR.watch
redact = _REDACTOR.redact
cut = _REDACTOR.cut
holds_secret = _REDACTOR.holds_secret


def redact_and_escape(text: str) -> str:
    """A one-line string from outside, fit for a terminal, a log or a file."""
    return escape(redact(text))


def redact_and_escape_lines(text: str) -> str:
    """``text`` redacted and escaped line by line: a message of several lines keeps its
    shape. Escaping is idempotent on what was escaped already: an error's message,
    worded by the modules, may quote a path, ref or value from outside."""
    return "\n".join(redact_and_escape(line) for line in text.split("\n"))


# -- words every layer uses ----------------------------------------------------------------


def plural(count: int, word: str) -> str:
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


def seconds(value: float) -> str:
    """A wait in words that never rounds a real wait to "0.0 s": "0.04 s", "0.3 s", "60 s"."""
    if 0 < value < 0.1:  # "0.0 s" would read as no wait at all
        return f"{value:.1g} s"
    if value < 10:
        return f"{value:.1f} s"
    return f"{value:.0f} s"


# What a value is, in the words of someone who writes YAML, and in JSON's.
_KINDS: tuple[tuple[type | tuple[type, ...], str, str], ...] = (
    (type(None), "empty", "null"),
    (bool, "a boolean", "a boolean"),
    ((int, float), "a number", "a number"),
    (str, "text", "a string"),
    (dict, "a mapping", "an object"),
    (list, "a list", "a list"),
    (datetime.datetime, "a date and time", "a date and time"),
    (datetime.date, "a date", "a date"),
    (bytes, "binary data", "binary data"),
)


def kind_in_words(value: object, *, as_json: bool = False) -> str:
    """What a value is, in words: "a mapping" (``as_json``: "an object"), "a number"."""
    for types, in_yaml, in_json in _KINDS:
        if isinstance(value, types):
            return in_json if as_json else in_yaml
    return "a value of another kind"
