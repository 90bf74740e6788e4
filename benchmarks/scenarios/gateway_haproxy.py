"""k: `plan` and `apply` of 300 invites (90 differing) behind a real HAProxy with the
limits HAProxy guides give (issue 36): a sliding window of 10 a second on the client's
address (`http_req_rate`, refused requests counted) refused with HAProxy's HTML 429,
as 503, and with `Retry-After: 1`; the same window counting only the requests let
through (`gpc0_rate`); a server queue (`maxconn 2`, `timeout queue 1s`, the sandbox
answering in 300 ms); and, beside them, nginx's `limit_req` at 10 r/s. The sandbox
answers in 20 ms behind the rate limits. Converged (the plan's summary, the server's
state), wall against requests / rate (the queue: requests × 150 ms), and the share of
requests the gateway refused. Skipped, saying so, when HAProxy is not installed
(`.ci/run` installs it)."""

from __future__ import annotations

import statistics
from typing import NamedTuple

from support.estate import SEED, Dataset
from support.haproxy import Haproxy, Limit, haproxy_binary
from support.nginx import Gateway, Nginx, nginx_binary

from benchmarks.measure import Measured, RunFailed
from benchmarks.scenarios.apply_rate_limit import check_applied
from benchmarks.scenarios.common import Context, dataset, describe, plan_summary
from benchmarks.targets import Row, Target
from reconciler.sandbox import Sandbox, SandboxOptions

RATE = 10  # requests a second the rate limits allow
LATENCY = 0.020  # seconds the sandbox takes behind a rate limit
SERVICE = 0.300  # ... behind the queue: two at a time, so 150 ms a request
WALL = Target(1.15, "×")
REFUSED = Target(3.0, "%")
CASES: dict[str, Limit | Gateway] = {
    "HAProxy http_req_rate 10/s, its 429 page": Limit(rate=RATE),
    "HAProxy http_req_rate 10/s, 503": Limit(rate=RATE, status=503),
    "HAProxy http_req_rate 10/s, 429 + Retry-After: 1": Limit(rate=RATE, retry_after=1),
    "HAProxy gpc0_rate 10/s (let through only)": Limit(rate=RATE, counts="let-through"),
    "HAProxy maxconn 2, timeout queue 1s, 300 ms": Limit(maxconn=2, queue_timeout=1.0),
    "nginx limit_req 10 r/s, no burst": Gateway(rate=RATE),
}


class Sample(NamedTuple):
    measured: Measured
    requests: int  # reached the sandbox, or refused by the gateway
    refused: int
    floor: float  # seconds: what reached the sandbox, at the limit's rate
    sandbox: Sandbox


def run(context: Context) -> list[Row]:
    if haproxy_binary() is None:
        return [Row("k gateway, HAProxy", "skipped: haproxy is not installed", None)]
    sizes = context.sizes
    n, changed = sizes.gateway_total, sizes.gateway_changed
    data = dataset(context, "gateway-haproxy", n, changed=changed)
    rows: list[Row] = []
    for label, limit in CASES.items():
        if isinstance(limit, Gateway) and nginx_binary() is None:
            rows.append(Row(f"k {label}", "skipped: nginx is not installed", None))
            continue
        for command in ("plan", "apply"):
            name = f"k {command} {n} ({changed} differ) @ {label}"
            samples = [_once(context, data, limit, command) for _ in range(context.repeat)]
            rows += _rows(name, samples)
            context.notes.append(describe(name, samples[-1].measured, samples[-1].sandbox))
    return rows


def _once(context: Context, data: Dataset, limit: Limit | Gateway, command: str) -> Sample:
    args = ["plan", "--format", "json"] if command == "plan" else ["apply", "--auto-approve"]
    queue = isinstance(limit, Limit) and limit.maxconn is not None
    options = SandboxOptions(seed=SEED, latency=SERVICE if queue else LATENCY)
    with Sandbox(data.server, options=options) as sandbox:
        gateway = _gateway(sandbox, limit)
        with gateway:
            label = f"gateway-haproxy-{command}"
            measured = context.runner.run(
                label, [*args, str(data.root)], sandbox, context.work, via=gateway.url
            )
            refused = gateway.refusals()
    if command == "plan":
        expected = {"update": len(data.changed), "unchanged": len(data.desired) - len(data.changed)}
        summary = plan_summary(measured)
        if {k: summary.get(k) for k in expected} != expected:
            raise RunFailed(f"plan behind a gateway: summary {summary}, expected {expected}")
    else:
        check_applied("apply behind a gateway", data, sandbox)
    let = sandbox.stats.total
    floor = let * SERVICE / 2 if queue else let / RATE
    return Sample(measured, let + refused, refused, floor, sandbox)


def _gateway(sandbox: Sandbox, limit: Limit | Gateway) -> Haproxy | Nginx:
    if isinstance(limit, Limit):
        return Haproxy(sandbox.url, limit)
    return Nginx(sandbox.url, limit)


def _rows(name: str, samples: list[Sample]) -> list[Row]:
    wall = statistics.median(s.measured.wall for s in samples)
    floor = statistics.median(s.floor for s in samples)
    share = statistics.median(s.refused / s.requests * 100 for s in samples)
    runs = f"median of {len(samples)}" if len(samples) > 1 else "one run"
    walls = ", ".join(f"{s.measured.wall:.1f}" for s in samples)
    refusals = ", ".join(str(s.refused) for s in samples)
    return [
        Row(name, f"wall ({runs})", wall, "s", detail=f"runs {walls} s"),
        Row(name, "  ratio to its floor", wall / floor, "×", WALL, f"floor {floor:.1f} s"),
        Row(name, "  refused by the gateway", share, "%", REFUSED, f"refusals per run {refusals}"),
    ]
