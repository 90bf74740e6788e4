"""Policies' patterns on RE2 (google-re2): in time linear in the text, whatever a pull
request writes; a pattern RE2 cannot run is refused with why."""

from __future__ import annotations

from functools import cache
from typing import Any


def re2_refusal(pattern: str) -> str | None:
    import re2

    try:
        re2.compile(pattern, _re2_options())
    except re2.error as error:
        reason = error.args[0] if error.args else error
        text = reason.decode("utf-8", "replace") if isinstance(reason, bytes) else str(reason)
        return (
            f"`pattern` cannot be run in linear time ({text}): policies' patterns run on "
            "RE2, which has no look-around and no back-references"
        )
    return None


@cache
def _re2_options() -> Any:
    import re2

    options = re2.Options()
    options.log_errors = False  # else RE2 writes its own line on stderr
    return options


@cache
def re2_compiled(pattern: str) -> Any:
    import re2

    return re2.compile(pattern, _re2_options())
