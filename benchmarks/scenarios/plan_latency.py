"""a: `plan` of 1,000 invites against a server that takes 50 ms per answer, default
settings (the adaptive in-flight limit), beside the same with `--parallelism 16`."""

from __future__ import annotations

import statistics

from support.estate import SEED

from benchmarks.scenarios.common import (
    Context,
    PlanRun,
    dataset,
    describe,
    run_plan,
    settled_limit,
)
from benchmarks.targets import Row, Target
from reconciler.sandbox import SandboxOptions

RATIO = Target(0.6, "×")  # measured 0.5× before the pacer was rewritten: keep it
REFUSED = Target(0, "")  # no rate limit here: today's figure is none


def run(context: Context) -> list[Row]:
    n, latency = context.sizes.plan_latency, context.sizes.latency
    name = f"a plan {n:,} @ {latency * 1000:.0f} ms"
    data = dataset(context, "plan-latency", n)
    options = SandboxOptions(latency=latency, seed=SEED)
    floor = n * latency / 16
    adaptive = [
        run_plan(context, "plan-latency", data, options, ("-v",)) for _ in range(context.repeat)
    ]
    fixed = [
        run_plan(context, "plan-latency-p16", data, options, ("--parallelism", "16"))
        for _ in range(context.repeat)
    ]
    last = adaptive[-1]
    context.notes.append(describe(f"{name}, defaults", last.measured, last.sandbox))
    context.notes.append(
        describe(f"{name}, --parallelism 16", fixed[-1].measured, fixed[-1].sandbox)
    )
    wall, walls = _median_wall(adaptive)
    fixed_wall, fixed_walls = _median_wall(fixed)
    runs = f"median of {len(adaptive)}" if len(adaptive) > 1 else "one run"
    return [
        Row(name, f"wall, default settings ({runs})", wall, "s", detail=walls),
        Row(name, "  ratio to N×latency/16", wall / floor, "×", RATIO, f"floor {floor:.2f} s"),
        Row(
            name,
            "  answered 429",
            sum(r.sandbox.stats.statuses[429] for r in adaptive),
            "",
            REFUSED,
        ),
        Row(name, "  in-flight limit settled at", None, detail=settled_limit(last.measured)),
        Row(name, "  most requests in flight", last.sandbox.stats.max_in_flight),
        Row(name, f"wall, --parallelism 16 (fixed, {runs})", fixed_wall, "s", detail=fixed_walls),
        Row(name, "  ratio to N×latency/16", fixed_wall / floor, "×"),
    ]


def _median_wall(runs: list[PlanRun]) -> tuple[float, str]:
    walls = [r.measured.wall for r in runs]
    return statistics.median(walls), "runs " + ", ".join(f"{w:.2f}" for w in walls) + " s"
