"""v: `validate` of 20,000 invites, one big file and files of at most 250 invites."""

from __future__ import annotations

from support.estate import LAYOUTS

from benchmarks.scenarios.common import Context, dataset, describe
from benchmarks.targets import Row, Target

CPU = Target(1.0, "s")
PEAK = Target(60, "MB")


def run(context: Context) -> list[Row]:
    n = context.sizes.large
    rows = []
    for layout in LAYOUTS:
        data = dataset(context, f"validate-{layout}", n, layout)
        label = f"validate-{layout}-{n}"
        measured = context.runner.run(label, ["validate", str(data.root)], None, context.work)
        name = f"v validate {n:,}, {_layout(layout, data.files)}"
        rows += [
            Row(name, "client CPU (start-up included)", measured.cpu, "s", CPU),
            Row(name, "peak RSS", measured.peak_mb, "MB", PEAK),
            Row(name, "  wall", measured.wall, "s"),
        ]
        context.notes.append(describe(name, measured))
    return rows


def _layout(layout: str, files: int) -> str:
    return "one file" if layout == "single" else f"{files} files"
