"""Words every module may use: no imports, so the lowest layers (the limiter) can too."""

from __future__ import annotations


def plural(count: int, word: str) -> str:
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


def seconds(value: float) -> str:
    """A wait in words that never rounds a real wait to "0.0 s": "0.04 s", "0.3 s", "60 s"."""
    if 0 < value < 0.1:  # "0.0 s" would read as no wait at all
        return f"{value:.1g} s"
    if value < 10:
        return f"{value:.1f} s"
    return f"{value:.0f} s"
