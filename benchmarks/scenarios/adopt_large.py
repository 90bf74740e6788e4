"""d: `adopt` of one changed field in a 20,000-invite file, against a `plan` of that file.

The platform holds one invite with another e-mail. `adopt --target ID` reads that
invite, edits one value in the 6 MB file in place and reads the file back before
replacing it: its cost is the file's, not a round trip of every invite through a
YAML library. The full `adopt` reads every invite, as the plan does.
"""

from __future__ import annotations

from support.estate import SEED

from benchmarks.measure import RunFailed
from benchmarks.scenarios.common import Context, dataset, describe, run_plan
from benchmarks.targets import Row, Target
from reconciler.sandbox import Sandbox, SandboxOptions

# "Well under" the plan's time, checked by CPU: on a shared machine wall times move with
# the load (the one-read adopt waits on nothing but the CPU), and the plan's wall is
# mostly its CPU here too, as the sandbox answers at once.
RATIO = Target(0.25, "×")


def run(context: Context) -> list[Row]:
    n = context.sizes.large
    data = dataset(context, "adopt-single", n, "single", changed=1)
    (changed,) = data.changed
    path = data.root / "invites.yaml"
    original = path.read_text(encoding="utf-8")
    planned = run_plan(context, f"adopt-plan-{n}", data).measured
    name = f"d adopt 1 field of {n:,}, one file"
    rows = [
        Row(name, "plan of the file: wall", planned.wall, "s"),
        Row(name, "  client CPU", planned.cpu, "s"),
    ]
    for label, extra in (
        ("adopt --target ID", ("--target", changed)),
        ("adopt (every invite)", ()),
    ):
        path.write_text(original, encoding="utf-8")
        with Sandbox(data.server, options=SandboxOptions(seed=SEED)) as sandbox:
            args = ["adopt", *extra, str(data.root)]
            measured = context.runner.run(f"adopt-{len(extra)}-{n}", args, sandbox, context.work)
        edited = measured.stdout.splitlines()
        if len(edited) != 1 or changed not in edited[0] or " email: " not in edited[0]:
            raise RunFailed(f"{label}: expected one e-mail adopted for {changed}, got {edited}")
        after = path.read_text(encoding="utf-8").splitlines()
        before = original.splitlines()
        differing = [i for i, (a, b) in enumerate(zip(before, after, strict=True)) if a != b]
        if len(differing) != 1:
            raise RunFailed(f"{label}: {len(differing)} lines of the file changed, expected 1")
        target = RATIO if extra else None
        rows += [
            Row(name, f"{label}: wall", measured.wall, "s"),
            Row(name, "  ratio to the plan's wall", measured.wall / planned.wall, "×"),
            Row(name, "  client CPU", measured.cpu, "s"),
            Row(name, "  ratio to the plan's CPU", measured.cpu / planned.cpu, "×", target),
            Row(name, "  peak RSS", measured.peak_mb, "MB"),
        ]
        context.notes.append(describe(f"{name}, {label}", measured, sandbox))
    path.write_text(original, encoding="utf-8")
    return rows
