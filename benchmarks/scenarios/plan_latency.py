"""a: `plan` of 1,000 invites against a server that takes 50 ms per answer, default
settings (the adaptive in-flight limit), beside the same with `--parallelism 16`."""

from __future__ import annotations

from benchmarks.scenarios.common import Context, dataset, describe, run_plan, settled_limit
from benchmarks.targets import Row, Target
from reconciler.sandbox import SandboxOptions
from tests.support.estate import SEED

RATIO = Target(0.6, "×")  # measured 0.5× before the pacer was rewritten: keep it
REFUSED = Target(0, "")  # no rate limit here: today's figure is none


def run(context: Context) -> list[Row]:
    n, latency = context.sizes.plan_latency, context.sizes.latency
    name = f"a plan {n:,} @ {latency * 1000:.0f} ms"
    data = dataset(context, "plan-latency", n)
    options = SandboxOptions(latency=latency, seed=SEED)
    floor = n * latency / 16
    adaptive = run_plan(context, "plan-latency", data, options, ("-v",))
    fixed = run_plan(context, "plan-latency-p16", data, options, ("--parallelism", "16"))
    context.notes.append(describe(f"{name}, defaults", adaptive.measured, adaptive.sandbox))
    context.notes.append(describe(f"{name}, --parallelism 16", fixed.measured, fixed.sandbox))
    wall = adaptive.measured.wall
    return [
        Row(name, "wall, default settings", wall, "s"),
        Row(name, "  ratio to N×latency/16", wall / floor, "×", RATIO, f"floor {floor:.2f} s"),
        Row(name, "  answered 429", adaptive.sandbox.stats.statuses[429], "", REFUSED),
        Row(name, "  in-flight limit settled at", None, detail=settled_limit(adaptive.measured)),
        Row(name, "  most requests in flight", adaptive.sandbox.stats.max_in_flight),
        Row(name, "wall, --parallelism 16 (fixed)", fixed.measured.wall, "s"),
        Row(name, "  ratio to N×latency/16", fixed.measured.wall / floor, "×"),
    ]
