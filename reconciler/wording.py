"""Words every module may use: no imports, so the lowest layers (the limiter) can too."""

from __future__ import annotations


def plural(count: int, word: str) -> str:
    return f"{count} {word}" if count == 1 else f"{count} {word}s"
