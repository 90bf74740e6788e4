"""r: `apply` of 100 invites, each changing its e-mail with `resendOnChange: true`, behind
a real HAProxy that allows 1 request a second on paths ending `/resend` alone (every other
request let through), refused with its HTML 429 and with 503 (issue 36.3). Each e-mail
counted at the sandbox: every one sent, none twice; wall against the floor (one re-send a
second); refusals in HAProxy's log. Skipped, saying so, without HAProxy."""

from __future__ import annotations

from pathlib import Path

from support.estate import SEED
from support.haproxy import Haproxy, Limit, haproxy_binary
from support.invites import ACME, desired_entry, write_invites

from benchmarks.measure import RunFailed
from benchmarks.scenarios.common import Context, describe
from benchmarks.targets import Row, Target
from reconciler.sandbox import Sandbox, SandboxOptions

RATE = 1  # re-sends a second the gateway allows
WALL = Target(1.15, "×")
CASES = {
    "429": Limit(rate=RATE, path_end="/resend"),
    "503": Limit(rate=RATE, path_end="/resend", status=503),
}


def run(context: Context) -> list[Row]:
    if haproxy_binary() is None:
        return [Row("r re-sends behind a limit on /resend", "skipped: no haproxy", None)]
    n = context.sizes.resend_total
    state = [dict(ACME, id=f"inv_{i:03d}", email=f"old{i}@acme.example") for i in range(n)]
    entries = [
        desired_entry(s, email=f"new{i}@acme.example", resendOnChange=True)
        for i, s in enumerate(state)
    ]
    folder = Path(context.work) / "resend-limit"
    write_invites(folder / "invites", entries)
    rows: list[Row] = []
    for refusal, limit in CASES.items():
        name = f"r apply {n}, each re-sent, @ HAProxy {RATE}/s on /resend ({refusal})"
        with Sandbox(state, options=SandboxOptions(seed=SEED)) as sandbox:
            with Haproxy(sandbox.url, limit) as gateway:
                measured = context.runner.run(
                    "resend-limit",
                    ["apply", "--auto-approve", str(folder / "invites")],
                    sandbox,
                    context.work,
                    via=gateway.url,
                )
                refused = gateway.refusals()
            sent = dict(sandbox.store.resends)
        if sent != {invite["id"]: 1 for invite in state}:
            twice = sorted(i for i, c in sent.items() if c > 1)
            raise RunFailed(
                f"{name}: {sum(sent.values())} e-mails for {n} invites (twice: {twice[:5]})"
            )
        floor = n / RATE
        context.notes.append(describe(name, measured, sandbox))
        rows += [
            Row(name, "e-mails sent, each once", float(n), "", detail="counted at the sandbox"),
            Row(name, "wall", measured.wall, "s"),
            Row(name, f"  ratio to floor {n}/{RATE}", measured.wall / floor, "×", WALL),
            Row(name, "  refused by the gateway", float(refused), ""),
        ]
    return rows
