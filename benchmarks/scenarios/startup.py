"""0: what starting the CLI costs before any work (context for the others)."""

from __future__ import annotations

from benchmarks.scenarios.common import Context
from benchmarks.targets import Row


def run(context: Context) -> list[Row]:
    runs = [context.runner.run("startup", ["--version"], None, context.work) for _ in range(3)]
    best = min(runs, key=lambda m: m.wall)
    name = "0 start-up"
    return [
        Row(name, "`reconcile --version` wall (best of 3)", best.wall, "s"),
        Row(name, "  its CPU", best.cpu, "s"),
        Row(name, "  its peak RSS", best.peak_mb, "MB"),
    ]
