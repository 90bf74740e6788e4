"""b: `apply --auto-approve` of 600 invites, 200 differing, against a server that allows
100 requests a second: wall against the floor, share answered 429, state afterwards.
Medians of `--repeat` runs: how many requests meet a token bucket's burst running dry
varies from run to run."""

from __future__ import annotations

import statistics
from typing import Any, NamedTuple

from support.estate import SEED, Dataset

from benchmarks.measure import Measured, RunFailed
from benchmarks.scenarios.common import Context, dataset, describe, settled_limit
from benchmarks.targets import Row, Target
from reconciler.model.invite import fields_from_json
from reconciler.plan.make import compare_invite
from reconciler.sandbox import Sandbox, SandboxOptions

RATIO = Target(1.05, "×")
REFUSED = Target(1.0, "%", strict=True)


class Sample(NamedTuple):
    measured: Measured
    sandbox: Sandbox


FAR = 0.050  # seconds: the same limit, the server as far as a platform abroad


def run(context: Context) -> list[Row]:
    sizes = context.sizes
    n, changed, limit = sizes.apply_total, sizes.apply_changed, sizes.rate_limit
    name = f"b apply {n:,} ({changed} differ) @ {limit:g} req/s"
    data = dataset(context, "apply-rate-limit", n, changed=changed)
    near = [_once(context, name, data, limit, 0.0) for _ in range(context.repeat)]
    # No target: what a far server costs slow start (see benchmarks/README.md).
    far = [_once(context, name, data, limit, FAR) for _ in range(context.repeat)]
    context.notes.append(describe(name, near[-1].measured, near[-1].sandbox))
    context.notes.append(
        describe(f"{name}, {FAR * 1000:.0f} ms away", far[-1].measured, far[-1].sandbox)
    )
    # GETs to plan, then each write's GET right before its PATCH, and one token request
    floor = (n + 2 * len(data.changed) + 1) / limit
    wall, walls = _walls(near)
    far_wall, far_walls = _walls(far)
    runs = f"median of {len(near)}" if len(near) > 1 else "one run"
    return [
        Row(name, f"wall ({runs})", wall, "s", detail=walls),
        Row(name, f"  ratio to floor {floor * limit:.0f}/{limit:g}", wall / floor, "×", RATIO),
        Row(name, "answered 429", _refused(near), "%", REFUSED, _refusals(near)),
        Row(name, "  in-flight limit of the reads", None, detail=settled_limit(near[-1].measured)),
        Row(name, "server state after apply", None, detail=f"all {n} match their YAML"),
        Row(
            name,
            f"{FAR * 1000:.0f} ms away: ratio to floor",
            far_wall / floor,
            "×",
            detail=far_walls,
        ),
        Row(name, "  answered 429", _refused(far), "%", detail=_refusals(far)),
    ]


def _once(context: Context, name: str, data: Dataset, limit: float, latency: float) -> Sample:
    args = ["apply", "--auto-approve", "-v", str(data.root)]
    options = SandboxOptions(rate_limit=limit, latency=latency, seed=SEED)
    with Sandbox(data.server, options=options) as sandbox:
        measured = context.runner.run("apply-rate-limit", args, sandbox, context.work)
    check_applied(name, data, sandbox)
    return Sample(measured, sandbox)


def _walls(samples: list[Sample]) -> tuple[float, str]:
    walls = [s.measured.wall for s in samples]
    return statistics.median(walls), "runs " + ", ".join(f"{w:.2f}" for w in walls) + " s"


def _refused(samples: list[Sample]) -> float:
    return (
        statistics.median(s.sandbox.stats.statuses[429] / s.sandbox.stats.total for s in samples)
        * 100
    )


def _refusals(samples: list[Sample]) -> str:
    return "runs " + ", ".join(
        f"{s.sandbox.stats.statuses[429]} of {s.sandbox.stats.total}" for s in samples
    )


def check_applied(name: str, data: Dataset, sandbox: Sandbox) -> None:
    """Every invite matches its YAML afterwards, and only the ones that differed were written."""
    state = sandbox.store.snapshot()
    wrong = [
        d["id"]
        for d in data.desired
        if compare_invite(fields_from_json(_fields(d)), fields_from_json(state[d["id"]]))
    ]
    if wrong:
        raise RunFailed(f"{name}: after apply {len(wrong)} invites still differ: {wrong[:5]}")
    patched = {r.path.rsplit("/", 1)[-1] for r in sandbox.stats.calls("PATCH") if r.status == 200}
    if patched != data.changed:
        raise RunFailed(f"{name}: PATCHed {len(patched)} invites, expected {len(data.changed)}")


def _fields(invite: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in invite.items() if k != "id"}
