"""End to end: the real CLI through a local forward proxy (support/proxy.py, which
records what reaches it and tunnels CONNECT as squid does) and against TLS servers
made with throwaway certificates (support/tls.py, the `openssl` command).

The base URL as written never decides the proxy; old TLS named; a CA bundle that
cannot be used; proxy 407 and 403; socks without PySocks.
"""

from __future__ import annotations

import importlib.util
import ssl
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.cli import last_error, run_cli
from support.helpers import clean_env
from support.hostile_server import CLIENT_ID, HostileServer
from support.inprocess import CliResult
from support.proxy import RecordingProxy
from support.tls import Certificates, make_certificates, wrap_server_socket

pytestmark = pytest.mark.e2e

SECRET = "s3cr3t/proxy+tls=xyz"
SERVER = [{"id": "inv_acme", "status": "pending", "name": "Acme", "email": "a@acme.example"}]
DESIRED = "invites:\n  - id: inv_acme\n    email: compliance@acme.example\n"
PROXY_USER, PROXY_PASSWORD = "ci", "pr0xy-p@ss"
PROXY_VARIABLES = ("HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy", "ALL_PROXY",
                   "all_proxy", "NO_PROXY", "no_proxy")  # fmt: skip


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    return make_certificates(tmp_path_factory.mktemp("tls"))


@pytest.fixture
def server() -> Iterator[HostileServer]:
    with HostileServer(SERVER, secret=SECRET) as hostile:
        yield hostile


@pytest.fixture
def tls_server(certs: Certificates) -> Iterator[HostileServer]:
    hostile = HostileServer(SERVER, secret=SECRET)
    hostile.use_tls(lambda sock: wrap_server_socket(sock, certs))
    with hostile:
        yield hostile


def plan(tmp_path: Path, base_url: str, **env: str) -> CliResult:
    (tmp_path / "invites.yaml").write_text(DESIRED, encoding="utf-8")
    (tmp_path / "reconciler.yaml").write_text("max_attempts: 3\nretry_max_seconds: 5\n")
    environment = clean_env(
        RECONCILER_BASE_URL=base_url,
        RECONCILER_CLIENT_ID=CLIENT_ID,
        RECONCILER_CLIENT_SECRET=SECRET,
    )
    for name in (*PROXY_VARIABLES, "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE"):
        environment.pop(name, None)
    result = run_cli("plan", "invites.yaml", cwd=tmp_path, env={**environment, **env})
    said = result.stdout + result.stderr
    assert SECRET not in said and PROXY_PASSWORD not in said and "Traceback" not in said
    return result


# -- row 4: the base URL is parsed once; plain http never goes to a proxy ---------------


@pytest.mark.parametrize("written", ["HTTP://{}", " http://{}", "\thttp://{}/", "Http://{}//"])
def test_plain_http_written_oddly_never_sends_the_secret_to_a_proxy(
    tmp_path: Path, server: HostileServer, written: str
) -> None:
    with RecordingProxy() as proxy:
        address = server.url.removeprefix("http://")
        everywhere = dict.fromkeys(PROXY_VARIABLES[:6], proxy.url)
        result = plan(tmp_path, written.format(address), **everywhere)
    assert result.returncode == 0, result.stderr
    assert proxy.received == []  # once, the token form with the secret went here in clear
    assert [s.target for s in server.seen][:1] == ["/oauth/token"]


# -- through a proxy: what keeps working, and rows 10 and 11 ----------------------------


@pytest.mark.parametrize("variable", ["HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"])
def test_https_goes_through_the_proxy_with_its_password(
    tmp_path: Path, tls_server: HostileServer, certs: Certificates, variable: str
) -> None:
    with RecordingProxy(credentials=(PROXY_USER, PROXY_PASSWORD)) as proxy:
        url = proxy.url_with(PROXY_USER, "pr0xy-p%40ss")
        result = plan(tmp_path, tls_server.url, REQUESTS_CA_BUNDLE=str(certs.ca), **{variable: url})
    assert result.returncode == 0, result.stderr
    assert {r.method for r in proxy.received} == {"CONNECT"}
    assert tls_server.tokens  # the token request went through the tunnel


def test_no_proxy_names_the_host_and_the_proxy_is_not_used(
    tmp_path: Path, tls_server: HostileServer, certs: Certificates
) -> None:
    with RecordingProxy() as proxy:
        result = plan(tmp_path, tls_server.url, REQUESTS_CA_BUNDLE=str(certs.ca),
                      HTTPS_PROXY=proxy.url, no_proxy="127.0.0.1")  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert proxy.received == []


@pytest.mark.parametrize("password", [None, "wrong-password"])
def test_a_proxy_asking_for_authentication_is_said_once_never_its_password(
    tmp_path: Path, tls_server: HostileServer, certs: Certificates, password: str | None
) -> None:
    with RecordingProxy(credentials=(PROXY_USER, PROXY_PASSWORD)) as proxy:
        url = proxy.url_with(PROXY_USER, password) if password else proxy.url
        result = plan(tmp_path, tls_server.url, REQUESTS_CA_BUNDLE=str(certs.ca), HTTPS_PROXY=url)
    assert result.returncode == 1
    assert last_error(result) == (
        "error: stopped reading invites: the proxy requires authentication (407): check the "
        "user and password in HTTPS_PROXY (http://USER:PASSWORD@HOST:PORT, percent-encoded) "
        "(while getting a token; this request was not sent)"
    )
    assert len(proxy.received) == 1  # not retried
    assert "wrong-password" not in result.stderr
    assert tls_server.seen == []


def test_a_proxy_that_forbids_the_host_is_said_once(
    tmp_path: Path, tls_server: HostileServer, certs: Certificates
) -> None:
    with RecordingProxy(refuse=True) as proxy:
        result = plan(tmp_path, tls_server.url, REQUESTS_CA_BUNDLE=str(certs.ca),
                      HTTPS_PROXY=proxy.url)  # fmt: skip
    assert result.returncode == 1
    assert "the proxy refused to connect to 127.0.0.1:" in last_error(result)
    assert "(403)" in last_error(result)
    assert len(proxy.received) == 1


@pytest.mark.skipif(importlib.util.find_spec("socks") is not None, reason="PySocks installed")
def test_a_socks_proxy_without_pysocks_is_one_configuration_error(
    tmp_path: Path, tls_server: HostileServer
) -> None:
    result = plan(tmp_path, tls_server.url, ALL_PROXY="socks5h://ci:s0cks-pw@127.0.0.1:1")
    assert result.returncode == 1
    assert last_error(result) == (
        "error: ALL_PROXY names a SOCKS proxy (socks5h://...), which needs the PySocks "
        "package: install it (pip install 'requests[socks]'), or use an http:// proxy"
    )
    assert "s0cks-pw" not in result.stderr
    assert tls_server.seen == []


# -- TLS: a private CA works; rows 7 and 8 --------------------------------------------


def test_a_private_ca_named_by_requests_ca_bundle_is_trusted(
    tmp_path: Path, tls_server: HostileServer, certs: Certificates
) -> None:
    result = plan(tmp_path, tls_server.url, REQUESTS_CA_BUNDLE=str(certs.ca))
    assert result.returncode == 0, result.stderr


def test_without_the_private_ca_the_certificate_is_refused_once_with_the_hint(
    tmp_path: Path, tls_server: HostileServer
) -> None:
    result = plan(tmp_path, tls_server.url)
    assert result.returncode == 1
    address = tls_server.url.removeprefix("https://")
    assert (
        f"TLS verification failed for {address} (certificate verify failed: unable to get "
        "local issuer certificate)" in result.stderr
    )
    assert "point REQUESTS_CA_BUNDLE at its certificate" in result.stderr
    assert tls_server.seen == []


@pytest.mark.parametrize(
    ("content", "said"),
    [(None, "which does not exist"), (b"not a certificate\n", "which holds no certificate")],
)
def test_a_ca_bundle_that_cannot_be_used_is_said_at_start(
    tmp_path: Path, tls_server: HostileServer, content: bytes | None, said: str
) -> None:
    bundle = tmp_path / "ca.pem"
    if content is not None:
        bundle.write_bytes(content)
    result = plan(tmp_path, tls_server.url, REQUESTS_CA_BUNDLE=str(bundle))
    assert result.returncode == 1
    assert last_error(result).startswith(f"error: REQUESTS_CA_BUNDLE names {bundle}, {said}")
    assert "cannot write the output" not in result.stderr
    assert tls_server.seen == []


def test_a_server_offering_only_tls_1_0_is_named_so(tmp_path: Path, certs: Certificates) -> None:
    hostile = HostileServer(SERVER, secret=SECRET)
    hostile.use_tls(lambda sock: wrap_server_socket(sock, certs, maximum=ssl.TLSVersion.TLSv1))
    with hostile:
        result = plan(tmp_path, hostile.url, REQUESTS_CA_BUNDLE=str(certs.ca))
    assert result.returncode == 1
    assert (
        "failed: the server offers only TLS versions below this client's minimum (TLS 1.2)"
        in last_error(result)
    )
