"""l: does the adaptive in-flight limit earn its place? `plan` of 1,000 invites against
a server whose latency rises with load (8 workers, 20 ms each: more than 8 at once
only queue), with the default limit (at most 64, as many as the rate keeps busy) and
with a fixed --parallelism of 64 and of 16."""

from __future__ import annotations

import statistics

from support.estate import SEED

from benchmarks.scenarios.common import Context, PlanRun, dataset, describe, run_plan
from benchmarks.targets import Row
from reconciler.sandbox import SandboxOptions

WORKERS = 8
SERVICE = 0.020  # seconds per request, per worker

CONFIGS = (
    ("default", ("-v",)),
    ("--parallelism 64 (fixed)", ("--parallelism", "64")),
    ("--parallelism 16 (fixed)", ("--parallelism", "16")),
)


def run(context: Context) -> list[Row]:
    n = context.sizes.load_total
    name = f"l plan {n:,} @ {WORKERS} workers × {SERVICE * 1000:.0f} ms"
    data = dataset(context, "load-latency", n)
    options = SandboxOptions(latency=SERVICE, workers=WORKERS, seed=SEED)
    floor = n * SERVICE / WORKERS  # the server's own limit: its workers always busy
    rows: list[Row] = []
    for label, extra in CONFIGS:
        runs: list[PlanRun] = [
            run_plan(context, f"load-{extra[-1]}", data, options, extra)
            for _ in range(context.repeat)
        ]
        wall = statistics.median(r.measured.wall for r in runs)
        in_flight = statistics.median(r.sandbox.stats.max_in_flight for r in runs)
        walls = ", ".join(f"{r.measured.wall:.2f}" for r in runs)
        rows += [
            Row(name, f"wall, {label}", wall, "s", detail=f"runs {walls} s"),
            Row(name, "  ratio to the server's floor", wall / floor, "×", detail=f"{floor:.2f} s"),
            Row(name, "  most requests at the server at once", in_flight),
        ]
        context.notes.append(describe(f"{name}, {label}", runs[-1].measured, runs[-1].sandbox))
    return rows
