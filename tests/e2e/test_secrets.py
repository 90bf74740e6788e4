"""End to end: the client secret and access tokens never leave the HTTP headers.

Every command runs for real (with --verbose where it has it) against the
sandbox over HTTP, succeeding and failing, and nothing it writes -- stdout,
stderr, the plan file, the audit log, an exported file -- may hold the client
secret or an access token. Tokens are JWTs; the sandbox's own tokens are
recorded as it issues them, and every request target it receives is checked
too (tokens never go in a URL). Also: plain http:// is refused for a remote
host before anything is sent (https:// verifying certificates: test_proxies_and_tls.py).
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from support.cli import CliRun, run_cli
from support.daemon import free_port
from support.estate import BUSINESSES
from support.helpers import audit_log, clean_env, sandbox_env
from support.proxy import RecordingProxy

from reconciler.sandbox import SANDBOX_CLIENT_ID, SANDBOX_CLIENT_SECRET, Sandbox
from reconciler.sandbox.app import Response, SandboxApp

pytestmark = pytest.mark.e2e

JWT = re.compile(r"eyJ[\w-]+\.[\w-]+\.[\w-]+")
LEAKY_SECRET = "s3cr3t-DO-NOT-LEAK-xyz"
# Runs that are meant to fail should fail fast.
QUICK_CONFIG = "max_attempts: 2\nretry_max_seconds: 1\nparallelism: 2\n"
PROXY_ENV = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY")

NAMES = tuple(f"{stem} {suffix}".strip() for stem, suffix, _, _ in BUSINESSES)


# -- data ------------------------------------------------------------------------------


@dataclass
class Dataset:
    root: Path
    server: list[dict[str, Any]]
    changed: list[str]
    ids: list[str] = field(default_factory=list)


def build_dataset(root: Path, n: int = 45, seed: int = 1, differ: bool = True) -> Dataset:
    """n invites in two files; a third differ from the server, half of those re-send."""
    rng = random.Random(seed)
    server, entries, changed = [], [], []
    for i in range(n):
        invite_id = f"inv_s{seed}_{i:03d}"
        current: dict[str, Any] = {
            "id": invite_id,
            "status": "pending",
            "name": f"{NAMES[i % len(NAMES)]} {i}",
            "email": f"kyb{i}@firma-{i}.example",
            "phone": f"+4930{i:07d}",
            "primaryContact": {"name": f"Zoë Ångström {i}", "email": f"zoe{i}@firma.example"},
            "groups": rng.sample(["emea", "apac", "latam", "na", "enterprise"], 2),
            "attachments": ["certificate-of-incorporation"],
        }
        entry = {k: v for k, v in current.items() if k != "status"}
        if differ and i % 3 == 0:
            entry["email"] = f"compliance{i}@firma-{i}.example"
            entry["groups"] = [*entry["groups"], "smb"]
            changed.append(invite_id)
            if i % 2 == 0:
                entry["resendOnChange"] = True
        server.append(current)
        entries.append(entry)
    for name, chunk in (("emea.yaml", entries[0::2]), ("apac.yml", entries[1::2])):
        root.mkdir(parents=True, exist_ok=True)
        text = yaml.safe_dump({"invites": chunk}, allow_unicode=True, sort_keys=False)
        (root / name).write_text(text, encoding="utf-8")
    return Dataset(root, server, changed, [i["id"] for i in server])


# -- watching for leaks --------------------------------------------------------------------


class LeakWatch:
    """Records the tokens a sandbox issues and the raw request targets it receives."""

    def __init__(self) -> None:
        self.tokens: list[str] = []
        self.targets: list[str] = []
        self.apps: list[SandboxApp] = []

    def attach(self, app: SandboxApp) -> None:
        issue, handle = app.tokens.issue, app.handle

        def recording_issue(*args: Any, **kwargs: Any) -> str:
            token = issue(*args, **kwargs)
            self.tokens.append(token)
            return token

        def recording_handle(method: str, target: str, headers: Any, body: bytes) -> Response:
            self.targets.append(target)  # the whole target, query string included
            return handle(method, target, headers, body)

        self.apps.append(app)
        app.tokens.issue = recording_issue  # type: ignore[method-assign]
        app.handle = recording_handle  # type: ignore[method-assign]

    def assert_clean(self, secrets: tuple[str, ...], **texts: str) -> None:
        for where, text in texts.items():
            found = JWT.search(text)
            assert not found, f"an access token (JWT) appears in {where} at {found.start()}"
            for secret in secrets:
                assert secret not in text, f"the client secret appears in {where}"
            for token in self.tokens:
                # Claims and signature: any one of them alone is already a leak.
                for part in token.split(".")[1:]:
                    assert part not in text, f"part of an access token appears in {where}"
        # What the sandbox itself recorded, and the raw targets (query strings too).
        recorded = [r.path for app in self.apps for r in app.stats.requests]
        for target in [*recorded, *self.targets]:
            assert not JWT.search(target), f"a token in a request URL: {target}"
            assert "token=" not in target and "secret" not in target, target
            for secret in secrets:
                assert secret not in target, f"the client secret in a request URL: {target}"


@pytest.fixture
def watched_sandbox(
    start_sandbox: Callable[..., Sandbox],
) -> Callable[..., tuple[Sandbox, LeakWatch]]:
    def start(invites: list[dict[str, Any]], **knobs: Any) -> tuple[Sandbox, LeakWatch]:
        sandbox = start_sandbox(invites, **knobs)
        watch = LeakWatch()
        watch.attach(sandbox.app)
        return sandbox, watch

    return start


def check(
    result: CliRun,
    watch: LeakWatch,
    *,
    secrets: tuple[str, ...] = (SANDBOX_CLIENT_SECRET,),
    exit_code: int,
    files: tuple[Path, ...] = (),
) -> None:
    where = " ".join(str(a) for a in result.args[1:])
    assert "Traceback" not in result.stderr + result.stdout, result.stderr
    assert result.returncode == exit_code, f"{where}:\n{result.stdout}\n{result.stderr}"
    texts = {f"stdout of `{where}`": result.stdout, f"stderr of `{where}`": result.stderr}
    for path in files:
        assert path.exists(), f"{path} was not written"
        texts[str(path)] = path.read_text(encoding="utf-8")
    watch.assert_clean(secrets, **texts)


def write_config(directory: Path, text: str = QUICK_CONFIG) -> Path:
    path = directory / "quick.yaml"
    path.write_text(text, encoding="utf-8")
    return path


# -- successful runs ---------------------------------------------------------------------


def test_no_secret_or_token_in_any_output_of_successful_commands(
    watched_sandbox: Callable[..., tuple[Sandbox, LeakWatch]], tmp_path: Path
) -> None:
    ds = build_dataset(tmp_path / "invites", seed=1)
    sandbox, watch = watched_sandbox(ds.server)
    env = sandbox_env(sandbox)
    root = str(ds.root)

    check(run_cli("validate", root, env=env), watch, exit_code=0)
    check(run_cli("plan", "-v", root, env=env), watch, exit_code=0)
    for fmt in ("json", "markdown", "text"):
        result = run_cli("plan", "--verbose", "--format", fmt, root, env=env)
        check(result, watch, exit_code=0)
        assert ds.changed[0] in result.stdout
    plan_file = tmp_path / "plan.json"
    result = run_cli("plan", "-v", "--out", str(plan_file), root, env=env)
    check(result, watch, exit_code=0, files=(plan_file,))
    assert len(json.loads(plan_file.read_text(encoding="utf-8"))["changes"]) == len(ds.changed)

    audit = tmp_path / "audit-plan.jsonl"
    result = run_cli("apply", "-v", "--plan", str(plan_file), "--audit-log", str(audit), env=env)
    check(result, watch, exit_code=0, files=(audit,))
    assert f"Apply: {len(ds.changed)} updated, 0 failed." in result.stdout

    export_file = tmp_path / "export.yaml"
    check(run_cli("export", "-v", *ds.ids[:5], env=env), watch, exit_code=0)
    result = run_cli("export", "-v", "--out", str(export_file), *ds.ids, env=env)
    check(result, watch, exit_code=0, files=(export_file,))
    result = run_cli("resend", "-v", "--auto-approve", ds.ids[1], ds.ids[2], env=env)
    check(result, watch, exit_code=0)
    assert sandbox.store.resends[ds.ids[1]] == 1

    # A fresh server for `apply --auto-approve`, with its audit log.
    other = build_dataset(tmp_path / "more", seed=2)
    sandbox2, watch2 = watched_sandbox(other.server)
    audit2 = tmp_path / "audit-apply.jsonl"
    result = run_cli(
        "apply",
        "--auto-approve",
        "--verbose",
        "--audit-log",
        str(audit2),
        str(other.root),
        env=sandbox_env(sandbox2),
    )
    check(result, watch2, exit_code=0, files=(audit2,))
    assert f"Apply: {len(other.changed)} updated, 0 failed." in result.stdout

    # The runs above really did get (several) tokens, so the checks were not vacuous.
    assert watch.tokens and watch2.tokens
    assert all(JWT.fullmatch(t) for t in watch.tokens)
    assert len(watch.targets) > 3 * len(ds.ids)


# -- failing runs --------------------------------------------------------------------------


def test_wrong_secret_401_never_echoes_the_secret(
    watched_sandbox: Callable[..., tuple[Sandbox, LeakWatch]], tmp_path: Path
) -> None:
    ds = build_dataset(tmp_path / "invites", seed=3)
    sandbox, watch = watched_sandbox(ds.server)
    before = sandbox.store.snapshot()
    env = {**sandbox_env(sandbox), "RECONCILER_CLIENT_SECRET": LEAKY_SECRET}
    audit = tmp_path / "audit.jsonl"
    plan_file = tmp_path / "plan.json"
    runs = [
        ("plan", "-v", str(ds.root)),
        ("plan", "-v", "--out", str(plan_file), "--format", "json", str(ds.root)),
        ("apply", "-v", "--auto-approve", "--audit-log", str(audit), str(ds.root)),
        ("export", "-v", ds.ids[0]),
        ("resend", "-v", "--auto-approve", ds.ids[0]),
    ]
    for args in runs:
        result = run_cli(*args, env=env)
        check(result, watch, secrets=(LEAKY_SECRET,), exit_code=1)
        assert "401" in result.stdout + result.stderr, result.stderr
        assert "invalid client credentials" in result.stdout + result.stderr
    for path in (audit, plan_file):
        if path.exists():
            watch.assert_clean((LEAKY_SECRET,), **{str(path): path.read_text(encoding="utf-8")})
    assert not watch.tokens, "the sandbox issued a token for a wrong secret"
    assert sandbox.store.snapshot() == before and not sandbox.store.resends


def test_missing_write_scope_403_on_apply(
    watched_sandbox: Callable[..., tuple[Sandbox, LeakWatch]], tmp_path: Path
) -> None:
    ds = build_dataset(tmp_path / "invites", seed=4)
    sandbox, watch = watched_sandbox(ds.server)
    before = sandbox.store.snapshot()
    audit = tmp_path / "audit.jsonl"
    env = sandbox_env(sandbox, RECONCILER_SCOPE="kyb:invites:read")
    result = run_cli(
        "apply", "--verbose", "--auto-approve", "--audit-log", str(audit), str(ds.root), env=env
    )
    check(result, watch, exit_code=1, files=(audit,))
    assert "403" in result.stdout + result.stderr
    assert "kyb:invites:write" in result.stdout + result.stderr
    outcomes = [e for e in audit_log(audit) if e["record"] == "outcome"]
    # The first 403 stops the run: a write whose attempt line was already written is
    # then not sent at all, and says so; every other one is the platform's 403.
    assert outcomes and all(e["outcome"] == "failed" for e in outcomes)
    assert any(e["http_status"] == 403 for e in outcomes)
    assert all(e["http_status"] == 403 or e["message"].startswith("not sent") for e in outcomes)
    assert sandbox.store.snapshot() == before
    assert watch.tokens


# Retries back off a hundredth as long (tests/conftest.py): what they say is the point.
@pytest.mark.usefixtures("quick_backoff")
@pytest.mark.parametrize(("down", "said"), [(True, "503"), (False, "could not connect")])
def test_errors_of_an_api_down_or_unreachable_hold_no_secret_or_token(
    watched_sandbox: Callable[..., tuple[Sandbox, LeakWatch]],
    tmp_path: Path,
    down: bool,
    said: str,
) -> None:
    ds = build_dataset(tmp_path / "invites", n=40, seed=5)
    if down:  # the sandbox answers every request 503
        sandbox, watch = watched_sandbox(ds.server, error_rate=1.0)
        env, secret = sandbox_env(sandbox), SANDBOX_CLIENT_SECRET
    else:  # nothing listens on the port
        watch, secret = LeakWatch(), LEAKY_SECRET
        env = clean_env(
            RECONCILER_BASE_URL=f"http://127.0.0.1:{free_port()}",
            RECONCILER_CLIENT_ID=SANDBOX_CLIENT_ID,
            RECONCILER_CLIENT_SECRET=secret,
        )
    config = str(write_config(tmp_path))
    audit = str(tmp_path / "audit.jsonl")
    for args in (
        ("plan", "-v", "--config", config, str(ds.root)),
        ("apply", "-v", "--auto-approve", "--audit-log", audit, "--config", config, str(ds.root)),
        ("export", "-v", "--config", config, ds.ids[0]),
        ("resend", "-v", "--auto-approve", "--config", config, ds.ids[0]),
    ):
        result = run_cli(*args, env=env, timeout=60)
        check(result, watch, secrets=(secret,), exit_code=1)
        assert said in result.stdout + result.stderr


# -- transport security ----------------------------------------------------------------------


def _via_proxy(url: str, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in clean_env(**extra).items() if k.upper() not in PROXY_ENV}
    env.update(HTTP_PROXY=url, HTTPS_PROXY=url, http_proxy=url, https_proxy=url)
    return env


def test_plain_http_to_a_remote_host_is_refused_before_sending(tmp_path: Path) -> None:
    ds = build_dataset(tmp_path / "invites", n=40, seed=7)
    config = str(write_config(tmp_path, "max_attempts: 1\nparallelism: 2\n"))
    watch = LeakWatch()
    # All traffic would go through the trap (a proxy refusing all), which records it.
    with RecordingProxy(refuse=True) as trap:
        env = _via_proxy(
            trap.url,
            RECONCILER_BASE_URL="http://api.example.com",
            RECONCILER_CLIENT_ID=SANDBOX_CLIENT_ID,
            RECONCILER_CLIENT_SECRET=LEAKY_SECRET,
        )
        for args in (
            ("plan", "-v", "--config", config, str(ds.root)),
            ("apply", "-v", "--auto-approve", "--config", config, str(ds.root)),
            ("export", "-v", "--config", config, ds.ids[0]),
        ):
            result = run_cli(*args, env=env, timeout=60)
            check(result, watch, secrets=(LEAKY_SECRET,), exit_code=1)
            assert "https://" in result.stderr and "api.example.com" in result.stderr
            assert len(result.stderr.strip().splitlines()) <= 3, result.stderr
        assert trap.received == [], "a request left for a plain-http remote host"

        # Control: the same trap does catch a request the client is allowed to make.
        env["RECONCILER_BASE_URL"] = "https://api.example.com"
        result = run_cli("plan", "--config", config, str(ds.root), env=env, timeout=60)
        check(result, watch, secrets=(LEAKY_SECRET,), exit_code=1)
        assert trap.received, "the trap never saw a request: this test is void"
