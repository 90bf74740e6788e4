"""`export --ids-from FILE|-`: invite ids read from a file or stdin, one a line.

The platform lists no invites: ids come from its console or its own export, often
hundreds at a time, more than a command line comfortably holds. Blank lines and
`#` comments (a line's own, or after an id) are ignored; every id is checked with
the rule ids on the command line are, and a bad one is named at FILE:LINE before
any request.
"""

from __future__ import annotations

import sys

import click

from reconciler.errors import ReconcilerError
from reconciler.files import TooLarge, read_regular
from reconciler.model.invite import ID_RULE, INVITE_ID
from reconciler.safetext import escape, quote_value

STDIN = "-"
# Some 150,000 ids of 25 characters; a list of real ids is far smaller. Past it the
# source is not a list of ids (`--ids-from /dev/zero` is refused, never read whole).
MAX_IDS_BYTES = 4 * 1024 * 1024
_SHOWN = 10  # bad ids named, then how many more


def read_ids(source: str) -> list[str]:
    """The ids in ``source`` (a path, or ``-`` for stdin), in order, each once."""
    name = "stdin" if source == STDIN else escape(source)
    try:
        data = _read_stdin() if source == STDIN else _read_file(source)
    except TooLarge:
        raise ReconcilerError(
            f"{name}: larger than {MAX_IDS_BYTES // 1048576} MiB: too large for a list of "
            "invite ids (one a line); nothing was read"
        ) from None
    try:
        text = data.decode("utf-8-sig")  # a byte-order mark, as some editors save, is no id
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise ReconcilerError(
            f"{name}:{line}: not UTF-8 text (byte 0x{data[exc.start]:02x}): save the list of "
            "invite ids as UTF-8; nothing was read"
        ) from None
    return ids_in(text, name)


def ids_in(text: str, name: str) -> list[str]:
    """The ids of ``text``, one a line; the bad ones refused with ``name:LINE``."""
    ids: list[str] = []
    bad: list[str] = []
    # Lines end at \n only, as editors and `grep -n` count them (a \r before it is
    # stripped): splitlines() also breaks at U+2028 or \x1c, shifting every later line
    # number, and would make "a\x1cb" two ids instead of one bad one.
    for number, line in enumerate(text.split("\n"), start=1):
        ident = line.split("#", 1)[0].strip()
        if not ident:
            continue
        if INVITE_ID.fullmatch(ident):
            ids.append(ident)
        else:
            bad.append(f"{name}:{number}: {quote_value(ident)}")
    if bad:
        more = f"\n  and {len(bad) - _SHOWN} more" if len(bad) > _SHOWN else ""
        raise ReconcilerError(
            f"not a valid invite id ({ID_RULE}; one id a line, `#` starts a comment); "
            "nothing was read:\n" + "\n".join(f"  {b}" for b in bad[:_SHOWN]) + more
        )
    return list(dict.fromkeys(ids))


def _read_file(path: str) -> bytes:
    try:
        return read_regular(path, MAX_IDS_BYTES)  # a FIFO or device: refused, never waited on
    except OSError as exc:
        pipe = (
            f"; to read ids from a command, pipe them: `COMMAND | reconcile export "
            f"--ids-from {STDIN}`"
            if "FIFO" in str(exc.strerror)
            else ""
        )
        raise ReconcilerError(
            f"{escape(path)}: cannot read the invite ids: {exc.strerror}{pipe}; nothing was read"
        ) from None


def _read_stdin() -> bytes:
    stream = sys.stdin
    if stream is None:  # started with stdin closed (`<&-`)
        raise ReconcilerError("--ids-from -: stdin is closed; nothing was read")
    if stream.isatty():  # typed or pasted: say how it ends, not wait in silence
        click.echo("Reading invite ids from the terminal, one a line; Ctrl-D ends.", err=True)
    data = stream.buffer.read(MAX_IDS_BYTES + 1)
    if len(data) > MAX_IDS_BYTES:
        raise TooLarge(MAX_IDS_BYTES)
    return data
