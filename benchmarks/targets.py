"""A target is written once: it formats itself beside the figure and checks it."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class Target:
    """``value <= limit`` (or ``<`` when ``strict``), in ``unit``."""

    limit: float
    unit: str
    strict: bool = False

    def met(self, value: float) -> bool:
        return value < self.limit if self.strict else value <= self.limit

    def __str__(self) -> str:
        return f"{'<' if self.strict else '≤'} {_number(self.limit)}{_spaced(self.unit)}"


@dataclass
class Row:
    """One figure of one scenario, with its target if the issue sets one."""

    scenario: str
    figure: str
    value: float | None  # None: the run failed, or the figure is text only
    unit: str = ""
    target: Target | None = None
    detail: str = ""  # shown after the value: the floor, the parts of a sum
    failed: bool = False

    @property
    def result(self) -> str:
        if self.failed:
            return "FAILED"
        if self.target is None or self.value is None:
            return ""
        return "pass" if self.target.met(self.value) else "MISSED"

    @property
    def shown(self) -> str:
        if self.value is None:
            return self.detail or "-"
        text = f"{_number(self.value)}{_spaced(self.unit)}"
        return f"{text} ({self.detail})" if self.detail else text


def _number(value: float) -> str:
    if value == int(value) and abs(value) >= 10:
        return f"{int(value):,}"
    return f"{value:.4g}" if abs(value) < 10 else f"{value:,.1f}"


def _spaced(unit: str) -> str:
    return unit if unit in ("×", "%", "") else f" {unit}"


def table(rows: Iterable[Row]) -> str:
    """The rows as a Markdown table (it reads as well on a terminal)."""
    titles = ["scenario", "figure", "value", "target", "result"]
    cells = [[r.scenario, r.figure, r.shown, str(r.target or ""), r.result] for r in rows]
    widths = [max(len(c[i]) for c in [titles, *cells]) for i in range(len(titles))]

    def line(values: list[str]) -> str:
        return "| " + " | ".join(v.ljust(w) for v, w in zip(values, widths, strict=True)) + " |"

    rule = "|" + "|".join("-" * (w + 2) for w in widths) + "|"
    return "\n".join([line(titles), rule, *(line(c) for c in cells)])


def missed(rows: Iterable[Row]) -> list[str]:
    return [
        f"MISSED: {r.scenario}: {r.figure.strip()} = {r.shown} (target {r.target})"
        for r in rows
        if r.result == "MISSED"
    ]
