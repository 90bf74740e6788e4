"""One meaning of an e-mail address: email-validator's, without deliverability checks.

The schema says ``"format": "email"`` (RFC 5321's ASCII addresses; not
``idn-email``): the platform is not known to take international addresses, and
an editor's JSON Schema implementation (ajv-formats, yaml-language-server) judges
the same format. What ``validate`` accepts is what email-validator accepts for
an ASCII address: no quoted local part, no domain literal, a domain with a dot
that is not a special-use name (``.test``, ``.local``, ``localhost``...), a local
part of at most 64 characters.
"""

from __future__ import annotations

from functools import cache
from typing import Any


def email_problem(value: str) -> str | None:
    """Why ``value`` is not an e-mail address this tool accepts, or None."""
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
    validate, refused = _validator()
    try:
        validate(value)
    except refused as error:
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
def _validator() -> tuple[Any, type[Exception]]:
    """email-validator's check as this tool calls it, and what it raises for a refusal."""
    from functools import partial

    from email_validator import EmailNotValidError, validate_email

    check = partial(
        validate_email,
        check_deliverability=False,
        allow_smtputf8=False,
        allow_quoted_local=False,
        allow_domain_literal=False,
        allow_display_name=False,
        strict=True,  # a local part of at most 64 characters (RFC 5321)
    )
    return check, EmailNotValidError


def is_email(value: object) -> bool:
    """The ``email`` format: True for anything but text (the schema's `type` judges that)."""
    return not isinstance(value, str) or email_problem(value) is None
