"""One meaning of an e-mail address: email-validator's, without deliverability checks.

The schema says ``"format": "email"`` (RFC 5321's ASCII addresses; not
``idn-email``): the platform is not known to take international addresses, and
an editor's JSON Schema implementation (ajv-formats, yaml-language-server) judges
the same format. What ``validate`` accepts is what email-validator accepts for
an ASCII address: no quoted local part, no domain literal, a domain with a dot
that is not a special-use name (``.test``, ``.local``, ``localhost``...), a local
part of at most 64 characters.

email-validator costs about 140 µs an address and 0.1 s of imports, so the
addresses almost every file holds get a quick yes first: ``_QUICK`` accepts only
a subset of what email-validator accepts (a property test holds it to that), and
anything else is asked of the library, imported then.
"""

from __future__ import annotations

import re
from functools import cache
from typing import Any

_ATOM = r"[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+"
# A domain of plain labels (no "--" anywhere, which IDNA may refuse in places),
# ending in a letters-only top-level label; the lengths are checked apart.
_LABEL = r"[A-Za-z0-9](?:-?[A-Za-z0-9])*"
_QUICK = re.compile(rf"({_ATOM}(?:\.{_ATOM})*)@((?:{_LABEL}\.)+[A-Za-z]{{2,63}})")
# Top-level names email-validator refuses (its SPECIAL_USE_DOMAIN_NAMES as of 2.x, and a
# few more to stay on the safe side): an address under one is asked of it.
_SPECIAL = frozenset({"arpa", "invalid", "local", "localhost", "onion", "test", "home", "corp"})


def _quick_yes(value: str) -> bool:
    match = _QUICK.fullmatch(value)
    if match is None or len(value) > 254:
        return False
    local, domain = match.groups()
    if len(local) > 64 or len(domain) > 253:
        return False
    labels = domain.lower().split(".")
    if any(len(label) > 63 for label in labels):
        return False
    return labels[-1] not in _SPECIAL


def email_problem(value: str) -> str | None:
    """Why ``value`` is not an e-mail address this tool accepts, or None."""
    if _quick_yes(value):
        return None
    if not value.isascii():
        char = next(c for c in value if not c.isascii())
        fix = (
            "; write the domain in its ASCII (xn--) form"
            if char in value.rpartition("@")[2]
            else ""
        )
        return (
            f"it holds U+{ord(char):04X}, which is not ASCII: international addresses "
            f"are not accepted{fix}"
        )
    from email_validator import EmailNotValidError

    try:
        _validate()(value)
    except EmailNotValidError as error:
        return _REASONS.get(str(error), _lower_first(str(error).rstrip(".")))
    return None


# email-validator's sentences, said as the rest of a message here: "... is not a valid
# email address: it has no @-sign". Others are shown as it words them, without the dot.
_REASONS = {
    "An email address must have an @-sign.": "it has no @-sign",
    "The part after the @-sign is not valid. It should have a period.": (
        "the part after the @-sign has no period"
    ),
}


def _lower_first(text: str) -> str:
    return text[:1].lower() + text[1:]


@cache
def _validate() -> Any:
    from functools import partial

    from email_validator import validate_email

    return partial(
        validate_email,
        check_deliverability=False,
        allow_smtputf8=False,
        allow_quoted_local=False,
        allow_domain_literal=False,
        allow_display_name=False,
        strict=True,  # a local part of at most 64 characters (RFC 5321)
    )


def is_email(value: object) -> bool:
    """The ``email`` format: True for anything but text (the schema's `type` judges that)."""
    return not isinstance(value, str) or email_problem(value) is None
