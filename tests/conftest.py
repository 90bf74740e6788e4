"""Shared fixtures: an in-process sandbox on a free loopback port, invite files, an
edited schema, a registered secret. Fixtures only: what tests import (the real CLI,
the fake platform, hostile servers, ...) is in support/ (see README.md)."""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings
from support.apache import Apache, apache_binary
from support.haproxy import Haproxy, haproxy_binary
from support.helpers import CA_BUNDLE_VARIABLES
from support.nginx import Nginx, nginx_binary

from reconciler import safetext
from reconciler.api import capacity, exchange
from reconciler.api.capacity import MAX_RATE, RequestPacer
from reconciler.files import invite_schema_path
from reconciler.sandbox import Sandbox, SandboxOptions
from reconciler.sandbox.app import load_state_file
from reconciler.schema import check as schema

# No per-example deadline: a property is about values, not speed, and on a loaded
# two-core machine an example that takes 31 ms alone took 279 ms and failed the suite.
# Speed is measured in benchmarks/.
settings.register_profile("suite", deadline=None)
settings.load_profile("suite")


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """Workers for `-n auto`: one per core. The tests that waited (real gateways, fault
    runs at full backoff) are marked `real` or wait a tenth as long; each worker
    collects the whole suite again (some 9 s of CPU, most of it pytest rewriting the
    asserts, when no bytecode is cached), so a second worker per core cost more CPU
    than the waiting it hid."""
    return os.cpu_count() or 1


def _marked_real(request: pytest.FixtureRequest, part: str) -> None:
    """A test that starts a real part is marked `real`: it runs in `.ci/run`'s real-parts
    stage (`pytest -m real`), not in the README's `pytest`."""
    if request.node.get_closest_marker("real") is None:
        pytest.fail(f"{request.node.nodeid} starts a real {part}: mark it @pytest.mark.real")


@pytest.fixture(autouse=True)
def _no_machine_ca_bundle(monkeypatch: pytest.MonkeyPatch) -> None:
    """The machine's REQUESTS_CA_BUNDLE and CURL_CA_BUNDLE unset for every test, as
    ``clean_env`` leaves them out of the CLI's: a test trusts only a CA it names. Set, each
    client checked the bundle at start (OpenSSL loading every certificate in it: 40 ms of
    CPU), a third of the unit tests' time on a machine that sets them."""
    for name in CA_BUNDLE_VARIABLES:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture(autouse=True)
def _unpaced_start(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """End-to-end runs in this process start unpaced: the client's pacers begin at
    MAX_RATE (in practice no pacing) rather than START_RATE (10 a second), until the
    server first refuses. The slow start cost every run against a sandbox some 0.3 s of
    waiting for its turns, no limit being there to find: a third of the end-to-end
    tests' time. A module that is about the pace a run starts at, or the rate it learns
    from a limit, says so with ``SLOW_START = True`` (or names those of its tests that
    are: ``SLOW_START = ("test_...",)``) and keeps it; so does every run in a child
    process, and the unit tests of the pacer and the client."""
    slow = getattr(request.module, "SLOW_START", None) or ()
    if (
        "/tests/e2e/" not in request.path.as_posix()
        or slow is True
        or request.function.__name__ in slow
    ):
        return
    unpaced = functools.partial(RequestPacer, start_rate=MAX_RATE)
    for maker in (exchange, capacity):  # the client's own pacers, and the run's (capacity_for)
        monkeypatch.setattr(maker, "RequestPacer", unpaced)


@pytest.fixture
def quick_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    """The backoff between retries a hundredth of the shipped one (5 ms doubling up to
    80 ms, full jitter), for in-process runs whose point is what retries do, not how
    long they wait: a fault run rides out as many faults in a second, not a minute.
    The in-process CLI reads the module's constants at each retry."""
    monkeypatch.setattr(exchange, "BACKOFF_BASE", exchange.BACKOFF_BASE / 100)
    monkeypatch.setattr(exchange, "BACKOFF_CAP", exchange.BACKOFF_CAP / 100)


@pytest.fixture
def example_state() -> list[dict[str, Any]]:
    """The bundled sandbox state (a fresh copy each time)."""
    return load_state_file(None)


@pytest.fixture
def start_sandbox() -> Iterator[Callable[..., Sandbox]]:
    """Start sandboxes with given invites and knobs; all are stopped after the test."""
    with ExitStack() as started:

        def start(invites: list[dict[str, Any]] | None = None, **knobs: Any) -> Sandbox:
            server = Sandbox(invites, options=SandboxOptions(**knobs)).start()
            started.callback(server.stop)
            return server

        yield start


def _real_servers(
    request: pytest.FixtureRequest, part: str, binary: str | None, missing: str, make: Any
) -> Iterator[Callable[..., Any]]:
    """Start real ``part`` processes in front of sandboxes (``make(upstream, knobs)``); all
    are stopped after the test. Without ``binary`` the test is skipped, saying why, except
    under CI (CI=true), where `.ci/run` installs it: there a missing part fails the test
    rather than hide it."""
    _marked_real(request, part)
    if binary is None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"{missing}, and CI=true: .ci/run should have installed it")
        pytest.skip(f"{missing}; CI runs these")
    with ExitStack() as started:
        yield lambda sandbox, knobs=None: started.enter_context(make(sandbox.url, knobs))


@pytest.fixture
def start_nginx(request: pytest.FixtureRequest) -> Iterator[Callable[..., Nginx]]:
    """``start_nginx(sandbox, gateway=None)``: a real nginx in front of it (_real_servers)."""
    missing = "nginx is not installed (Debian: apt-get install nginx-light)"
    yield from _real_servers(request, "nginx", nginx_binary(), missing, Nginx)


@pytest.fixture
def start_haproxy(request: pytest.FixtureRequest) -> Iterator[Callable[..., Haproxy]]:
    """``start_haproxy(sandbox, limit=None)``: a real HAProxy in front of it (_real_servers)."""
    missing = "haproxy is not installed (Debian: apt-get install haproxy)"
    yield from _real_servers(request, "HAProxy", haproxy_binary(), missing, Haproxy)


@pytest.fixture
def start_apache(request: pytest.FixtureRequest) -> Iterator[Callable[..., Apache]]:
    """``start_apache(sandbox, evasive)``: a real Apache with mod_evasive (_real_servers)."""
    missing = "apache2 or mod_evasive is not installed"
    yield from _real_servers(request, "Apache", apache_binary(), missing, Apache)


@pytest.fixture
def sandbox(start_sandbox: Callable[..., Sandbox]) -> Sandbox:
    """A sandbox serving the bundled example state."""
    return start_sandbox()


@pytest.fixture
def write_yaml(tmp_path: Path) -> Callable[[str, str], Path]:
    """Write a YAML file exactly as given (hand-written style) and return its path."""

    def write(name: str, text: str) -> Path:
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        return path

    return write


@pytest.fixture
def edit_invite_schema(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Callable[..., None]]:
    """Read invite files against the shipped schema with ``change`` made to its
    invite entry (or to the part of it at the keys ``at``), as a team may edit the file."""

    def edit(
        change: Callable[[dict[str, Any]], None], at: tuple[str, ...] = ("$defs", "invite")
    ) -> None:
        edited = json.loads(invite_schema_path().read_text(encoding="utf-8"))
        part = edited
        for key in at:
            part = part[key]
        change(part)
        path = tmp_path / "invites.schema.json"
        path.write_text(json.dumps(edited), encoding="utf-8")
        monkeypatch.setattr(schema, "invite_schema_path", lambda: path)
        schema.invite_validators.cache_clear()

    yield edit
    schema.invite_validators.cache_clear()  # before the path is put back


# Moved from test_untrusted_inputs.py: its tests now live in several files.
SECRET = "s3cr3t-Value-of-this-test"


@pytest.fixture
def registered_secret() -> Iterator[str]:
    saved = safetext._REDACTOR._secrets
    safetext.register_secret(SECRET)
    yield SECRET
    safetext._REDACTOR._secrets = saved
