"""0: what starting the CLI costs before any work (context for the others).

`--version` loads only the command group; `plan --help` also imports the plan
command and what it needs (the HTTP stack), the start-up every
online run pays.
"""

from __future__ import annotations

from benchmarks.measure import Measured
from benchmarks.scenarios.common import Context
from benchmarks.targets import Row


def run(context: Context) -> list[Row]:
    name = "0 start-up"
    rows = []
    for shown, args in (
        ("reconcile --version", ["--version"]),
        ("reconcile plan --help", ["plan", "--help"]),
    ):
        best = _best_of_3(context, args)
        rows += [
            Row(name, f"`{shown}` wall (best of 3)", best.wall, "s"),
            Row(name, "  its CPU", best.cpu, "s"),
            Row(name, "  its peak RSS", best.peak_mb, "MB"),
        ]
    return rows


def _best_of_3(context: Context, args: list[str]) -> Measured:
    runs = [context.runner.run("startup", args, None, context.work) for _ in range(3)]
    return min(runs, key=lambda m: m.wall)
