"""The command line of the benchmarks: pick scenarios, run them, print the table."""

from __future__ import annotations

import argparse
import compileall
import datetime as dt
import importlib.util
import os
import platform
import sys
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path

import reconciler
from benchmarks.measure import RunFailed, Runner, code_version
from benchmarks.profiles import summarize_profile
from benchmarks.scenarios import SCENARIOS
from benchmarks.scenarios.common import QUICK, Context, Sizes
from benchmarks.targets import Row, missed, table


def _arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks",
        description="Benchmarks of the real `reconcile` CLI against the in-process sandbox.",
    )
    names = ", ".join(f"{n} ({letter})" for n, (letter, _) in SCENARIOS.items())
    parser.add_argument(
        "--only",
        action="append",
        default=[],
        metavar="NAME",
        help=f"a scenario by name or letter (repeatable, or comma-separated): {names}",
    )
    parser.add_argument("--quick", action="store_true", help="smaller sizes: a smoke run")
    parser.add_argument(
        "--repeat",
        type=int,
        default=1,
        metavar="N",
        help="runs per figure in the scenarios that report a median (a, b, g, k, l)",
    )
    parser.add_argument(
        "--profile",
        type=Path,
        metavar="DIR",
        help="run the CLI under py-spy (or cProfile), profiles to DIR; figures then slowed",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="show each command run")
    return parser.parse_args(argv)


def _selected(only: list[str]) -> list[str]:
    if not only:
        return list(SCENARIOS)
    by_letter = {letter: name for name, (letter, _) in SCENARIOS.items()}
    chosen = []
    for item in (part.strip() for value in only for part in value.split(",")):
        name = by_letter.get(item, item)
        if name not in SCENARIOS:
            raise SystemExit(f"unknown scenario {item!r}; choose from {', '.join(SCENARIOS)}")
        chosen.append(name)
    return [name for name in SCENARIOS if name in chosen]  # in running order


def _header(runner: Runner, quick: bool, profile: Path | None) -> None:
    print(
        f"invite-reconciler benchmarks: {dt.date.today().isoformat()}, {os.cpu_count()} cores, "
        f"Python {platform.python_version()} ({platform.python_implementation()}), "
        f"{platform.system()} {platform.machine()}"
    )
    print(f"CLI: {runner.command('x')[0]} at commit {code_version()}")
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"Load average at the start: {load} (other work on the machine slows the runs)")
    print(f"Bytecode: {_compiled()}")
    if quick:
        print("QUICK run: reduced sizes; the targets are set for the full sizes.")
    if profile:
        print(f"PROFILED run: profiles go to {profile}; the figures are not comparable.")


def _compiled() -> str:
    """Compile the package's bytecode first, as `pip install` does: an editable install
    under PYTHONDONTWRITEBYTECODE (set on some machines) otherwise compiles every module
    it changed at each start of the CLI, which an installed `reconcile` never does."""
    package = Path(reconciler.__file__).parent
    stale = sum(
        1
        for source in package.rglob("*.py")
        if not Path(importlib.util.cache_from_source(str(source))).exists()
    )
    compileall.compile_dir(str(package), quiet=1)
    return (
        f"compiled before the runs, as pip install does ({stale} of the package's modules had none)"
    )


def _run_all(names: list[str], context: Context) -> tuple[list[Row], list[str]]:
    rows: list[Row] = []
    failures: list[str] = []
    for name in names:
        letter, scenario = SCENARIOS[name]
        print(f"running {letter}) {name} ...", file=sys.stderr, flush=True)
        started = time.monotonic()
        try:
            rows += scenario(context)
        except RunFailed as exc:
            failures.append(f"{name}: {exc}")
            rows.append(Row(f"{letter} {name}", "run", None, failed=True))
            print(f"  FAILED: {exc}", file=sys.stderr, flush=True)
            continue
        print(f"  done in {time.monotonic() - started:.1f}s", file=sys.stderr, flush=True)
    return rows, failures


def main(argv: list[str] | None = None) -> int:
    """0 when every run worked, even if a target was MISSED; 1 when a run itself failed."""
    options = _arguments(argv)
    runner = Runner(profile_dir=options.profile, verbose=options.verbose)
    _header(runner, options.quick, options.profile)
    sizes = QUICK if options.quick else Sizes()
    with tempfile.TemporaryDirectory(prefix="reconcile-bench-") as tmp:
        context = Context(runner, Path(tmp), sizes, repeat=max(1, options.repeat))
        rows, failures = _run_all(_selected(options.only), context)
    print()
    print(table(rows))
    print()
    for note in context.notes:
        print(f"- {note}")
    _print_block(missed(rows))
    if options.profile:
        _print_block(summarize_profile(p) for p in sorted(options.profile.glob("*.collapsed")))
    _print_block(f"RUN FAILED: {failure}" for failure in failures)
    return 1 if failures else 0


def _print_block(lines: Iterable[str]) -> None:
    text = "\n".join(lines)
    if text:
        print()
        print(text)
