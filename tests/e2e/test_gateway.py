"""A real nginx with `limit_req` in front of the sandbox: every kind of limit
a gateway sets is ridden out, plan and apply converge at about the gateway's rate, the
run says it was slowed, and only a server refusing one request past retry_max_seconds
ends a run, with a clear message. Small runs at high rates: the big figures are in the
benchmarks (`python -m benchmarks --only g`)."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from support.cli import run_cli_process
from support.helpers import clean_env
from support.invites import acme_estate
from support.nginx import Gateway, Nginx

from reconciler.sandbox import Sandbox

# One worker runs the rate-limited gateways one after another (`.ci/run`: --dist loadgroup):
# beside each other on two cores, threads scheduled late send in bursts a limit refuses.
pytestmark = [pytest.mark.e2e, pytest.mark.real, pytest.mark.xdist_group("gateways")]

COUNT = 24  # invites: about one second of requests at 30 a second
CHANGED = 8
RATE = 30

SLOWED = re.compile(r"the server limits requests: slowed to about ([\d.]+) per second")


def _estate(tmp_path: Path) -> tuple[list[dict[str, object]], Path]:
    return acme_estate(tmp_path / "invites", COUNT, CHANGED), tmp_path / "invites"


def _run(nginx: Nginx, sandbox: Sandbox, *args: str, cwd: Path, timeout: float = 60):
    started = time.monotonic()
    result = run_cli_process(
        *args, env=clean_env(**nginx.client_env(sandbox)), cwd=cwd, timeout=timeout
    )
    return result, time.monotonic() - started


def _assert_clear(result, sandbox: Sandbox, nginx: Nginx, requests: int, rate: float) -> None:
    assert "Traceback" not in result.stderr, result.stderr
    assert result.returncode == 0, result.stdout + result.stderr
    slowed = SLOWED.search(result.stderr)
    assert slowed, f"the run did not say it was slowed:\n{result.stderr}"
    assert 0.4 * rate <= float(slowed.group(1)) <= 1.3 * rate, slowed.group(0)
    # Converged, not crawled: every request reached the server once, within the time
    # the requests take at the rate, slow start, and the pauses the server named (each
    # refusal's Retry-After), as the server saw them: the process's start-up, which a
    # loaded machine stretches, is no part of it.
    assert sandbox.stats.total == requests
    arrived = sandbox.stats.arrivals()
    span = arrived[-1] - arrived[0]
    named = nginx.refusals() * (nginx.gateway.retry_after or 0)
    assert span < requests / rate + 3 + named, (
        f"{span:.1f}s for {requests} requests at {rate}/s, {named} s of pauses named"
    )


LIMITS = {
    "no-burst-429": Gateway(rate=RATE),
    "no-burst-503": Gateway(rate=RATE, status=503),  # nginx's default refusal
    "no-burst-retry-after": Gateway(rate=RATE, retry_after=1),
    "burst-nodelay": Gateway(rate=RATE, burst=10),
}


@pytest.mark.parametrize("gateway", LIMITS.values(), ids=LIMITS.keys())
def test_plan_converges_behind_a_gateway_limit(
    start_sandbox: Callable[..., Sandbox],
    start_nginx: Callable[..., Nginx],
    tmp_path: Path,
    gateway: Gateway,
) -> None:
    state, invites = _estate(tmp_path)
    sandbox = start_sandbox(state)
    nginx = start_nginx(sandbox, gateway)

    result, _ = _run(nginx, sandbox, "plan", str(invites), cwd=tmp_path)

    _assert_clear(result, sandbox, nginx, COUNT + 1, RATE)
    assert f"Plan: {CHANGED} to update, {COUNT - CHANGED} unchanged, 0 errors." in result.stdout
    assert len(sandbox.stats.calls("GET")) == COUNT  # each invite read once, none lost
    assert nginx.refusals() <= 6, nginx.error_log()


@pytest.mark.parametrize("gateway", LIMITS.values(), ids=LIMITS.keys())
def test_apply_converges_behind_a_gateway_limit(
    start_sandbox: Callable[..., Sandbox],
    start_nginx: Callable[..., Nginx],
    tmp_path: Path,
    gateway: Gateway,
) -> None:
    state, invites = _estate(tmp_path)
    sandbox = start_sandbox(state)
    nginx = start_nginx(sandbox, gateway)

    result, _ = _run(nginx, sandbox, "apply", "--auto-approve", str(invites), cwd=tmp_path)

    _assert_clear(
        result, sandbox, nginx, COUNT + 2 * CHANGED + 1, RATE
    )  # each write: a GET, a PATCH
    patched = {r.path.rsplit("/", 1)[-1] for r in sandbox.stats.calls("PATCH") if r.status == 200}
    assert patched == {f"inv_{i:03d}" for i in range(CHANGED)}
    emails = {i["id"]: i["email"] for i in sandbox.store.snapshot().values()}
    assert all(emails[f"inv_{i:03d}"] == f"new{i}@acme.example" for i in range(CHANGED))


@pytest.mark.parametrize("command", [("plan",), ("apply", "--auto-approve")])
def test_a_server_refusing_one_request_past_its_budget_ends_the_run_clearly(
    start_sandbox: Callable[..., Sandbox],
    start_nginx: Callable[..., Nginx],
    tmp_path: Path,
    command: tuple[str, ...],
) -> None:
    # One request a minute: the token goes through, then every read is refused for
    # far longer than the 2 s the configuration allows one request to be refused.
    state, invites = _estate(tmp_path)
    (tmp_path / "reconciler.yaml").write_text("retry_max_seconds: 2\n", encoding="utf-8")
    sandbox = start_sandbox(state)
    nginx = start_nginx(sandbox, Gateway(rate=1 / 60))

    result, wall = _run(nginx, sandbox, *command, str(invites), cwd=tmp_path)

    assert "Traceback" not in result.stderr, result.stderr
    assert result.returncode == 1, result.stdout + result.stderr
    last = result.stderr.strip().splitlines()[-1]
    # nginx's own page, shown by its title.
    said = "error: stopped reading invites: HTTP 429: Too Many Requests (an HTML page"
    assert last.startswith(said), last
    assert "refused for all of retry_max_seconds" in last, last
    assert " 0 s" not in result.stderr  # never "no request may start for 0 s"
    assert wall < 20, f"took {wall:.1f}s to give up with retry_max_seconds: 2"
    assert not sandbox.stats.calls("PATCH")
