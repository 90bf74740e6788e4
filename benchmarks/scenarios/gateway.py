"""g: `plan` and `apply` of 300 invites (90 differing) behind a real nginx with
`limit_req`: 10 r/s and 5 r/s with no burst, 20 r/s with `burst=10
nodelay`. Converged (the plan's summary, the server's state), wall against
requests / rate, and the share of requests nginx refused. Skipped, saying so,
when nginx is not installed (`.ci/run` installs it)."""

from __future__ import annotations

import statistics
from typing import NamedTuple

from support.estate import SEED, Dataset
from support.nginx import Gateway, Nginx, nginx_binary

from benchmarks.measure import Measured, RunFailed
from benchmarks.scenarios.apply_rate_limit import check_applied
from benchmarks.scenarios.common import Context, dataset, describe, plan_summary
from benchmarks.targets import Row, Target
from reconciler.sandbox import Sandbox, SandboxOptions

REFUSED = Target(2.0, "%")
CASES = (  # (gateway, wall target as a multiple of requests / rate)
    (Gateway(rate=10), Target(1.1, "×")),
    (Gateway(rate=5), Target(1.15, "×")),
    (Gateway(rate=20, burst=10), Target(1.15, "×")),
)


class Sample(NamedTuple):
    measured: Measured
    requests: int  # reached the sandbox, or refused by nginx
    refused: int
    sandbox: Sandbox


def run(context: Context) -> list[Row]:
    if nginx_binary() is None:
        return [Row("g gateway", "skipped: nginx is not installed", None)]
    sizes = context.sizes
    n, changed = sizes.gateway_total, sizes.gateway_changed
    data = dataset(context, "gateway", n, changed=changed)
    rows: list[Row] = []
    for gateway, ratio in CASES:
        burst = f", burst {gateway.burst} nodelay" if gateway.burst else ", no burst"
        for command in ("plan", "apply"):
            name = f"g {command} {n} ({changed} differ) @ nginx {gateway.rate:g} r/s{burst}"
            samples = [_once(context, data, gateway, command) for _ in range(context.repeat)]
            rows += _rows(name, samples, gateway, ratio)
            context.notes.append(describe(name, samples[-1].measured, samples[-1].sandbox))
    return rows


def _once(context: Context, data: Dataset, gateway: Gateway, command: str) -> Sample:
    args = ["plan", "--format", "json"] if command == "plan" else ["apply", "--auto-approve"]
    server = Sandbox(data.server, options=SandboxOptions(seed=SEED))
    with server as sandbox, Nginx(sandbox.url, gateway) as nginx:
        label = f"gateway-{command}"
        measured = context.runner.run(
            label, [*args, str(data.root)], sandbox, context.work, via=nginx.url
        )
        refused = nginx.refusals()
    if command == "plan":
        expected = {"update": len(data.changed), "unchanged": len(data.desired) - len(data.changed)}
        summary = plan_summary(measured)
        if {k: summary.get(k) for k in expected} != expected:
            raise RunFailed(f"plan behind nginx: summary {summary}, expected {expected}")
    else:
        check_applied("apply behind nginx", data, sandbox)
    return Sample(measured, sandbox.stats.total + refused, refused, sandbox)


def _rows(name: str, samples: list[Sample], gateway: Gateway, ratio: Target) -> list[Row]:
    assert gateway.rate is not None
    wall = statistics.median(s.measured.wall for s in samples)
    floor = statistics.median((s.requests - s.refused) / gateway.rate for s in samples)
    share = statistics.median(s.refused / s.requests * 100 for s in samples)
    runs = f"median of {len(samples)}" if len(samples) > 1 else "one run"
    walls = ", ".join(f"{s.measured.wall:.1f}" for s in samples)
    refusals = ", ".join(str(s.refused) for s in samples)
    return [
        Row(name, f"wall ({runs})", wall, "s", detail=f"runs {walls} s"),
        Row(name, "  ratio to requests / rate", wall / floor, "×", ratio, f"floor {floor:.1f} s"),
        Row(name, "  refused by nginx", share, "%", REFUSED, f"refusals per run {refusals}"),
    ]
