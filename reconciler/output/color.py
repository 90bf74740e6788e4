"""Whether stdout gets colour: `--color`, then NO_COLOR and TERM, then whether it is a terminal."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from typing import TextIO

COLOR_CHOICES = ("auto", "always", "never")


def use_color(
    choice: str = "auto", env: Mapping[str, str] | None = None, stream: TextIO | None = None
) -> bool:
    """`always`/`never` as asked; `auto`: a terminal, NO_COLOR unset or empty, TERM not dumb."""
    if choice == "always":
        return True
    if choice == "never":
        return False
    env = os.environ if env is None else env
    if env.get("NO_COLOR"):  # https://no-color.org: only a non-empty value counts
        return False
    if env.get("TERM") == "dumb":
        return False
    stream = sys.stdout if stream is None else stream
    return bool(getattr(stream, "isatty", lambda: False)())
