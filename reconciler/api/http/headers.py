"""An answer's header block, parsed into what the standard library makes of it, faster.

http.client hands every header block to the email package's parser, built for mail:
about 50 µs for the half-dozen headers of an API answer, a tenth of a GET's CPU here.
A block of plain header lines (a token, a colon, printable ASCII; no folding, no
multipart) is parsed here into the same ``HTTPMessage``, field for field; any other
block, or one that declares a type the email parser would read a body for, still goes
to the email parser. Lines are read by http.client's own function, with its limits on
a line's length and on the number of headers.

Only the connections of this tool use it (``deadline``'s pools), through a response
class whose ``begin`` is http.client's own code, run with this parser in place of
``http.client.parse_headers``.
"""

from __future__ import annotations

import email.parser
import http.client
import re
import types
from typing import Any, BinaryIO

# A header line the email parser reads as one (name, value) and nothing else: an HTTP
# token, a colon, then printable ASCII, spaces and tabs up to CR LF.
_PLAIN = re.compile(rb"[!#$%&'*+.^_`|~0-9A-Za-z-]+:[\t -~]*\r\n")
_BODY_TYPES = ("multipart", "message")  # types the email parser reads a body for


def parse_headers(
    fp: BinaryIO, _class: type[http.client.HTTPMessage] = http.client.HTTPMessage
) -> Any:
    """What ``http.client.parse_headers(fp)`` returns, for the same lines read."""
    lines = http.client._read_headers(fp)  # type: ignore[attr-defined]
    if lines[-1] != b"\r\n" or not all(_PLAIN.fullmatch(line) for line in lines[:-1]):
        return _email_parsed(lines, _class)
    message = _class()
    for line in lines[:-1]:
        name, _, value = line.decode("ascii").partition(":")
        message.set_raw(name, value.lstrip(" \t").rstrip("\r\n"))
    if message.get_content_maintype() in _BODY_TYPES:
        return _email_parsed(lines, _class)
    message.set_payload("")
    return message


def _email_parsed(lines: list[bytes], _class: type[http.client.HTTPMessage]) -> Any:
    """http.client's own parse of the lines it read (its own function from Python 3.12)."""
    own = getattr(http.client, "_parse_header_lines", None)
    if own is not None:
        return own(lines, _class)
    text = b"".join(lines).decode("iso-8859-1")
    return email.parser.Parser(_class=_class).parsestr(text)


def _begin_with_this_parser() -> types.FunctionType:
    """``HTTPResponse.begin``, its code unchanged, calling ``parse_headers`` above."""
    begin = http.client.HTTPResponse.begin
    namespace = {**vars(http.client), "parse_headers": parse_headers}
    return types.FunctionType(
        begin.__code__, namespace, begin.__name__, begin.__defaults__, begin.__closure__
    )


class LeanHeadersResponse(http.client.HTTPResponse):
    """http.client's response, its header block parsed by ``parse_headers`` above."""

    begin = _begin_with_this_parser()
