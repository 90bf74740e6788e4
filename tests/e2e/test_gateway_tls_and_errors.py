"""End to end: the real CLI behind a real nginx (support/nginx.py) where nginx, not
the platform, answers: TLS 1.0 only (row 7), a body over client_max_body_size and a
client certificate required (row 9), the upstream down on the token request (row 12).
Issue 24; without nginx these skip, saying so (under CI=true they fail: .ci/run installs it).
"""

from __future__ import annotations

import socket
from collections.abc import Callable
from pathlib import Path

import pytest
from support.cli import last_error, run_cli
from support.helpers import clean_env
from support.inprocess import CliResult
from support.nginx import Gateway, Nginx
from support.tls import Certificates, make_certificates

from reconciler.sandbox import Sandbox

pytestmark = [pytest.mark.e2e, pytest.mark.real]

SERVER = [{"id": "inv_acme", "status": "pending", "name": "Acme", "email": "a@acme.example"}]
DESIRED = "invites:\n  - id: inv_acme\n    email: compliance-team@acme.example\n"
# A PATCH larger than the token request's form (about 130 bytes), which must pass.
LONG_NAME = "Acme Holdings " + "International " * 12 + "Ltd"


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    return make_certificates(tmp_path_factory.mktemp("tls"))


@pytest.fixture(autouse=True)
def nginx_installed(start_nginx: Callable[..., Nginx]) -> None:
    """The shared fixture's rule: skipped without nginx, failed without it under CI=true."""


@pytest.fixture
def sandbox(start_sandbox: Callable[..., Sandbox]) -> Sandbox:
    return start_sandbox([dict(invite) for invite in SERVER])


def reconcile(tmp_path: Path, env: dict[str, str], *args: str, desired: str = DESIRED) -> CliResult:
    (tmp_path / "invites.yaml").write_text(desired, encoding="utf-8")
    (tmp_path / "reconciler.yaml").write_text("max_attempts: 2\nretry_max_seconds: 3\n")
    result = run_cli(*(args or ("plan",)), "invites.yaml", cwd=tmp_path, env=clean_env(**env))
    assert "Traceback" not in result.stderr
    return result


def test_a_server_offering_only_tls_1_0_is_named_so(
    tmp_path: Path, sandbox: Sandbox, certs: Certificates
) -> None:
    gateway = Gateway(tls=(str(certs.cert), str(certs.key)), tls_protocols="TLSv1")
    with Nginx(sandbox.url, gateway) as nginx:
        env = {**nginx.client_env(sandbox), "REQUESTS_CA_BUNDLE": str(certs.ca)}
        result = reconcile(tmp_path, env)
    assert result.returncode == 1
    assert last_error(result) == (
        f"error: stopped reading invites: TLS handshake with 127.0.0.1:{nginx.port} failed: "
        "the server offers only TLS versions below this client's minimum (TLS 1.2); the "
        "server must be upgraded (while getting a token; this request was not sent)"
    )
    assert sandbox.stats.total == 0


def test_nginx_with_tls_and_a_private_ca_keeps_working(
    tmp_path: Path, sandbox: Sandbox, certs: Certificates
) -> None:
    with Nginx(sandbox.url, Gateway(tls=(str(certs.cert), str(certs.key)))) as nginx:
        env = {**nginx.client_env(sandbox), "REQUESTS_CA_BUNDLE": str(certs.ca)}
        result = reconcile(tmp_path, env)
    assert result.returncode == 0, result.stderr


def test_a_body_over_nginxs_limit_is_a_413_said_so_and_not_retried(
    tmp_path: Path, sandbox: Sandbox
) -> None:
    desired = f"{DESIRED}    name: {LONG_NAME}\n"
    with Nginx(sandbox.url, Gateway(max_body_size="160")) as nginx:
        env = nginx.client_env(sandbox)
        result = reconcile(tmp_path, env, "apply", "--auto-approve", desired=desired)
    assert result.returncode == 1
    line = next(line for line in result.stderr.splitlines() if line.startswith("error: inv_acme"))
    assert line.startswith("error: inv_acme: HTTP 413: the request body (")
    assert line.endswith(
        "bytes) was refused as too large, by the server or a proxy or gateway in front of it: "
        "Request Entity Too Large (an HTML page, probably from a proxy or gateway); a proxy "
        "or gateway in front of the API limits request bodies; ask its operators"
    )
    assert "requestId" not in line
    assert sandbox.stats.calls("PATCH") == []  # nginx refused it: the platform never saw it


def test_an_html_page_from_nginx_is_shown_by_its_title(
    tmp_path: Path, sandbox: Sandbox, certs: Certificates
) -> None:
    # An mTLS gateway: no client certificate, nginx's own 400 page.
    gateway = Gateway(tls=(str(certs.cert), str(certs.key)), client_ca=str(certs.ca))
    with Nginx(sandbox.url, gateway) as nginx:
        env = {**nginx.client_env(sandbox), "REQUESTS_CA_BUNDLE": str(certs.ca)}
        result = reconcile(tmp_path, env)
    assert result.returncode == 1
    assert (
        "HTTP 400: no token from the token request (POST /oauth/token): No required SSL "
        "certificate was sent (an HTML page, probably from a proxy or gateway)" in result.stderr
    )


def test_a_502_on_the_token_request_names_it_and_advises_only_what_exists(
    tmp_path: Path, sandbox: Sandbox
) -> None:
    with socket.socket() as probe:  # a port nothing listens on: the upstream is down
        probe.bind(("127.0.0.1", 0))
        down = f"http://127.0.0.1:{probe.getsockname()[1]}"
    with Nginx(down) as nginx:
        result = reconcile(tmp_path, nginx.client_env(sandbox))
    assert result.returncode == 1
    assert last_error(result) == (
        "error: stopped reading invites: HTTP 502: no token from the token request "
        "(POST /oauth/token): Bad Gateway (an HTML page, probably from a proxy or "
        "gateway) (gave up after 2 attempts)"
    )
    assert "requestId" not in result.stderr
