"""e: `plan` of 200 invites (60 differ), `apply` of the same (30% changed) and `apply` of
100 e-mail changes with `resendOnChange` (a PATCH and a re-send each), behind a real
Apache 2.4 with mod_evasive (issue 55), a burst blocker that answers its own HTML 403
and keeps blocking while the client keeps sending: `DOSSiteCount 50`, `DOSPageCount 10`,
intervals 1 s, `DOSBlockingPeriod 5`; and `DOSSiteCount 20`, `DOSBlockingPeriod 10`.
Each with no option, and with `--max-rate` at the gateway's limit. Checked: the plan's
summary, every change written once, every invitation sent once (counted at the
sandbox). Figures: wall against the floor (requests that reached the sandbox / the
site count per second), the requests' own span against it (the CLI's start and end
left out), and the requests mod_evasive refused. Skipped, saying so, without Apache and
mod_evasive (`.ci/run` installs them)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from support.apache import Apache, Evasive, apache_binary
from support.estate import SEED
from support.invites import ACME, desired_entry, write_invites

from benchmarks.measure import Measured, RunFailed
from benchmarks.scenarios.common import Context, describe, plan_summary
from benchmarks.targets import Row, Target
from reconciler.sandbox import Sandbox, SandboxOptions

TOTAL = 200  # invites, the estate
CHANGED = 60  # 30%
RESENT = 100  # e-mail changes with resendOnChange
CONFIGS = {
    "site 50, page 10, block 5 s": Evasive(site_count=50, page_count=10, blocking_period=5),
    "site 20, page 10, block 10 s": Evasive(site_count=20, page_count=10, blocking_period=10),
}
LEARNED = Target(3.0, "×")  # no option: the rate learned behind the blocks
AT_LIMIT = Target(1.2, "×")  # --max-rate at the gateway's limit
NONE_REFUSED = Target(0.0, "")


def run(context: Context) -> list[Row]:
    if apache_binary() is None:
        return [
            Row("e gateway, Apache mod_evasive", "skipped: apache2 or mod_evasive missing", None)
        ]
    total = TOTAL
    estates = {
        "plan": _estate(context.work / "apache-plan", total, CHANGED),
        "apply": _estate(context.work / "apache-apply", total, CHANGED),
        "resend": _estate(context.work / "apache-resend", total, RESENT, resendOnChange=True),
    }
    rows: list[Row] = []
    for label, evasive in CONFIGS.items():
        for capped in (False, True):
            for command, (folder, state, changed) in estates.items():
                rows += _case(context, label, evasive, capped, command, folder, state, changed)
    return rows


def _estate(
    folder: Path, total: int, changed: int, **change: Any
) -> tuple[Path, list[dict[str, Any]], int]:
    state = [dict(ACME, id=f"inv_{i:03d}", name=f"Firma {i} GmbH") for i in range(total)]
    entries = [
        desired_entry(s, email=f"new{i}@acme.example", **change)
        if i < changed
        else desired_entry(s)
        for i, s in enumerate(state)
    ]
    write_invites(folder / "invites", entries)
    return folder / "invites", state, changed


def _case(
    context: Context,
    label: str,
    evasive: Evasive,
    capped: bool,
    command: str,
    folder: Path,
    state: list[dict[str, Any]],
    changed: int,
) -> list[Row]:
    args = ["plan", "--format", "json"] if command == "plan" else ["apply", "--auto-approve"]
    if capped:
        args += ["--max-rate", str(evasive.rate)]
    what = {"plan": f"plan {len(state)} ({changed} differ)", "apply": f"apply {changed} changes"}
    name = (
        f"e {what.get(command, f'apply {changed} e-mail changes, each re-sent')} @ mod_evasive "
        f"{label}{', --max-rate ' + str(evasive.rate) if capped else ''}"
    )
    with Sandbox(state, options=SandboxOptions(seed=SEED)) as sandbox:
        with Apache(sandbox.url, evasive) as gateway:
            measured = context.runner.run(
                f"gateway-apache-{command}",
                [*args, str(folder)],
                sandbox,
                context.work,
                via=gateway.url,
            )
            refused = gateway.refusals()
        _check(name, command, measured, sandbox, state, changed)
        reached = sandbox.stats.total
        context.notes.append(describe(name, measured, sandbox))
    floor = reached / evasive.rate
    span = (measured.last_request or 0.0) - (measured.first_request or 0.0)
    return [
        Row(name, "wall", measured.wall, "s", detail=f"{reached} requests reached the sandbox"),
        Row(
            name,
            f"  ratio to floor {reached}/{evasive.rate}",
            measured.wall / floor,
            "×",
            AT_LIMIT if capped else LEARNED,
            f"floor {floor:.1f} s",
        ),
        Row(name, "  requests' span / floor", span / floor, "×", detail=f"{span:.1f} s"),
        Row(
            name,
            "  refused by the gateway (403)",
            float(refused),
            "",
            NONE_REFUSED if capped else None,
        ),
    ]


def _check(
    name: str,
    command: str,
    measured: Measured,
    sandbox: Sandbox,
    state: list[dict[str, Any]],
    changed: int,
) -> None:
    if command == "plan":
        summary = plan_summary(measured)
        expected = {"update": changed, "unchanged": len(state) - changed}
        if {k: summary.get(k) for k in expected} != expected:
            raise RunFailed(f"{name}: summary {summary}, expected {expected}")
        reads = [c.path.rsplit("/", 1)[-1] for c in sandbox.stats.calls("GET")]
        if sorted(set(reads)) != sorted(s["id"] for s in state):
            raise RunFailed(f"{name}: {len(set(reads))} invites read of {len(state)}")
        return
    patched = [c.path.rsplit("/", 1)[-1] for c in sandbox.stats.calls("PATCH")]
    want = [f"inv_{i:03d}" for i in range(changed)]
    if sorted(patched) != want:
        raise RunFailed(f"{name}: {len(patched)} PATCHes for {changed} changes")
    if command == "resend" and dict(sandbox.store.resends) != dict.fromkeys(want, 1):
        sent = dict(sandbox.store.resends)
        raise RunFailed(f"{name}: {sum(sent.values())} e-mails for {changed} invites")
