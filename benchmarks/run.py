"""Benchmarks of the real `reconcile` CLI against the in-process sandbox.

Each scenario writes realistic invite YAML files into a temporary directory,
starts a sandbox holding the matching server state, runs the installed
`reconcile` command as a child process and measures it: wall time, and from
``os.wait4`` the child's CPU time (user + sys) and peak RSS.

    python benchmarks/run.py                 # every scenario, full sizes
    python benchmarks/run.py --quick         # smaller sizes, a smoke run
    python benchmarks/run.py --only a --only c
    python benchmarks/run.py --only plan-cpu --profile /tmp/prof

Exit status: 0 when every run succeeded (even if a target was MISSED); 1 when a
run itself failed (unexpected exit code, wrong plan summary, wrong server state).
"""

from __future__ import annotations

import argparse
import collections
import datetime as dt
import json
import os
import platform
import random
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

try:
    from reconciler.compare import compare_invite
    from reconciler.sandbox import (
        SANDBOX_CLIENT_ID,
        SANDBOX_CLIENT_SECRET,
        Sandbox,
        SandboxOptions,
    )
except ImportError as exc:  # pragma: no cover - a message for the person running it
    sys.exit(
        f"cannot import the reconciler package ({exc}); run this with the project's "
        "environment, e.g. `.venv/bin/python benchmarks/run.py` after `pip install -e .`"
    )

SEED = 20261123
RUN_TIMEOUT = 1800.0  # seconds for one CLI run before it is killed
DEFAULT_PARALLELISM = 16  # Settings.parallelism
T = TypeVar("T")

# -- what a run measures -------------------------------------------------------


class RunFailed(Exception):
    """The CLI run itself went wrong: the figures would mean nothing."""


@dataclass
class Measured:
    args: list[str]
    returncode: int
    wall: float  # seconds, from just before the fork to the child's reaping
    user: float  # CPU seconds of the child, in user mode
    system: float  # and in the kernel
    maxrss_kib: int  # peak resident set size (Linux: KiB)
    stdout: str
    stderr: str
    server_cpu: float  # CPU seconds of this process (the sandbox) during the run
    load: float  # 1-minute load average when the run started: others sharing the cores
    # Seconds from the start to the first and the last request reaching the sandbox.
    first_request: float | None = None
    last_request: float | None = None

    @property
    def cpu(self) -> float:
        return self.user + self.system

    @property
    def maxrss_mib(self) -> float:
        return self.maxrss_kib / 1024

    def phases(self) -> str:
        """Where the wall time went, as the sandbox saw it."""
        if self.first_request is None or self.last_request is None:
            return "no request reached the sandbox"
        return (
            f"{self.first_request:.2f}s before the first request (start-up, reading and "
            f"validating the files), {self.last_request - self.first_request:.2f}s of "
            f"requests, {self.wall - self.last_request:.2f}s after the last one"
        )


def _record_arrivals(sandbox: Sandbox) -> list[float]:
    """Note when each request reaches the sandbox (appending to a list is thread-safe)."""
    arrivals: list[float] = []
    handle = sandbox.app.handle

    def timed(*args: Any) -> Any:
        arrivals.append(time.perf_counter())
        return handle(*args)

    sandbox.app.handle = timed  # type: ignore[method-assign, assignment]
    return arrivals


def _code_version() -> str:
    """The commit of the reconciler package measured, and whether it has local changes."""
    repo = Path(__file__).resolve().parent.parent
    try:
        commit = subprocess.run(
            ["git", "-C", str(repo), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(repo), "status", "--porcelain", "--", "reconciler", "schemas"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown (not a git checkout)"
    return commit + (" with local changes to reconciler/" if dirty else "")


def _reconcile_command() -> list[str]:
    # The console script installed beside this interpreter: the CLI a user runs.
    script = Path(sys.executable).parent / "reconcile"
    if script.exists():
        return [str(script)]
    found = shutil.which("reconcile")
    return [found] if found else [sys.executable, "-m", "reconciler"]


def _cli_env(sandbox: Sandbox | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RECONCILER_")}
    env.pop("NO_COLOR", None)
    if sandbox is not None:
        env.update(
            RECONCILER_BASE_URL=sandbox.url,
            RECONCILER_CLIENT_ID=SANDBOX_CLIENT_ID,
            RECONCILER_CLIENT_SECRET=SANDBOX_CLIENT_SECRET,
        )
    return env


@dataclass
class Runner:
    """Runs the CLI; with ``profile_dir`` under a profiler (figures then mean little)."""

    profile_dir: Path | None = None
    verbose: bool = False
    repeat: int = 1  # runs of each measurement; the one with the least wall time is kept

    def best(self, once: Callable[[], T]) -> T:
        """The fastest of ``repeat`` calls of ``once`` (each returns (Measured, ...))."""
        results = [once() for _ in range(max(1, self.repeat))]
        return min(results, key=lambda r: r[0].wall)  # type: ignore[index]

    def command(self, label: str) -> list[str]:
        if self.profile_dir is None:
            return _reconcile_command()
        self.profile_dir.mkdir(parents=True, exist_ok=True)
        py_spy = Path(sys.executable).parent / "py-spy"
        if py_spy.exists() or shutil.which("py-spy"):
            # Samples every thread (cProfile sees only the main one).
            out = self.profile_dir / f"{label}.collapsed"
            spy = str(py_spy) if py_spy.exists() else "py-spy"
            return [
                spy,
                "record",
                "--format",
                "raw",
                "--rate",
                "200",
                "--gil",  # only the thread holding the GIL: where the client's CPU goes
                "--function",  # one row per function, not per line
                "--threads",
                "--output",
                str(out),
                "--",
                sys.executable,
                "-m",
                "reconciler",
            ]
        out = self.profile_dir / f"{label}.prof"
        return [sys.executable, "-m", "cProfile", "-o", str(out), "-m", "reconciler"]

    def run(
        self, label: str, args: list[str], sandbox: Sandbox | None, cwd: Path, expect: int = 0
    ) -> Measured:
        command = [*self.command(label), *args]
        if self.verbose:
            print(f"  $ reconcile {' '.join(args)}", file=sys.stderr, flush=True)
        arrivals = _record_arrivals(sandbox) if sandbox is not None else []
        with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
            load = os.getloadavg()[0]
            server_before = resource.getrusage(resource.RUSAGE_SELF)
            started = time.perf_counter()
            child = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                env=_cli_env(sandbox),
                cwd=cwd,
            )
            timer = threading.Timer(RUN_TIMEOUT, child.kill)
            timer.start()
            try:
                _, status, usage = os.wait4(child.pid, 0)
            except BaseException:  # e.g. Ctrl-C: do not leave the CLI running
                child.kill()
                child.wait()
                raise
            finally:
                timer.cancel()
            wall = time.perf_counter() - started
            server_after = resource.getrusage(resource.RUSAGE_SELF)
            child.returncode = os.waitstatus_to_exitcode(status)
            out.seek(0)
            err.seek(0)
            measured = Measured(
                args=args,
                returncode=child.returncode,
                wall=wall,
                user=usage.ru_utime,
                system=usage.ru_stime,
                maxrss_kib=usage.ru_maxrss,
                stdout=out.read().decode("utf-8", "replace"),
                stderr=err.read().decode("utf-8", "replace"),
                server_cpu=(server_after.ru_utime + server_after.ru_stime)
                - (server_before.ru_utime + server_before.ru_stime),
                load=load,
                first_request=min(arrivals) - started if arrivals else None,
                last_request=max(arrivals) - started if arrivals else None,
            )
        if sandbox is not None:
            del sandbox.app.handle  # type: ignore[method-assign]
        if measured.returncode != expect:
            tail = "\n".join(measured.stderr.strip().splitlines()[-15:])
            raise RunFailed(
                f"`reconcile {' '.join(args)}` exited {measured.returncode}, "
                f"expected {expect}; stderr ends with:\n{tail}"
            )
        return measured


# -- realistic invites ---------------------------------------------------------

# (business name stem, legal suffix, ASCII mail domain, region)
BUSINESSES = [
    ("Müller & Söhne", "GmbH", "mueller-soehne", "emea"),
    ("Société Générale de Café", "SARL", "cafe-sarl", "emea"),
    ("Ørsted Vind", "ApS", "orsted-vind", "emea"),
    ("Łódzkie Zakłady Włókiennicze", "Sp. z o.o.", "lzw", "emea"),
    ("Zürcher Treuhand", "AG", "zuercher-treuhand", "emea"),
    ("Κρήτη Ναυτιλιακή", "Α.Ε.", "kriti-naftiliaki", "emea"),
    ("Московские Платёжные Системы", "ООО", "mps", "emea"),
    ("İstanbul Ödeme Hizmetleri", "A.Ş.", "istanbul-odeme", "emea"),
    ("דלתא סחר", "בע״מ", "delta-trade", "emea"),
    ("دبي للتجارة العامة", "ذ.م.م", "dubai-trading", "emea"),
    ("Acme Holdings", "Ltd", "acme", "emea"),
    ("株式会社サクラ商事", "", "sakura-shoji", "apac"),
    ("서울 핀테크", "주식회사", "seoul-fintech", "apac"),
    ("深圳前海支付", "有限公司", "qianhai-pay", "apac"),
    ("Công ty Thương mại Việt Nam", "TNHH", "vn-trade", "apac"),
    ("ธนาคารกรุงเทพ การค้า", "จำกัด", "krungthep-trade", "apac"),
    ("Kiwi Ledger", "Ltd", "kiwiledger", "apac"),
    ("मुंबई पेमेंट्स", "प्रा. लि.", "mumbai-payments", "apac"),
    ("Nuñez Exportaciones", "S.A.", "nunez", "latam"),
    ("São Paulo Pagamentos", "Ltda.", "sp-pagamentos", "latam"),
    ("Café Bogotá Comercial", "S.A.S.", "cafe-bogota", "latam"),
    ("Northwind Traders", "Inc.", "northwind", "na"),
    ("Québec Paiements", "Inc.", "quebec-paiements", "na"),
]
CONTACTS = [
    "José Nuñez",
    "Jane Doe",
    "Zoë Ångström",
    "Łukasz Wiśniewski",
    "Søren Kierkegård",
    "Γιώργος Παπαδόπουλος",
    "Анна Кузнецова",
    "山田 太郎",
    "김민준",
    "Nguyễn Văn An",
    "Ahmed Al-Farsi",
    "François Dubois",
    "María José García",
    "O'Connor Siobhán",
]
COUNTRY_CODES = {"emea": ["44", "49", "33", "45", "48"], "apac": ["81", "82", "65", "64"]}
COUNTRY_CODES |= {"latam": ["55", "52", "57"], "na": ["1"]}
GROUPS = ["enterprise", "mid-market", "smb", "fintech", "marketplace", "priority"]
ADD_ONS = ["edd", "sanctions-plus", "pep-screening", "adverse-media", "ubo-deep-check"]
ATTACHMENTS = [
    "certificate-of-incorporation",
    "proof-of-address",
    "ubo-declaration",
    "bank-statement",
    "articles-of-association",
]
_PLAIN_SAFE = re.compile(r"[^\s\-?:,\[\]{}#&*!|>'\"%@`][^#:]*")


def _phone(rng: random.Random, region: str) -> str:
    code = rng.choice(COUNTRY_CODES[region])
    return "+" + code + "".join(rng.choice("0123456789") for _ in range(10 - len(code) + 1))


def make_invite(index: int, rng: random.Random) -> dict[str, Any]:
    """One desired invite; every field is used, the optional ones by most invites."""
    stem, suffix, domain, region = rng.choice(BUSINESSES)
    name = f"{stem} {suffix}".strip() + f" №{index}"
    invite: dict[str, Any] = {
        "id": f"inv_{index:06d}",
        "name": name,
        "email": f"kyb+{index}@{domain}.example",
    }
    if rng.random() < 0.8:
        invite["phone"] = _phone(rng, region)
    if rng.random() < 0.7:
        person = rng.choice(CONTACTS)
        contact = {"name": person, "email": f"contact{index}@{domain}.example"}
        if rng.random() < 0.6:
            contact["phone"] = _phone(rng, region)
        invite["primaryContact"] = contact
    invite["groups"] = [region, *rng.sample(GROUPS, rng.randint(0, 2))]
    if rng.random() < 0.6:
        invite["addOns"] = rng.sample(ADD_ONS, rng.randint(1, 2))
    if rng.random() < 0.7:
        invite["attachments"] = rng.sample(ATTACHMENTS, rng.randint(1, 3))
    return invite


def _scalar(text: str) -> str:
    """Plain when YAML reads it back as the same string, else double-quoted."""
    if _PLAIN_SAFE.fullmatch(text) and text == text.strip():
        return text
    return json.dumps(text, ensure_ascii=False)


def invite_yaml(invite: dict[str, Any], rng: random.Random) -> str:
    """The invite as a person writes it: flow lists for short sets, quoted phones."""
    lines = [f"  - id: {invite['id']}", f"    name: {_scalar(invite['name'])}"]
    lines.append(f"    email: {invite['email']}")
    if "phone" in invite:
        lines.append(f'    phone: "{invite["phone"]}"')
    if "primaryContact" in invite:
        contact = invite["primaryContact"]
        lines.append("    primaryContact:")
        lines.append(f"      name: {_scalar(contact['name'])}")
        lines.append(f"      email: {contact['email']}")
        if "phone" in contact:
            lines.append(f'      phone: "{contact["phone"]}"')
    for key in ("groups", "addOns", "attachments"):
        if key not in invite:
            continue
        items = invite[key]
        if len(items) <= 2 or rng.random() < 0.5:
            lines.append(f"    {key}: [{', '.join(items)}]")
        else:
            lines.append(f"    {key}:")
            lines.extend(f"      - {item}" for item in items)
    return "\n".join(lines) + "\n"


def write_invite_files(root: Path, invites: list[dict[str, Any]], rng: random.Random) -> int:
    """Write the invites into several files under ``root``, one folder per region."""
    by_region: dict[str, list[dict[str, Any]]] = {}
    for invite in invites:
        by_region.setdefault(invite["groups"][0], []).append(invite)
    per_file = 250
    files = 0
    for region, members in by_region.items():
        for start in range(0, len(members), per_file):
            chunk = members[start : start + per_file]
            path = root / region / f"invites-{start // per_file + 1:03d}.yaml"
            path.parent.mkdir(parents=True, exist_ok=True)
            header = (
                "# yaml-language-server: $schema=../../schemas/invites.schema.json\n"
                f"# Business invites in {region.upper()}, generated for a benchmark\n"
            )
            body = "\n".join(invite_yaml(invite, rng) for invite in chunk)
            path.write_text(header + "invites:\n" + body, encoding="utf-8")
            files += 1
    return files


def server_copy(invite: dict[str, Any], rng: random.Random) -> dict[str, Any]:
    """The platform's copy of an unchanged invite, with a few fields the YAML leaves out."""
    current = json.loads(json.dumps(invite))
    current["status"] = "pending"
    if "phone" not in current:
        current["phone"] = _phone(rng, invite["groups"][0])  # unmanaged: never compared
    return current


def drift(current: dict[str, Any], kind: int) -> None:
    """Make the server's copy differ from the YAML in one of three ways."""
    if kind % 3 == 0:
        current["email"] = current["email"].replace("kyb+", "onboarding+")
    elif kind % 3 == 1:
        current["groups"] = [*current["groups"][1:], "legacy"]
    elif "primaryContact" in current:
        current["primaryContact"]["name"] += " (old)"
    else:
        current["name"] += " (formerly)"


@dataclass
class Dataset:
    root: Path  # the invite files
    desired: list[dict[str, Any]]
    server: list[dict[str, Any]]
    changed: set[str]
    files: int


def make_dataset(root: Path, count: int, changed: int, seed: int = SEED) -> Dataset:
    rng = random.Random(seed)
    desired = [make_invite(i + 1, rng) for i in range(count)]
    files = write_invite_files(root, desired, rng)
    server = [server_copy(invite, rng) for invite in desired]
    changed_ids = set()
    for kind, index in enumerate(sorted(rng.sample(range(count), changed))):
        drift(server[index], kind)
        changed_ids.add(server[index]["id"])
    return Dataset(root, desired, server, changed_ids, files)


# -- the table -------------------------------------------------------------------


@dataclass
class Row:
    scenario: str
    figure: str
    value: str
    target: str = ""
    ok: bool | None = None  # None: a figure with no target
    failed: bool = False  # the run itself failed: no figure

    @property
    def result(self) -> str:
        if self.failed:
            return "FAILED"
        return "" if self.ok is None else ("pass" if self.ok else "MISSED")


@dataclass
class Outcome:
    rows: list[Row] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def add(self, *args: Any, **kwargs: Any) -> None:
        self.rows.append(Row(*args, **kwargs))


def print_table(rows: Iterable[Row]) -> None:
    cells = [[r.scenario, r.figure, r.value, r.target, r.result] for r in rows]
    titles = ["scenario", "figure", "value", "target", "result"]
    widths = [max(len(c[i]) for c in [titles, *cells]) for i in range(5)]

    def line(values: list[str]) -> str:
        return "| " + " | ".join(v.ljust(w) for v, w in zip(values, widths, strict=True)) + " |"

    print(line(titles))
    print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for values in cells:
        print(line(values))


# -- scenarios -------------------------------------------------------------------


@dataclass
class Sizes:
    plan_latency: int = 1000
    latency: float = 0.050
    apply_total: int = 600
    apply_changed: int = 200
    rate_limit: float = 100.0
    plan_cpu: int = 3000
    plan_memory: int = 20000
    plan_drift: float = 0.05  # share of invites that differ in the plan scenarios


QUICK = Sizes(plan_latency=160, apply_total=150, apply_changed=50, plan_cpu=500, plan_memory=2000)


def _plan_summary(measured: Measured) -> dict[str, int]:
    text = measured.stdout
    try:
        # Skip anything a profiler printed before the document.
        document, _ = json.JSONDecoder().raw_decode(text[text.index("{") :])
        return dict(document["summary"])
    except (ValueError, KeyError, TypeError) as exc:
        raise RunFailed(f"plan --format json printed no readable summary: {exc}") from None


def _run_plan(
    runner: Runner,
    label: str,
    work: Path,
    count: int,
    sizes: Sizes,
    options: SandboxOptions,
    extra: list[str] | None = None,
) -> tuple[Measured, Sandbox]:
    changed = round(count * sizes.plan_drift)
    data = make_dataset(work / label, count, changed)
    args = ["plan", "--format", "json", *(extra or []), str(data.root)]

    def once() -> tuple[Measured, Sandbox]:
        with Sandbox(data.server, options=options) as sandbox:
            measured = runner.run(label, args, sandbox, work)
        summary = _plan_summary(measured)
        expected = {"update": changed, "unchanged": count - changed, "error": 0}
        if summary != expected:
            raise RunFailed(f"{label}: plan summary {summary}, expected {expected}")
        gets = len(sandbox.stats.calls("GET"))
        if gets != count:
            raise RunFailed(f"{label}: the sandbox answered {gets} GETs, expected {count}")
        return measured, sandbox

    return runner.best(once)


def _describe(label: str, measured: Measured, sandbox: Sandbox) -> str:
    statuses = dict(sorted(sandbox.stats.statuses.items()))
    return (
        f"{label}: wall {measured.wall:.2f}s, client CPU {measured.cpu:.2f}s "
        f"(user {measured.user:.2f} + sys {measured.system:.2f}), peak RSS "
        f"{measured.maxrss_mib:.1f} MiB; sandbox: {sandbox.stats.total} requests {statuses}, "
        f"max {sandbox.stats.max_in_flight} in flight, {measured.server_cpu:.2f}s CPU; "
        f"load average {measured.load:.2f} at the start; {measured.phases()}"
    )


def scenario_startup(runner: Runner, work: Path, sizes: Sizes) -> Outcome:
    """Context for the others: what starting the CLI costs before any work."""
    outcome = Outcome()
    runs = [runner.run("startup", ["--version"], None, work) for _ in range(3)]
    best = min(runs, key=lambda m: m.wall)
    outcome.add("0 start-up", "`reconcile --version` wall (best of 3)", f"{best.wall:.3f} s")
    outcome.add("0 start-up", "its CPU / peak RSS", f"{best.cpu:.3f} s / {best.maxrss_mib:.1f} MiB")
    return outcome


def scenario_plan_latency(runner: Runner, work: Path, sizes: Sizes) -> Outcome:
    outcome = Outcome()
    n, latency = sizes.plan_latency, sizes.latency
    name = f"a plan {n} @ {latency * 1000:.0f} ms"
    options = SandboxOptions(latency=latency, seed=SEED)
    parallel, sandbox = _run_plan(runner, "plan-latency-p16", work, n, sizes, options)
    outcome.notes.append(_describe(f"{name}, parallelism 16", parallel, sandbox))
    floor = n * latency / DEFAULT_PARALLELISM
    ratio = parallel.wall / floor
    outcome.add(name, "wall, default parallelism 16", f"{parallel.wall:.2f} s")
    outcome.add(name, "  ratio to floor N×latency/16", f"{ratio:.2f}× ({floor:.2f} s)", "≤ 1.3×")
    outcome.rows[-1].ok = ratio <= 1.3
    outcome.add(name, "  max requests in flight", str(sandbox.stats.max_in_flight))
    if parallel.first_request is not None:
        outcome.add(name, "  before the first request", f"{parallel.first_request:.2f} s")
    serial, sandbox = _run_plan(
        runner, "plan-latency-p1", work, n, sizes, options, ["--parallelism", "1"]
    )
    outcome.notes.append(_describe(f"{name}, parallelism 1", serial, sandbox))
    serial_floor = n * latency
    outcome.add(name, "wall, --parallelism 1 (serial)", f"{serial.wall:.2f} s")
    outcome.add(
        name,
        "  ratio to floor N×latency/1",
        f"{serial.wall / serial_floor:.2f}× ({serial_floor:.2f} s)",
    )
    outcome.add(name, "speed-up of parallelism 16", f"{serial.wall / parallel.wall:.1f}×")
    return outcome


def scenario_apply_rate_limit(runner: Runner, work: Path, sizes: Sizes) -> Outcome:
    outcome = Outcome()
    n, changed, limit = sizes.apply_total, sizes.apply_changed, sizes.rate_limit
    name = f"b apply {n} ({changed} differ) @ {limit:g} req/s"
    data = make_dataset(work / "apply-rate-limit", n, changed)
    args = ["apply", "--auto-approve", str(data.root)]

    def once() -> tuple[Measured, Sandbox]:
        # A fresh sandbox each time: apply changes its state.
        options = SandboxOptions(rate_limit=limit, seed=SEED)
        with Sandbox(data.server, options=options) as sandbox:
            measured = runner.run("apply-rate-limit", args, sandbox, work)
        # Correctness: every invite now matches its YAML; only the changed ones were written.
        state = sandbox.store.snapshot()
        wrong = [d["id"] for d in data.desired if compare_invite(_fields(d), state[d["id"]])]
        if wrong:
            raise RunFailed(f"{name}: after apply {len(wrong)} invites still differ: {wrong[:5]}")
        patched = {
            r.path.rsplit("/", 1)[-1] for r in sandbox.stats.calls("PATCH") if r.status == 200
        }
        if patched != data.changed:
            raise RunFailed(
                f"{name}: PATCHed {len(patched)} invites, expected the {changed} that differ"
            )
        return measured, sandbox

    measured, sandbox = runner.best(once)
    outcome.notes.append(_describe(name, measured, sandbox))

    needed = n + changed + 1  # GETs, PATCHes, one token request
    floor = needed / limit
    ratio = measured.wall / floor
    total = sandbox.stats.total
    refused = sandbox.stats.statuses[429]
    share = refused / total if total else 0.0
    outcome.add(name, "wall", f"{measured.wall:.2f} s")
    outcome.add(name, f"  ratio to floor {needed}/{limit:g}", f"{ratio:.2f}× ({floor:.2f} s)")
    outcome.rows[-1].target, outcome.rows[-1].ok = "≤ 1.2×", ratio <= 1.2
    outcome.add(name, "requests answered 429", f"{share:.1%} ({refused} of {total})", "< 5%")
    outcome.rows[-1].ok = share < 0.05
    outcome.add(name, "server state after apply", f"all {n} match; {changed} PATCHed", ok=True)
    outcome.rows[-1].target = "correct"
    return outcome


def _fields(invite: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in invite.items() if k != "id"}


def scenario_plan_cpu(runner: Runner, work: Path, sizes: Sizes) -> Outcome:
    outcome = Outcome()
    n = sizes.plan_cpu
    name = f"c plan {n} @ 0 ms"
    measured, sandbox = _run_plan(runner, "plan-cpu", work, n, sizes, SandboxOptions(seed=SEED))
    outcome.notes.append(_describe(name, measured, sandbox))
    per_invite = measured.cpu / n * 1000
    outcome.add(name, "client CPU per invite (user+sys)", f"{per_invite:.2f} ms", "≤ 1 ms")
    outcome.rows[-1].ok = per_invite <= 1.0
    outcome.add(name, "  client CPU total / wall", f"{measured.cpu:.2f} s / {measured.wall:.2f} s")
    return outcome


def scenario_plan_memory(runner: Runner, work: Path, sizes: Sizes) -> Outcome:
    outcome = Outcome()
    n = sizes.plan_memory
    name = f"d plan {n} @ 0 ms"
    measured, sandbox = _run_plan(runner, "plan-memory", work, n, sizes, SandboxOptions(seed=SEED))
    outcome.notes.append(_describe(name, measured, sandbox))
    rss = measured.maxrss_mib
    decimal = measured.maxrss_kib * 1024 / 1e6
    outcome.add(name, "peak RSS of reconcile", f"{rss:.1f} MiB ({decimal:.1f} MB)", "≤ 150 MB")
    outcome.rows[-1].ok = decimal <= 150.0
    outcome.add(name, "wall", f"{measured.wall:.2f} s")
    outcome.add(name, "  client CPU per invite", f"{measured.cpu / n * 1000:.2f} ms")
    return outcome


Scenario = Callable[[Runner, Path, Sizes], Outcome]
SCENARIOS: dict[str, tuple[str, Scenario]] = {
    "startup": ("0", scenario_startup),
    "plan-latency": ("a", scenario_plan_latency),
    "apply-rate-limit": ("b", scenario_apply_rate_limit),
    "plan-cpu": ("c", scenario_plan_cpu),
    "plan-memory": ("d", scenario_plan_memory),
}


def _selected(only: list[str]) -> list[str]:
    if not only:
        return list(SCENARIOS)
    by_letter = {letter: name for name, (letter, _) in SCENARIOS.items()}
    chosen = []
    for item in (part.strip() for value in only for part in value.split(",")):
        name = by_letter.get(item, item)
        if name not in SCENARIOS:
            names = ", ".join(f"{n} ({letter})" for n, (letter, _) in SCENARIOS.items())
            raise SystemExit(f"unknown scenario {item!r}; choose from {names}")
        chosen.append(name)
    return list(dict.fromkeys(chosen))


# -- py-spy profiles -------------------------------------------------------------

# The first category, in this order, with a marker in any frame of a stack names it.
_CATEGORIES = [
    ("imports (start-up)", ("<frozen importlib",)),
    ("schema validation", ("reconciler/schema.py", "/jsonschema/", "/referencing/")),
    ("YAML loading (and building invites)", ("yaml_source.py", "/yaml/", "reconciler/desired.py")),
    ("compare (deepdiff)", ("reconciler/compare.py", "/deepdiff/", "/orderly_set/")),
    ("HTTP (requests/urllib3/http.client)", ("reconciler/api/", "/requests/", "/urllib3/")),
    ("rendering the output", ("reconciler/render/", "json/encoder")),
    ("thread pool, queues, waits", ("reconciler/concurrency.py", "concurrent/futures", "thread")),
]
_FRAME = re.compile(r"^(?P<func>.*) \((?P<file>.*):(?P<line>\d+)\)$")


def summarize_profile(path: Path, top: int = 10) -> str:
    """Self time per function and time per category, from py-spy's raw (collapsed) output."""
    self_time: collections.Counter[str] = collections.Counter()
    categories: collections.Counter[str] = collections.Counter()
    threads: collections.Counter[str] = collections.Counter()
    total = 0
    for raw in path.read_text(encoding="utf-8", errors="replace").splitlines():
        stack, _, count_text = raw.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        count = int(count_text)
        parts = stack.split(";")
        thread = next((p for p in parts if p.startswith("thread ")), "")
        frames = [f for f in parts if not f.startswith(("process ", "thread "))]
        if not frames:
            continue
        total += count
        threads["main thread" if "MainThread" in thread else "worker threads"] += count
        match = _FRAME.match(frames[-1])
        leaf = f"{match['func']} ({_short(match['file'])}:{match['line']})" if match else frames[-1]
        self_time[leaf] += count
        categories[_category(frames)] += count
    if not total:
        return f"{path}: no samples"
    split = ", ".join(f"{name} {n / total:.0%}" for name, n in threads.most_common())
    lines = [f"{path.name}: {total} samples holding the GIL ({split})"]
    lines.append("  top functions by self time:")
    lines += [f"    {n / total:6.1%}  {name}" for name, n in self_time.most_common(top)]
    lines.append("  where the time goes:")
    lines += [f"    {n / total:6.1%}  {name}" for name, n in categories.most_common()]
    return "\n".join(lines)


def _short(file: str) -> str:
    for marker in ("site-packages/", "/lib/python3", "/work/main/"):
        if marker in file:
            return file.split(marker, 1)[1]
    return file


def _category(frames: list[str]) -> str:
    for name, markers in _CATEGORIES:
        if any(marker in frame for frame in frames for marker in markers):
            return name
    return "other (click, reconciler, stdlib)"


# -- main ------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--only",
        action="append",
        default=[],
        metavar="NAME",
        help="a scenario by name or letter (repeatable, or comma-separated): "
        + ", ".join(f"{n} ({letter})" for n, (letter, _) in SCENARIOS.items()),
    )
    parser.add_argument("--quick", action="store_true", help="smaller sizes: a smoke run")
    parser.add_argument(
        "--profile",
        type=Path,
        metavar="DIR",
        help="run the CLI under py-spy (or cProfile) and write profiles to DIR; "
        "the figures are then slowed by the profiler",
    )
    parser.add_argument(
        "--repeat",
        type=int,
        default=1,
        metavar="N",
        help="run each measurement N times and keep the fastest (for a busy machine)",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="show each command run")
    options = parser.parse_args(argv)
    sizes = QUICK if options.quick else Sizes()
    runner = Runner(profile_dir=options.profile, verbose=options.verbose, repeat=options.repeat)

    print(
        f"invite-reconciler benchmarks: {dt.date.today().isoformat()}, "
        f"{os.cpu_count()} cores, Python {platform.python_version()} "
        f"({platform.python_implementation()}), {platform.system()} {platform.machine()}"
    )
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"CLI: {' '.join(runner.command('x')[:1])} at commit {_code_version()}")
    print(f"Load average at the start: {load} (other work on the machine slows the runs)")
    if runner.repeat > 1:
        print(f"Each measurement: the fastest of {runner.repeat} runs.")
    if options.quick:
        print("QUICK run: reduced sizes; the targets are set for the full sizes.")
    if options.profile:
        print(f"PROFILED run: profiles go to {options.profile}; the figures are not comparable.")
    rows: list[Row] = []
    notes: list[str] = []
    failures: list[str] = []
    with tempfile.TemporaryDirectory(prefix="reconcile-bench-") as tmp:
        for name in _selected(options.only):
            letter, scenario = SCENARIOS[name]
            print(f"running {letter}) {name} ...", file=sys.stderr, flush=True)
            started = time.perf_counter()
            try:
                outcome = scenario(runner, Path(tmp), sizes)
            except RunFailed as exc:
                failures.append(f"{name}: {exc}")
                rows.append(Row(f"{letter} {name}", "run", "-", failed=True))
                print(f"  FAILED: {exc}", file=sys.stderr, flush=True)
                continue
            rows.extend(outcome.rows)
            notes.extend(outcome.notes)
            print(f"  done in {time.perf_counter() - started:.1f}s", file=sys.stderr, flush=True)

    print()
    print_table(rows)
    print()
    for note in notes:
        print(f"- {note}")
    missed = [r for r in rows if r.ok is False]
    if missed:
        print()
        for row in missed:
            print(
                f"MISSED: {row.scenario}: {row.figure.strip()} = {row.value} (target {row.target})"
            )
    if options.profile:
        for profile in sorted(options.profile.glob("*.collapsed")):
            print()
            print(summarize_profile(profile))
    if failures:
        print()
        for failure in failures:
            print(f"RUN FAILED: {failure}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
