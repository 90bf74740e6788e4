"""b: `apply --auto-approve` of 600 invites, 200 differing, against a server that allows
100 requests a second: wall against the floor, share answered 429, state afterwards.
Medians of `--repeat` runs: how many requests meet a token bucket's burst running dry
varies from run to run."""

from __future__ import annotations

import statistics
from typing import Any, NamedTuple

from benchmarks.measure import Measured, RunFailed
from benchmarks.scenarios.common import Context, dataset, describe, settled_limit
from benchmarks.targets import Row, Target
from reconciler.plan.compare import compare_invite
from reconciler.sandbox import Sandbox, SandboxOptions
from tests.support.estate import SEED, Dataset

RATIO = Target(1.05, "×")
REFUSED = Target(1.0, "%", strict=True)


class Sample(NamedTuple):
    measured: Measured
    sandbox: Sandbox


def run(context: Context) -> list[Row]:
    sizes = context.sizes
    n, changed, limit = sizes.apply_total, sizes.apply_changed, sizes.rate_limit
    name = f"b apply {n:,} ({changed} differ) @ {limit:g} req/s"
    data = dataset(context, "apply-rate-limit", n, changed=changed)
    samples = [_once(context, name, data, limit) for _ in range(context.repeat)]
    context.notes.append(describe(name, samples[-1].measured, samples[-1].sandbox))
    needed = n + len(data.changed) + 1  # GETs, PATCHes, one token request
    floor = needed / limit
    wall = statistics.median(s.measured.wall for s in samples)
    share = statistics.median(
        s.sandbox.stats.statuses[429] / s.sandbox.stats.total for s in samples
    )
    runs = f"median of {len(samples)}" if len(samples) > 1 else "one run"
    walls = ", ".join(f"{s.measured.wall:.2f}" for s in samples)
    refusals = ", ".join(
        f"{s.sandbox.stats.statuses[429]} of {s.sandbox.stats.total}" for s in samples
    )
    return [
        Row(name, f"wall ({runs})", wall, "s", detail=f"runs {walls} s"),
        Row(name, f"  ratio to floor {needed}/{limit:g}", wall / floor, "×", RATIO),
        Row(name, "answered 429", share * 100, "%", REFUSED, f"runs {refusals}"),
        Row(
            name, "  in-flight limit of the reads", None, detail=settled_limit(samples[-1].measured)
        ),
        Row(name, "server state after apply", None, detail=f"all {n} match their YAML"),
    ]


def _once(context: Context, name: str, data: Dataset, limit: float) -> Sample:
    args = ["apply", "--auto-approve", "-v", str(data.root)]
    with Sandbox(data.server, options=SandboxOptions(rate_limit=limit, seed=SEED)) as sandbox:
        measured = context.runner.run("apply-rate-limit", args, sandbox, context.work)
    check_applied(name, data, sandbox)
    return Sample(measured, sandbox)


def check_applied(name: str, data: Dataset, sandbox: Sandbox) -> None:
    """Every invite matches its YAML afterwards, and only the ones that differed were written."""
    state = sandbox.store.snapshot()
    wrong = [d["id"] for d in data.desired if compare_invite(_fields(d), state[d["id"]])]
    if wrong:
        raise RunFailed(f"{name}: after apply {len(wrong)} invites still differ: {wrong[:5]}")
    patched = {r.path.rsplit("/", 1)[-1] for r in sandbox.stats.calls("PATCH") if r.status == 200}
    if patched != data.changed:
        raise RunFailed(f"{name}: PATCHed {len(patched)} invites, expected {len(data.changed)}")


def _fields(invite: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in invite.items() if k != "id"}
