"""c: client CPU per invite of a `plan` of 3,000 invites, start-up included."""

from __future__ import annotations

from benchmarks.scenarios.common import Context, dataset, describe, run_plan
from benchmarks.targets import Row, Target

PER_INVITE = Target(0.5, "ms")


def run(context: Context) -> list[Row]:
    n = context.sizes.plan_cpu
    done = run_plan(context, "plan-cpu", dataset(context, "plan-cpu", n))
    measured = done.measured
    name = f"c plan {n:,} @ 0 ms"
    context.notes.append(describe(name, measured, done.sandbox))
    return [
        Row(name, "client CPU per invite (user+sys)", measured.cpu / n * 1000, "ms", PER_INVITE),
        Row(name, "  client CPU total", measured.cpu, "s"),
        Row(name, "  wall", measured.wall, "s"),
    ]
