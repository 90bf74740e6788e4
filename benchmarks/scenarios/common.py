"""What the scenarios share: sizes, the run context, and a checked `plan` run."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from support.estate import SEED, Dataset, make_dataset

from benchmarks.measure import Measured, RunFailed, Runner
from reconciler.sandbox import Sandbox, SandboxOptions


@dataclass(frozen=True)
class Sizes:
    large: int = 20_000  # validate and plan, both layouts
    huge: int = 200_000  # plan, one file
    plan_cpu: int = 3_000
    plan_latency: int = 1_000
    latency: float = 0.050
    apply_total: int = 600
    apply_changed: int = 200
    rate_limit: float = 100.0
    drift: float = 0.10  # share of invites that differ from the server in plans
    http_gets: int = 2_000  # per layer, in the GET cost by layer
    gateway_total: int = 300  # behind nginx's limit_req
    gateway_changed: int = 90
    load_total: int = 1_000  # against a server whose latency rises with load
    short_tokens: int = 4_000  # plan with tokens said to last 1 ms, and with day-long ones
    ansible_total: int = 300  # one kyb.invites task, and a uri loop, at 20 r/s (issue 41)
    resend_total: int = 100  # re-sends behind a gateway's 1/s on /resend alone


QUICK = Sizes(
    large=2_000,
    huge=6_000,
    plan_cpu=500,
    plan_latency=200,
    apply_total=150,
    apply_changed=50,
    http_gets=300,
    gateway_total=60,
    gateway_changed=18,
    load_total=300,
    short_tokens=500,
    ansible_total=60,
    resend_total=10,
)


@dataclass
class Context:
    runner: Runner
    work: Path  # a temporary directory for the invite files
    sizes: Sizes
    # Runs kept for later scenarios (the 200k slope reuses the 20k one-file plan).
    kept: dict[str, Measured] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)  # a line of detail per run
    repeat: int = 1  # runs per figure where a scenario takes the median (a, b, g, l)


@dataclass
class PlanRun:
    measured: Measured
    sandbox: Sandbox
    data: Dataset


def dataset(
    context: Context, label: str, count: int, layout: str = "split", changed: int | None = None
) -> Dataset:
    """Invite files under the work directory, and a server state where 10% (or ``changed``)
    of them differ."""
    if changed is None:
        changed = round(count * context.sizes.drift)
    return make_dataset(context.work / label, count, changed, layout, SEED)


def run_plan(
    context: Context,
    label: str,
    data: Dataset,
    options: SandboxOptions | None = None,
    extra: tuple[str, ...] = (),
) -> PlanRun:
    """`reconcile plan --format json` of ``data``, checked: exit 0, the plan's summary,
    one GET per invite."""
    args = ["plan", "--format", "json", *extra, str(data.root)]
    with Sandbox(data.server, options=options or SandboxOptions(seed=SEED)) as sandbox:
        measured = context.runner.run(label, args, sandbox, context.work)
    count, changed = len(data.desired), len(data.changed)
    summary = plan_summary(measured)
    expected = {"update": changed, "unchanged": count - changed, "error": 0}
    if {k: summary.get(k) for k in expected} != expected:
        raise RunFailed(f"{label}: plan summary {summary}, expected {expected}")
    gets = len(sandbox.stats.calls("GET"))
    if gets != count:
        raise RunFailed(f"{label}: the sandbox answered {gets} GETs, expected {count}")
    return PlanRun(measured, sandbox, data)


def plan_summary(measured: Measured) -> dict[str, int]:
    text = measured.stdout
    try:
        # Skip anything a profiler printed before the document.
        document, _ = json.JSONDecoder().raw_decode(text[text.index("{") :])
        return dict(document["summary"])
    except (ValueError, KeyError, TypeError) as exc:
        raise RunFailed(f"plan --format json printed no readable summary: {exc}") from None


_SETTLED = re.compile(r"requests in flight: settled at (\d+) in flight \(([^)]*)\)")


def settled_limit(measured: Measured) -> str:
    """The in-flight limit the run settled on, from its `-v` output."""
    found = _SETTLED.findall(measured.stderr)
    if not found:
        return "not shown (fixed parallelism?)"
    limit, how = found[-1]
    return f"{limit} ({how})"


def describe(label: str, measured: Measured, sandbox: Sandbox | None = None) -> str:
    """A line of detail for the notes under the table."""
    text = (
        f"{label}: wall {measured.wall:.2f}s, client CPU {measured.cpu:.2f}s, peak RSS "
        f"{measured.peak_mb:.1f} MB, load average {measured.load:.2f} at the start"
    )
    if sandbox is None:
        return text
    statuses = dict(sorted(sandbox.stats.statuses.items()))
    return (
        f"{text}; sandbox: {sandbox.stats.total} requests {statuses}, max "
        f"{sandbox.stats.max_in_flight} in flight, {measured.server_cpu:.2f}s CPU; "
        f"{measured.phases()}"
    )
