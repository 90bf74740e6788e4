"""What syncing the audit log to disk costs on a 1,000-write apply.

The writes of one apply (one PATCH per invite) go to the in-process sandbox
three ways, side by side:

- ``no log``: no ``--audit-log``;
- ``log, no fsync``: every record is one ``write()`` on an O_APPEND file,
  which survives ``kill -9`` but not a power cut;
- ``log + fsync``: what ``apply --audit-log`` does, each attempt record synced
  to disk before its request leaves.

Only the writes are timed (the plan is made first, untimed), in rounds that
take the three ways in turn so that a drift in the machine's speed touches them
alike; each way's median over the rounds is printed.

    .venv/bin/python benchmarks/audit_flush.py [--writes 1000] [--rounds 5]
        [--parallelism 16] [--dir DIR]

``--dir`` is where the log goes (default: the current directory). It must be on
the disk a real log would use: on a tmpfs, fsync costs nothing.

Measured 2026-11-23 on a shared 2-CPU machine, ext4, load average 9-13 (other
jobs were syncing to the same disk, so treat these as upper bounds):

    parallelism 16, 5 rounds   wall s   vs no log (paired)
    no log                     1.356    1.00x
    log, no fsync              1.663    1.57x
    log + fsync                2.138    1.59x   (1.08x the unsynced log)
    parallelism 1, 3 rounds: 1.475 / 4.241 / 4.593 s (fsync 1.08x the unsynced log)
    one attempt record alone: 0.021 ms unsynced, 3.9 ms with fsync (median)

Concurrent workers share disk flushes, so syncing adds about 8% to a 1,000-write
apply; what the log adds at all is mostly waiting on the busy disk's journal.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any, NamedTuple

from reconciler.api.client import ApiClient
from reconciler.api.concurrency import Stop, ordered_map
from reconciler.apply.applier import Applier
from reconciler.apply.audit import AuditLog
from reconciler.desired.state import load_desired_state
from reconciler.plan.make import make_plan
from reconciler.plan.model import Plan
from reconciler.plan.saved import plan_digest
from reconciler.sandbox import SANDBOX_CLIENT_ID, SANDBOX_CLIENT_SECRET, Sandbox
from reconciler.settings.config import Settings

WAYS = ("no log", "log, no fsync", "log + fsync")
NAMES = ["Société Générale", "Müller & Söhne GmbH", "株式会社サクラ商事", "Ørsted Ventures"]


def server_state(count: int) -> list[dict[str, Any]]:
    return [
        {
            "id": f"inv_{i:05d}",
            "status": "pending",
            "name": f"{NAMES[i % len(NAMES)]} {i}",
            "email": f"old{i}@example.com",
            "groups": ["emea"],
        }
        for i in range(count)
    ]


def write_desired(directory: Path, count: int) -> Path:
    lines = ["invites:"]
    for i in range(count):
        lines += [f"  - id: inv_{i:05d}", f"    email: kyb{i}@example.com", "    groups: [eu]"]
    path = directory / "invites.yaml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def make_the_plan(client: ApiClient, desired_file: Path) -> Plan:
    state = load_desired_state([str(desired_file)])
    readings = ordered_map(lambda i: client.get_invite(i.id), state.invites, 16)
    return make_plan(client.base_url, readings, None)


class Timing(NamedTuple):
    wall: float  # seconds the writes took
    cpu: float  # CPU seconds of the whole process meanwhile (client and sandbox threads)


def one_apply(way: str, count: int, desired_file: Path, log_dir: Path, parallelism: int) -> Timing:
    """How long the writes of one apply took, on a fresh sandbox."""
    with Sandbox(server_state(count)) as sandbox:
        settings = Settings(
            base_url=sandbox.url,
            client_id=SANDBOX_CLIENT_ID,
            client_secret=SANDBOX_CLIENT_SECRET,
            parallelism=parallelism,
        )
        with ApiClient(settings) as client:
            plan = make_the_plan(client, desired_file)
            assert len(plan.changes) == count, plan.summary
            audit = None
            if way != "no log":
                log = log_dir / "audit.jsonl"
                log.unlink(missing_ok=True)
                digest = plan_digest(plan)
                audit = AuditLog(str(log), SANDBOX_CLIENT_ID, digest, sync="fsync" in way)
            applier = Applier(client, parallelism=parallelism, stop=Stop(), audit=audit)
            started, cpu_started = time.perf_counter(), time.process_time()
            report = applier.apply(plan)
            wall, cpu = time.perf_counter() - started, time.process_time() - cpu_started
            if audit is not None:
                audit.close()
    assert report.updated == count, "a write failed: the figure would lie"
    return Timing(wall, cpu)


def filesystem_of(path: Path) -> str:
    """The filesystem type holding ``path``, from /proc/mounts (Linux), else 'unknown'."""
    best, kind = "", "unknown"
    try:
        mounts = Path("/proc/mounts").read_text(encoding="utf-8").splitlines()
    except OSError:
        return kind
    resolved = str(path.resolve())
    for line in mounts:
        parts = line.split()
        if len(parts) >= 3 and resolved.startswith(parts[1]) and len(parts[1]) > len(best):
            best, kind = parts[1], parts[2]
    return kind


def measure(writes: int, rounds: int, log_dir: Path, parallelism: int) -> dict[str, list[Timing]]:
    times: dict[str, list[Timing]] = {way: [] for way in WAYS}
    order = list(WAYS)
    shuffle = random.Random(20261123).shuffle  # no way always runs first, or last
    with tempfile.TemporaryDirectory(dir=log_dir) as scratch:
        warm_up, measured = Path(scratch, "warm-up"), Path(scratch, "measured")
        warm_up.mkdir()
        measured.mkdir()
        one_apply("log + fsync", 50, write_desired(warm_up, 50), warm_up, parallelism)
        desired = write_desired(measured, writes)
        for _ in range(rounds):
            shuffle(order)
            for way in order:
                times[way].append(one_apply(way, writes, desired, measured, parallelism))
    return times


def one_record(log_dir: Path, sync: bool, count: int = 200) -> list[float]:
    """Seconds each attempt record takes alone: one thread, no network, nothing else."""
    path = log_dir / "probe.jsonl"
    path.unlink(missing_ok=True)
    fields = {"email": {"before": "old@example.com", "after": "kyb@example.com"}}
    log = AuditLog(str(path), SANDBOX_CLIENT_ID, "sha256:" + "0" * 64, sync=sync)
    seconds = []
    for i in range(count):
        started = time.perf_counter()
        attempt = log.attempt(f"inv_{i:05d}", "update", fields)
        seconds.append(time.perf_counter() - started)
        log.outcome(attempt, "ok", 200, f"req-{i}")
    log.close()
    return sorted(seconds)


def report(times: dict[str, list[Timing]], writes: int, log_dir: Path) -> None:
    wall = {way: statistics.median(t.wall for t in times[way]) for way in WAYS}
    cpu = {way: statistics.median(t.cpu for t in times[way]) for way in WAYS}
    print(f"{'':15}{'wall s':>8}{'ms/write':>10}{'cpu s':>7}   paired by round: vs no log")
    for way in WAYS:
        # Paired by round, so that the machine's drift from round to round cancels out.
        ratios = [a.wall / b.wall for a, b in zip(times[way], times["no log"], strict=True)]
        print(
            f"{way:15}{wall[way]:8.3f}{1000 * wall[way] / writes:10.3f}{cpu[way]:7.2f}"
            f"   {statistics.median(ratios):.2f}x"
        )
    pairs = zip(times["log + fsync"], times["log, no fsync"], strict=True)
    ratio = statistics.median(a.wall / b.wall for a, b in pairs)
    print(f"log + fsync vs log, no fsync, paired by round: {ratio:.2f}x")
    for sync in (False, True):
        with tempfile.TemporaryDirectory(dir=log_dir) as scratch:
            seconds = one_record(Path(scratch), sync)
        print(
            f"one attempt record alone, {'with' if sync else 'without'} fsync: median "
            f"{1000 * seconds[len(seconds) // 2]:.3f} ms (p90 {1000 * seconds[180]:.3f} ms)"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--writes", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--parallelism", type=int, default=16, help="as apply's (default 16)")
    parser.add_argument("--dir", type=Path, default=Path.cwd(), help="where the logs go")
    args = parser.parse_args()
    times = measure(args.writes, args.rounds, args.dir, args.parallelism)
    print(
        f"{args.writes} writes (PATCH), parallelism {args.parallelism}, {args.rounds} rounds, "
        f"log on {filesystem_of(args.dir)} ({args.dir}), {os.cpu_count()} CPUs, "
        f"load average {os.getloadavg()[0]:.1f}"
    )
    report(times, args.writes, args.dir)


if __name__ == "__main__":
    main()
