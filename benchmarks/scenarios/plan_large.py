"""m: `plan` of 20,000 invites, 10% differing, one big file and files of at most 250."""

from __future__ import annotations

from support.estate import LAYOUTS

from benchmarks.scenarios.common import Context, dataset, describe, run_plan
from benchmarks.targets import Row, Target

PEAK = Target(80, "MB")


def run(context: Context) -> list[Row]:
    n = context.sizes.large
    rows = []
    for layout in LAYOUTS:
        data = dataset(context, f"plan-{layout}", n, layout)
        done = run_plan(context, f"plan-{layout}-{n}", data)
        measured = done.measured
        context.kept[f"plan-{layout}-{n}"] = measured
        name = f"m plan {n:,}, {'one file' if layout == 'single' else f'{data.files} files'}"
        rows += [
            Row(name, "peak RSS", measured.peak_mb, "MB", PEAK),
            Row(name, "  client CPU per invite", measured.cpu / n * 1000, "ms"),
            Row(name, "  wall", measured.wall, "s"),
        ]
        context.notes.append(describe(name, measured, done.sandbox))
    return rows
