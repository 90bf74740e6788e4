"""Summaries of py-spy's raw profiles (``--profile DIR``): self time per function, and
the share of each layer of the tool."""

from __future__ import annotations

import collections
import re
from pathlib import Path

from support.helpers import REPO

# The first category, in this order, with a marker in any frame of a stack names it.
_CATEGORIES = [
    ("imports (start-up)", ("<frozen importlib",)),
    ("schema validation", ("reconciler/schema/check.py", "/jsonschema/", "/referencing/")),
    (
        "YAML loading (and building invites)",
        ("reconciler/yamlload/", "/yaml/", "reconciler/desired/"),
    ),
    ("compare (DeepDiff over the canonical forms)", ("compare_invite (", "/deepdiff/")),
    ("HTTP (requests/urllib3/http.client)", ("reconciler/api/", "/requests/", "/urllib3/")),
    ("rendering the output", ("reconciler/output/", "json/encoder")),
    (
        "thread pool, queues, waits",
        ("reconciler/api/capacity/concurrency.py", "concurrent/futures", "thread"),
    ),
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
    for marker in ("site-packages/", "/lib/python3", f"{REPO}/"):
        if marker in file:
            return file.split(marker, 1)[1]
    return file


def _category(frames: list[str]) -> str:
    for name, markers in _CATEGORIES:
        if any(marker in frame for frame in frames for marker in markers):
            return name
    return "other (click, reconciler, stdlib)"
