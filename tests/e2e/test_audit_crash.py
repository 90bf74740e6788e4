"""`kill -9` during apply: every write the server received is in the audit log.

The real `reconcile apply` runs against a sandbox whose answers are slow, and is
killed with SIGKILL while writes are in flight. The sandbox finishes those
writes after the client is gone, as a real server would. Each write it received
must have its `attempt` line; an attempt with no outcome is how the log says
"may have happened"; every line stays valid JSON, and the next run's records
are readable too.
"""

from __future__ import annotations

import json
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from support.cli import run_cli
from support.helpers import RECONCILE, sandbox_env
from support.invites import ACME, desired_entry, write_invites

from reconciler.sandbox import Sandbox

pytestmark = pytest.mark.e2e

INVITES_PREFIX = "/public-api/v1/kyb/invites/"
NAMES = ["Société Générale", "Müller & Söhne GmbH", "株式会社サクラ商事", "Ørsted Ventures"]


def server_invites(count: int) -> list[dict[str, Any]]:
    return [
        dict(ACME, id=f"inv_{i:04d}", name=f"{NAMES[i % len(NAMES)]} {i}") for i in range(count)
    ]


def received_writes(sandbox: Sandbox) -> list[tuple[str, str]]:
    """(operation, invite id) of each write the sandbox received, answered or not."""
    writes = []
    for request in sandbox.stats.requests:
        if not request.path.startswith(INVITES_PREFIX):
            continue
        invite_id, _, action = request.path[len(INVITES_PREFIX) :].partition("/")
        if request.method == "PATCH":
            writes.append(("update", invite_id))
        elif request.method == "POST" and action == "resend":
            writes.append(("resend", invite_id))
    return writes


def wait_for(condition: Callable[[], bool], timeout: float = 30) -> bool:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.005)
    return True


def read_log(path: Path) -> list[dict[str, Any]]:
    lines = path.read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines]  # each line parses, or the test fails here


def test_kill_9_during_apply_leaves_an_attempt_line_for_every_write_received(
    start_sandbox: Callable[..., Sandbox], tmp_path: Path
) -> None:
    state = server_invites(24)
    # Uneven answer times, so that updates and re-sends are in flight together (and a
    # slow answer, 0.2 s, outlasts the moment the kill takes).
    sandbox = start_sandbox(state, latency=0.08, slow_rate=0.5, slow_seconds=0.12, seed=11)
    entries = [
        desired_entry(s, email=f"kyb{i}@acme.example", resendOnChange=True)
        for i, s in enumerate(state)
    ]
    write_invites(tmp_path / "invites", entries)
    command = [*RECONCILE, "apply", "--auto-approve", "--parallelism", "6"]
    apply = subprocess.Popen(
        [*command, "--audit-log", "audit.jsonl", "invites"],
        cwd=tmp_path,
        env=sandbox_env(sandbox),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    # One POST is the token; three more are re-sends, the last of them just arrived.
    arrived = wait_for(lambda: sandbox.stats.started["POST"] >= 4)
    apply.send_signal(signal.SIGKILL)
    apply.wait(timeout=30)
    assert arrived, "apply never got as far as re-sending: test is void"
    # The sandbox carries out what it had received, with nobody left to hear the answer.
    assert wait_for(lambda: sandbox.stats.in_flight == 0, timeout=10)

    log = read_log(tmp_path / "audit.jsonl")
    attempts = {(r["operation"], r["invite_id"]) for r in log if r["record"] == "attempt"}
    answered = {r["attempt_id"] for r in log if r["record"] == "outcome"}
    unanswered = {
        (r["operation"], r["invite_id"])
        for r in log
        if r["record"] == "attempt" and r["attempt_id"] not in answered
    }
    writes = received_writes(sandbox)
    assert len(writes) < 2 * len(state), "apply finished before the kill: test is void"
    missing = [write for write in writes if write not in attempts]
    assert not missing, f"the server received writes the audit log does not mention: {missing}"
    # The kill caught writes in flight, which the server then carried out: the log shows
    # them as attempts with no outcome, "may have happened", never as nothing at all.
    in_flight = unanswered & set(writes)
    assert in_flight, f"no write was in flight at the kill: test is void ({unanswered})"
    assert all(sandbox.store.resends[i] == 1 for op, i in in_flight if op == "resend")

    # The next run (in this process: no kill this time) appends to the same log, and
    # every line of it still parses.
    sandbox.app.options.latency = sandbox.app.options.slow_rate = 0.0
    again = run_cli(*command[len(RECONCILE) :], "--audit-log", "audit.jsonl", "invites",
                    cwd=tmp_path, env=sandbox_env(sandbox))  # fmt: skip
    assert again.returncode == 0, again.stdout + again.stderr
    after = read_log(tmp_path / "audit.jsonl")
    assert after[: len(log)] == log
    assert {r["record"] for r in after[len(log) :]} == {"attempt", "outcome"}
