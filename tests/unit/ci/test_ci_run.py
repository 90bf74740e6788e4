""".ci/run tells its time truly (issue 39, row 8): every stage timed in its output, the
slowest tests listed, and the README's quick start is what it runs."""

from __future__ import annotations

import re
import subprocess

from support.helpers import REPO

CI_RUN = REPO / ".ci" / "run"


def test_every_stage_is_started_through_the_timer() -> None:
    text = CI_RUN.read_text(encoding="utf-8")
    stages = re.findall(r'^stage "([^"]+)"$', text, re.MULTILINE)
    assert len(stages) >= 8
    assert not re.search(r'^echo "== (?!all stages passed)', text, re.MULTILINE)
    assert re.search(r"^pytest --durations=10$", text, re.MULTILINE)
    # The real parts the README's `pytest` leaves out, in a stage of their own, after it.
    real = re.search(
        r'^stage "real parts: [^"]+"\n(?:#.*\n)*pytest -m real --dist loadgroup --durations=10$',
        text,
        re.M,
    )
    assert real and real.start() > text.index("\npytest --durations=10\n")


def test_the_timer_prints_each_stage_and_a_failed_one() -> None:
    text = CI_RUN.read_text(encoding="utf-8")
    timer = text[text.index("started=$SECONDS") : text.index('stage "')]
    script = timer + 'stage "one"\nstage "two"\nend_stage\nstage "three"\nfalse\n'
    done = subprocess.run(
        ["bash", "-c", "set -e\n" + script], capture_output=True, text=True, check=False
    )
    assert done.returncode == 1
    assert done.stdout.splitlines() == [
        "== one",
        "-- one: 0 s (total 0 s)",
        "== two",
        "-- two: 0 s (total 0 s)",
        "== three",
        "-- three: failed (exit 1) after 0 s",
    ]


def test_the_quick_start_is_what_ci_runs() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    quick = readme[readme.index("## Quick start") : readme.index("## Your first day")]
    assert 'pip install ".[test]" && pytest\n' in quick
    text = CI_RUN.read_text(encoding="utf-8")
    assert "\nreconcile plan --sandbox examples/invites >/dev/null\n" in text
    assert "pip install . && reconcile plan --sandbox examples/invites\n" in quick
