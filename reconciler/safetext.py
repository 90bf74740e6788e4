"""Strings from outside (files, servers, the environment) made safe to show.

Two rules, one home each:

- ``escape``: no control character from outside ever reaches a terminal, a CI
  log or a ``path:line:col`` line raw. A file name holding ``ESC ] 0;...BEL``
  would retitle the terminal; a newline would split one error into two.
- ``redact``: the client secret and every token issued in this run never
  reach output, even when a server echoes them back. The API client
  registers them with ``register_secret`` as soon as it holds them; every
  sink (error messages, plan files, the audit log) passes text through
  ``redact``.
"""

from __future__ import annotations

import html
import re
import threading
from collections.abc import Iterable
from functools import lru_cache
from typing import Any

REDACTED = "[redacted]"

# C0 controls, DEL, the C1 range, and the Unicode format characters that
# reorder or hide text on screen: bidi marks, overrides and isolates (U+061C
# included), line and paragraph separators, and the invisible ones that make two
# different values look alike (soft hyphen, zero-width space, word joiner, BOM).
# Also invisible on a terminal, so "Acme<hidden>Ltd" shows as "AcmeLtd": the
# Mongolian vowel separator, invisible operators, interlinear annotation marks,
# Hangul fillers and the tag characters (U+E0000-U+E007F).
# ZWJ and ZWNJ stay: scripts and emoji need them. Lone surrogates (U+D800-U+DFFF,
# which a server's JSON can hold as "\ud800") cannot be encoded to UTF-8 at all:
# printing one would end the output half-way with UnicodeEncodeError.
# NON_ASCII_UNSAFE is the part json.dumps(ensure_ascii=False) leaves raw: the JSON
# writer escapes exactly this class, so the two cannot drift apart.
NON_ASCII_UNSAFE = (
    "\x7f-\x9f\xad\u061c\u115f\u180e\u200b\u200e\u200f\u2028\u2029\u202a-\u202e"
    "\u2060-\u2064\u2066-\u2069\u3164\ufeff\uffa0\ufff9-\ufffb\ud800-\udfff"
    "\U000e0000-\U000e007f"
)
_UNSAFE = re.compile(f"[\x00-\x1f{NON_ASCII_UNSAFE}]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t", "\x1b": "\\x1b", "\x07": "\\x07"}
# A token has a digit or one of ._~+/= in it (RFC 6750's b64token); a word after
# "Bearer" in a company's name ("Standard Bearer Holdings") has none and stays.
_BEARER = re.compile(r"(?i)\b(bearer)\s+(?=[^\s\"',;]*[0-9._~+/=])[^\s\"',;]+")
# Shorter than this, a "secret" would redact ordinary words; the config
# refuses such secrets anyway, and tokens are far longer.
_MIN_SECRET_LENGTH = 6


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
    code = ord(match.group())
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    # JSON has only four-digit escapes: a tag character is written as its UTF-16 pair.
    code -= 0x10000
    return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"


def escape_json_text(text: str) -> str:
    """JSON text of ``json.dumps(ensure_ascii=False)`` with the unsafe characters as \\u escapes.

    They parse back to the same strings, but cannot act on, or hide text from, a
    terminal that prints the file (C0 controls are escaped by json.dumps already).
    """
    return _JSON_UNSAFE.sub(_json_escape_one, text)


def escape(text: str) -> str:
    """``text`` with every control or reordering character shown as an escape."""
    return _UNSAFE.sub(_escape_one, text)


@lru_cache(maxsize=4)
def _pattern(secrets: tuple[str, ...]) -> re.Pattern[str]:
    # Case ignored: a server that upper-cases what it echoes, or percent-encodes
    # it in lower-case hex, must not get a secret through.
    return re.compile("|".join(map(re.escape, secrets)), re.IGNORECASE)


class Redactor:
    """Secrets known to this process, and what replaces them in any text."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._secrets: tuple[str, ...] = ()
        self._replaceable: set[str] = set()  # forms from ``replace``: tokens, dropped in time

    def register(self, secret: str | None) -> None:
        with self._lock:
            forms = _forms(secret)
            self._replaceable -= forms  # registered: kept for the rest of the run
            if forms - set(self._secrets):
                self._use(set(self._secrets) | forms)

    def replace(self, old: Iterable[str], new: Iterable[str]) -> None:
        """Stop redacting ``old`` (unless also registered) and start redacting ``new``."""
        with self._lock:
            gone = {form for secret in old for form in _forms(secret)} & self._replaceable
            added = {form for secret in new for form in _forms(secret)} - set(self._secrets)
            self._replaceable = (self._replaceable - gone) | added
            self._use((set(self._secrets) - gone) | added)

    def _use(self, secrets: set[str]) -> None:
        # Longest first, so a secret containing another is removed whole.
        self._secrets = tuple(sorted(secrets, key=len, reverse=True))

    def redact(self, text: str) -> str:
        secrets = self._secrets  # a tuple, replaced whole: safe to read unlocked
        if secrets:
            text = _pattern(secrets).sub(REDACTED, text)
        return _BEARER.sub(rf"\1 {REDACTED}", text)


def _forms(secret: str | None) -> set[str]:
    if not secret or len(secret) < _MIN_SECRET_LENGTH:
        return set()
    return {secret, html.escape(secret)}


_REDACTOR = Redactor()


def register_secret(secret: str | None) -> None:
    """From now on, ``secret`` is replaced by ``[redacted]`` wherever text is cleaned."""
    _REDACTOR.register(secret)


def replace_secrets(old: Iterable[str], new: Iterable[str]) -> None:
    """From now on ``new`` is redacted and ``old`` no longer is (unless registered with
    ``register_secret``): a run that gets a token per minute keeps a short list."""
    _REDACTOR.replace(old, new)


def redact(text: str) -> str:
    """``text`` without any registered secret or bearer token."""
    return _REDACTOR.redact(text)


def redact_strings(value: Any) -> Any:
    """``value`` (JSON-like) with every string redacted: for documents written to files."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {redact_strings(k): redact_strings(v) for k, v in value.items()}
    if isinstance(value, list):
        return [redact_strings(v) for v in value]
    return value


def clean(text: str) -> str:
    """A one-line string from outside, fit for a terminal, a log or a file."""
    return escape(redact(text))
