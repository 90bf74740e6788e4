"""Concurrency is real, bounded by parallelism and by what the rate keeps busy, output
order is stable, and a 429 pauses every worker."""

from __future__ import annotations

from support.cli import run_cli, run_cli_process
from support.helpers import sandbox_env
from support.invites import ACME, desired_entry, write_invites

# The in-flight bound that follows the rate is about the pace a run starts at: the real
# slow start (START_RATE), not the unpaced start of the other in-process runs
# (tests/conftest.py). The others are about parallelism and order; the 429 run is a
# child process, slow start and all.
SLOW_START = ("test_max_parallelism_bounds_the_default_and_the_run_says_where_it_settled",)


def _invites(count: int, changed_every: int = 2):
    state = [dict(ACME, id=f"inv_{i:04d}", name=f"Firma Nº{i} GmbH") for i in range(count)]
    entries = [
        desired_entry(s, email=f"new{i}@acme.example")
        if i % changed_every == 0
        else desired_entry(s)
        for i, s in enumerate(state)
    ]
    return state, entries


def test_requests_really_run_concurrently(start_sandbox, tmp_path):
    state, entries = _invites(48)
    server = start_sandbox(state, latency=0.05)
    write_invites(tmp_path / "invites", entries)
    result = run_cli("plan", "--parallelism", "8", cwd=tmp_path, env=sandbox_env(server))
    assert result.returncode == 0, result.stderr
    assert server.stats.max_in_flight >= 4  # 8 allowed; at least half seen at once
    serial = start_sandbox(state, latency=0.01)
    run_cli("plan", "--parallelism", "1", cwd=tmp_path, env=sandbox_env(serial))
    assert serial.stats.max_in_flight == 1


def test_parallelism_from_the_environment(start_sandbox, tmp_path):
    state, entries = _invites(12)
    server = start_sandbox(state, latency=0.05)
    write_invites(tmp_path / "invites", entries)
    env = sandbox_env(server, RECONCILER_PARALLELISM="2")
    assert run_cli("plan", cwd=tmp_path, env=env).returncode == 0
    assert server.stats.max_in_flight == 2


def test_max_parallelism_bounds_the_default_and_the_run_says_where_it_settled(
    start_sandbox, tmp_path
):
    state, entries = _invites(120)
    server = start_sandbox(state, latency=0.02)
    write_invites(tmp_path / "invites", entries)
    env = sandbox_env(server, RECONCILER_MAX_PARALLELISM="4")
    result = run_cli("plan", "-v", cwd=tmp_path, env=env)
    assert result.returncode == 0, result.stderr
    assert 2 <= server.stats.max_in_flight <= 4  # the cap holds; the rate fills it
    assert "requests in flight: settled at " in result.stderr
    assert "at most 4: as many as the allowed rate keeps busy" in result.stderr


def test_a_fixed_parallelism_is_reached(start_sandbox, tmp_path):
    state, entries = _invites(40)
    server = start_sandbox(state, latency=0.02)
    write_invites(tmp_path / "invites", entries)
    result = run_cli("plan", "-v", "--parallelism", "3", cwd=tmp_path, env=sandbox_env(server))
    assert result.returncode == 0, result.stderr
    assert server.stats.max_in_flight == 3


def test_output_order_is_file_order_whatever_order_answers_arrive_in(start_sandbox, tmp_path):
    state, entries = _invites(60)
    write_invites(tmp_path / "invites", entries[30:], name="b.yaml")
    write_invites(tmp_path / "invites", entries[:30], name="a.yaml")
    # A third of the answers are slow, so answers come back out of order.
    jumbled = start_sandbox(state, slow_rate=0.3, slow_seconds=0.05, seed=7)
    parallel = run_cli("plan", "--parallelism", "16", cwd=tmp_path, env=sandbox_env(jumbled))
    serial_server = start_sandbox(state)
    serial = run_cli("plan", "--parallelism", "1", cwd=tmp_path, env=sandbox_env(serial_server))
    assert parallel.returncode == serial.returncode == 0
    assert parallel.stdout == serial.stdout
    ids = [line.split()[1] for line in parallel.stdout.splitlines() if line.startswith("~ ")]
    assert ids == [e["id"] for e in entries if e["email"] != ACME["email"]]

    apply_jumbled = start_sandbox(state, slow_rate=0.3, slow_seconds=0.05, seed=3)
    applied = run_cli("apply", "--auto-approve", cwd=tmp_path, env=sandbox_env(apply_jumbled))
    updated = [
        line.split()[1] for line in applied.stdout.splitlines() if line.startswith("updated")
    ]
    assert updated == ids


def test_a_429_pauses_every_worker_for_retry_after(start_sandbox, tmp_path):
    # 60 reads: the first 429 comes at about the 39th request, well inside them; a
    # third of the invites to write, so the run after the pause is shorter.
    state, entries = _invites(60, changed_every=3)
    server = start_sandbox(state, rate_limit=30)
    write_invites(tmp_path / "invites", entries)
    # 16 workers, fixed: the bound on 429s below counts one per worker in flight.
    args = ("apply", "--auto-approve", "--parallelism", "16")
    # A process of its own: arrival times are the point, and in this process the
    # client's threads would hold the GIL the sandbox needs to note them.
    result = run_cli_process(*args, cwd=tmp_path, env=sandbox_env(server))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Apply: 20 updated, 0 failed." in result.stdout
    requests = sorted(server.stats.requests, key=lambda r: r.arrived)
    first_429 = next(r for r in requests if r.status == 429)
    # Requests already past the gate may still arrive just after the first 429
    # (a busy machine can delay one); then nothing until Retry-After (1 s) has
    # passed. Without the shared pause, retries would fill this second.
    quiet = [r for r in requests if first_429.arrived + 0.1 < r.arrived < first_429.arrived + 0.9]
    assert len(quiet) <= 2, quiet
    # And the run then paces itself: few 429s in all, far fewer than requests.
    assert server.stats.statuses[429] <= 16 + 3
    # 60 reads, and for each of the 20 writes its read right before it and the PATCH: once
    assert server.stats.statuses[200] == 100
