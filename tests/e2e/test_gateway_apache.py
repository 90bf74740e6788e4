"""A real Apache 2.4 with mod_evasive in front of the sandbox (issue 55): a burst blocker
that answers its own HTML 403 and keeps blocking while the client keeps sending. Plan,
apply and re-sends converge behind it, every invite read, each change written once and
each invitation sent once, counted at the sandbox; with --max-rate at its limit, no
403 at all. The figures (wall against requests / limit) are in the benchmarks
(`python -m benchmarks --only e`)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from support.apache import Apache, Evasive
from support.cli import run_cli_process
from support.helpers import clean_env
from support.invites import acme_estate

from reconciler.sandbox import Sandbox

# 10-60 s each: `pytest -m real`; run one after another with the other gateways (loadgroup).
pytestmark = [pytest.mark.e2e, pytest.mark.real, pytest.mark.xdist_group("gateways")]

# Smaller than the 200 invites (the benchmark's, scenario e): still well past
# the site count in the run's first second, so the gateway blocks it.
COUNT = 120
CHANGED = 36  # 30%
RESENT = 40
EVASIVE = {
    "site-50-block-5": Evasive(site_count=50, page_count=10, blocking_period=5),
    "site-20-block-10": Evasive(site_count=20, page_count=10, blocking_period=10),
}


def _estate(tmp_path: Path, changed: int, **change: Any) -> list[dict[str, Any]]:
    return acme_estate(tmp_path / "invites", COUNT, changed, **change)


def _run(apache: Apache, sandbox: Sandbox, *args: str, cwd: Path, ok: tuple[int, ...] = (0,)):
    env = clean_env(**apache.client_env(sandbox))
    result = run_cli_process(*args, "invites", env=env, cwd=cwd, timeout=120)
    assert "Traceback" not in result.stderr, result.stderr
    assert result.returncode in ok, result.stdout + result.stderr
    return result


def _reached(sandbox: Sandbox, method: str) -> Counter[str]:
    return Counter(call.path.rsplit("/", 1)[-1] for call in sandbox.stats.calls(method))


@pytest.mark.parametrize("evasive", EVASIVE.values(), ids=EVASIVE.keys())
def test_plan_converges_behind_mod_evasive(
    start_sandbox: Callable[..., Sandbox],
    start_apache: Callable[..., Apache],
    tmp_path: Path,
    evasive: Evasive,
) -> None:
    state = _estate(tmp_path, CHANGED)
    sandbox = start_sandbox(state)
    apache = start_apache(sandbox, evasive)

    result = _run(apache, sandbox, "plan", cwd=tmp_path, ok=(0, 2))

    assert f"Plan: {CHANGED} to update, {COUNT - CHANGED} unchanged, 0 errors." in result.stdout
    reads = _reached(sandbox, "GET")
    assert set(reads) == {s["id"] for s in state} and set(reads.values()) == {1}
    # Blocked (the path under test), once or twice while the rate is found, each time a
    # few refusals: those in flight, and a probe or two.
    assert 1 <= apache.refusals() < 20, apache.refusals()


@pytest.mark.parametrize("evasive", EVASIVE.values(), ids=EVASIVE.keys())
def test_apply_behind_mod_evasive_writes_each_change_once(
    start_sandbox: Callable[..., Sandbox],
    start_apache: Callable[..., Apache],
    tmp_path: Path,
    evasive: Evasive,
) -> None:
    state = _estate(tmp_path, CHANGED)
    sandbox = start_sandbox(state)
    apache = start_apache(sandbox, evasive)

    _run(apache, sandbox, "apply", "--auto-approve", cwd=tmp_path)

    assert _reached(sandbox, "PATCH") == {f"inv_{i:03d}": 1 for i in range(CHANGED)}
    emails = {i["id"]: i["email"] for i in sandbox.store.snapshot().values()}
    assert all(emails[f"inv_{i:03d}"] == f"new{i}@acme.example" for i in range(CHANGED))


@pytest.mark.parametrize("evasive", EVASIVE.values(), ids=EVASIVE.keys())
def test_re_sends_behind_mod_evasive_each_go_exactly_once(
    start_sandbox: Callable[..., Sandbox],
    start_apache: Callable[..., Apache],
    tmp_path: Path,
    evasive: Evasive,
) -> None:
    # E-mail changes with resendOnChange: a PATCH and a re-send each. A re-send the
    # gateway refused with its own 403 never reached the platform: it is made later in
    # the same run, not left owed, and never twice.
    changed = RESENT
    state = _estate(tmp_path, changed, resendOnChange=True)
    sandbox = start_sandbox(state)
    apache = start_apache(sandbox, evasive)

    result = _run(apache, sandbox, "apply", "--auto-approve", cwd=tmp_path)

    assert "re-send owed" not in result.stdout + result.stderr
    assert dict(sandbox.store.resends) == {f"inv_{i:03d}": 1 for i in range(changed)}
    assert _reached(sandbox, "PATCH") == {f"inv_{i:03d}": 1 for i in range(changed)}


@pytest.mark.parametrize("evasive", EVASIVE.values(), ids=EVASIVE.keys())
def test_with_max_rate_at_the_limit_nothing_is_refused(
    start_sandbox: Callable[..., Sandbox],
    start_apache: Callable[..., Apache],
    tmp_path: Path,
    evasive: Evasive,
) -> None:
    changed = RESENT
    state = _estate(tmp_path, changed, resendOnChange=True)
    sandbox = start_sandbox(state)
    apache = start_apache(sandbox, evasive)
    rate = str(evasive.rate)

    _run(apache, sandbox, "plan", "--max-rate", rate, cwd=tmp_path, ok=(0, 2))
    _run(apache, sandbox, "apply", "--auto-approve", "--max-rate", rate, cwd=tmp_path)

    assert apache.refusals() == 0, [(e.at, e.path) for e in apache.requests() if e.status == 403]
    assert dict(sandbox.store.resends) == {f"inv_{i:03d}": 1 for i in range(changed)}
