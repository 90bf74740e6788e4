"""One meaning of an e-mail address: email-validator's, without deliverability checks.

The schema says ``"format": "email"`` (RFC 5321's ASCII addresses; not
``idn-email``): the platform is not known to take international addresses, and
an editor's JSON Schema implementation (ajv-formats, yaml-language-server) judges
the same format. What ``validate`` accepts is what email-validator accepts for
an ASCII address: no quoted local part, no domain literal, a domain with a dot
that is not a special-use name (``.test``, ``.local``, ``localhost``...), a local
part of at most 64 characters.

email-validator costs about 140 µs an address and 0.1 s of imports, so the
addresses almost every file holds get a quick yes first: ``_quick_yes`` accepts only
a subset of what email-validator accepts (a property test holds it to that), and
anything else is asked of the library, imported then.
"""

from __future__ import annotations

import re
from functools import cache
from typing import Any

_ATOM = r"[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+"
# A domain of plain labels of at most 63 characters (no "--" anywhere, which IDNA may
# refuse in places), ending in a letters-only top-level label that is not a special-use
# name email-validator refuses (its SPECIAL_USE_DOMAIN_NAMES as of 2.x, and two more to
# stay on the safe side). Lengths: the address at most 254, the local part 64, the
# domain 253.
_LABEL = r"(?!-)[A-Za-z0-9-]{1,63}(?<!-)"
_SPECIAL = r"(?i:arpa|invalid|local|localhost|onion|test|home|corp)"
_LOCAL_PART = re.compile(rf"{_ATOM}(?:\.{_ATOM})*").fullmatch
_DOMAIN = re.compile(rf"(?:{_LABEL}\.)+(?!{_SPECIAL}\Z)[A-Za-z]{{2,63}}").fullmatch
# A file's 34,000 addresses have a few dozen domains: each is matched once. Bounded.
_DOMAINS: dict[str, bool] = {}
_DOMAINS_KEPT = 1024


def _quick_yes(value: str) -> bool:
    local, at, domain = value.partition("@")
    if not at or not 3 <= len(value) <= 254 or len(local) > 64 or _LOCAL_PART(local) is None:
        return False
    known = _DOMAINS.get(domain)
    if known is None:
        known = len(domain) <= 253 and "--" not in domain and _DOMAIN(domain) is not None
        if len(_DOMAINS) < _DOMAINS_KEPT:
            _DOMAINS[domain] = known
    return known


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
    if type(value) is not str:
        return not isinstance(value, str)
    return _quick_yes(value) or email_problem(value) is None
