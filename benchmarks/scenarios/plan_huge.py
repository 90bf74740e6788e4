"""h: `plan` of 200,000 invites in one file: it completes, its peak, and the memory slope
per invite from the 20,000-invite one-file plan."""

from __future__ import annotations

from benchmarks.scenarios.common import Context, dataset, describe, run_plan
from benchmarks.targets import Row, Target

PEAK = Target(300, "MB")
SLOPE = Target(1.0, "KiB/invite")


def run(context: Context) -> list[Row]:
    small, huge = context.sizes.large, context.sizes.huge
    baseline = context.kept.get(f"plan-single-{small}")
    if baseline is None:  # run alone (--only h): measure the smaller plan too
        base = dataset(context, "base", small, "single")
        baseline = run_plan(context, "plan-single-base", base).measured
    done = run_plan(context, f"plan-single-{huge}", dataset(context, "huge", huge, "single"))
    measured = done.measured
    slope = (measured.maxrss_kib - baseline.maxrss_kib) / (huge - small)
    name = f"h plan {huge:,}, one file"
    context.notes.append(describe(name, measured, done.sandbox))
    return [
        Row(name, "completes (exit 0, right summary)", None, detail="yes"),
        Row(name, "peak RSS", measured.peak_mb, "MB", PEAK),
        Row(
            name,
            f"memory slope {small // 1000}k → {huge // 1000}k",
            slope,
            "KiB/invite",
            SLOPE,
            detail=f"{baseline.peak_mb:.0f} → {measured.peak_mb:.0f} MB",
        ),
        Row(name, "  client CPU per invite", measured.cpu / huge * 1000, "ms"),
        Row(name, "  wall", measured.wall, "s"),
    ]
