"""Ctrl-C and SIGTERM during apply: no new write starts, in-flight ones finish."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from collections import Counter

import pytest
from support.helpers import RECONCILE, sandbox_env
from support.invites import ACME, acme_estate


def _start_apply(start_sandbox, tmp_path, count=40, write_seconds=0.2, parallelism=8):
    server = start_sandbox(acme_estate(tmp_path / "invites", count, count, name=None))
    store_update = server.store.update

    def slow_update(*args, **kwargs):  # the writes take their time; the reads do not
        time.sleep(write_seconds)
        return store_update(*args, **kwargs)

    server.store.update = slow_update
    args = ("apply", "--auto-approve", f"--parallelism={parallelism}", "--audit-log=audit.jsonl")
    env, pipe = sandbox_env(server), subprocess.PIPE
    proc = subprocess.Popen([*RECONCILE, *args], cwd=tmp_path, env=env, stdout=pipe, stderr=pipe)
    return server, proc


def _wait_until(condition, timeout=30):
    deadline = time.monotonic() + timeout
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.01)


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_first_interrupt_finishes_in_flight_writes_and_reports_exactly(
    start_sandbox, tmp_path, signum
):
    server, proc = _start_apply(start_sandbox, tmp_path)
    _wait_until(lambda: server.stats.calls("PATCH"))  # some writes done, more to come
    proc.send_signal(signum)
    stdout, stderr = (out.decode() for out in proc.communicate(timeout=60))
    assert proc.returncode == 1
    assert "Interrupted" in stderr and "Traceback" not in stderr
    updated = {line.split()[1] for line in stdout.splitlines() if line.startswith("updated")}
    not_started = {
        line.split()[2] for line in stdout.splitlines() if line.startswith("not started")
    }
    assert updated and not_started
    assert len(updated) + len(not_started) == 40
    assert f"Apply: {len(updated)} updated, 0 failed, {len(not_started)} not started." in stdout
    # What the output says is exactly what the server holds.
    snapshot = server.store.snapshot()
    changed = {i for i, invite in snapshot.items() if invite["email"] != ACME["email"]}
    assert changed == updated
    patched = {r.path.rsplit("/", 1)[-1] for r in server.stats.calls("PATCH")}
    assert patched == updated
    audit_lines = (tmp_path / "audit.jsonl").read_text(encoding="utf-8").splitlines()
    records = Counter(json.loads(line)["record"] for line in audit_lines)
    assert records == {"attempt": len(updated), "outcome": len(updated)}


def test_second_interrupt_quits_at_once(start_sandbox, tmp_path):
    # Slow writes, so the first interrupt leaves them in flight for a while.
    server, proc = _start_apply(start_sandbox, tmp_path, count=8, write_seconds=1.5)
    # Interrupt while the first writes are in flight (begun, not yet answered).
    _wait_until(lambda: server.stats.started["PATCH"] > 0)
    proc.send_signal(signal.SIGINT)
    # Signals that arrive together are delivered to Python once; a person's
    # second Ctrl-C comes a moment later.
    time.sleep(0.2)
    started = time.monotonic()
    proc.send_signal(signal.SIGINT)
    stderr = proc.communicate(timeout=10)[1].decode()
    assert time.monotonic() - started < 0.9  # did not wait for the writes in flight
    assert proc.returncode != 0
    assert (  # and says what that means
        "\nSecond interrupt: quitting now. Writes in flight may have completed; run "
        "`reconcile plan` to see where things stand, and look in the audit log for re-sends "
        'due and never attempted (README, "Reading the audit log").\n'
    ) in stderr
    assert "Traceback" not in stderr
