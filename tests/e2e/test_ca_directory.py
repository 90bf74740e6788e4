"""REQUESTS_CA_BUNDLE naming a directory of hashed CA certificates (`openssl rehash`):
accepted and used for the handshake; an empty or hash-less one refused at start, before
any request, as an empty file is; and when a certificate is not trusted, the advice never
says to point the variable somewhere when it already does."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.cli import run_cli
from support.helpers import sandbox_env
from support.hostile_server import HostileServer
from support.inprocess import CliResult
from support.tls import Certificates, make_certificates, wrap_server_socket

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(shutil.which("openssl") is None, reason="openssl is not installed"),
]

SECRET = "s3cr3t/ca-directory=xyz"
SERVER = [{"id": "inv_acme", "status": "pending", "name": "Acme", "email": "a@acme.example"}]
DESIRED = "invites:\n  - id: inv_acme\n    email: compliance@acme.example\n"


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    return make_certificates(tmp_path_factory.mktemp("tls"))


@pytest.fixture
def tls_server(certs: Certificates) -> Iterator[HostileServer]:
    hostile = HostileServer(SERVER, secret=SECRET)
    hostile.use_tls(lambda sock: wrap_server_socket(sock, certs))
    with hostile:
        yield hostile


def hashed_directory(directory: Path, *cas: Path) -> Path:
    """A CA directory as `openssl rehash` makes it: each CA under its subject hash."""
    directory.mkdir()
    for number, ca in enumerate(cas):
        digest = subprocess.run(
            ["openssl", "x509", "-subject_hash", "-noout", "-in", str(ca)],
            capture_output=True, text=True, check=True,
        ).stdout.strip()  # fmt: skip
        shutil.copy(ca, directory / f"{digest}.{number}")
    return directory


def plan(tmp_path: Path, server: HostileServer, bundle: Path) -> CliResult:
    (tmp_path / "invites.yaml").write_text(DESIRED, encoding="utf-8")
    env = sandbox_env(server, REQUESTS_CA_BUNDLE=str(bundle))
    env.pop("CURL_CA_BUNDLE", None)
    return run_cli("plan", "invites.yaml", cwd=tmp_path, env=env)


def test_a_hashed_directory_trusts_the_private_ca(
    tmp_path: Path, tls_server: HostileServer, certs: Certificates
) -> None:
    result = plan(tmp_path, tls_server, hashed_directory(tmp_path / "cas", certs.ca))
    assert result.returncode == 0, result.stderr
    assert tls_server.tokens


@pytest.mark.parametrize("content", ["empty", "unhashed"])
def test_an_unusable_directory_is_refused_before_any_request(
    tmp_path: Path, tls_server: HostileServer, certs: Certificates, content: str
) -> None:
    directory = tmp_path / "cas"
    directory.mkdir()
    if content == "unhashed":
        shutil.copy(certs.ca, directory / "private-ca.pem")
    result = plan(tmp_path, tls_server, directory)
    assert result.returncode == 1
    assert tls_server.seen == []
    assert f"REQUESTS_CA_BUNDLE names {directory}, a directory with no certificate" in (
        result.stderr
    )


def test_a_directory_without_the_servers_ca_is_named_not_to_be_set_again(
    tmp_path: Path, tls_server: HostileServer
) -> None:
    other = make_certificates(tmp_path / "other-tls").ca
    directory = hashed_directory(tmp_path / "cas", other)
    result = plan(tmp_path, tls_server, directory)
    assert result.returncode == 1
    assert "point REQUESTS_CA_BUNDLE" not in result.stderr
    assert f"REQUESTS_CA_BUNDLE names {directory}, which does not hold the CA" in result.stderr


@pytest.mark.parametrize("odd", ["fifo", "device"])
def test_a_hashed_name_that_is_no_regular_file_is_refused_before_any_request(
    tmp_path: Path, tls_server: HostileServer, certs: Certificates, odd: str
) -> None:
    # A FIFO under a hashed name hung the start-up check (OpenSSL opened it and waited
    # for a writer), and would hang a handshake whose issuer has that hash.
    directory = hashed_directory(tmp_path / "cas", certs.ca)
    if odd == "fifo":
        os.mkfifo(directory / "0badcafe.0")
    else:
        (directory / "0badcafe.0").symlink_to("/dev/zero")
    result = plan(tmp_path, tls_server, directory)
    assert result.returncode == 1
    assert tls_server.seen == []
    assert "hashed name 0badcafe.0 is not a regular file" in result.stderr


def test_dangling_and_looping_hashed_links_are_passed_by_as_openssl_does(
    tmp_path: Path, tls_server: HostileServer, certs: Certificates
) -> None:
    directory = hashed_directory(tmp_path / "cas", certs.ca)
    (directory / "0badcafe.0").symlink_to("0badcafe.0")  # a loop
    (directory / "0badcafe.1").symlink_to(tmp_path / "gone")
    result = plan(tmp_path, tls_server, directory)
    assert result.returncode == 0, result.stderr
