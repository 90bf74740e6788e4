"""Throwaway TLS for tests: a CA and a certificate for 127.0.0.1 made with the
``openssl`` command, and a server socket wrapped with them (optionally speaking only
old TLS versions, as a server a client must refuse)."""

from __future__ import annotations

import socket
import ssl
import subprocess
import warnings
from pathlib import Path
from typing import NamedTuple


class Certificates(NamedTuple):
    ca: Path  # the CA's certificate: what REQUESTS_CA_BUNDLE names
    cert: Path  # the server's certificate for 127.0.0.1, signed by the CA
    key: Path


def make_certificates(directory: Path, host: str = "127.0.0.1", days: int = 2) -> Certificates:
    directory.mkdir(parents=True, exist_ok=True)
    ca, ca_key = directory / "ca.pem", directory / "ca.key"
    cert, key, csr = directory / "server.pem", directory / "server.key", directory / "server.csr"
    ext = directory / "server.ext"
    ext.write_text(f"subjectAltName=IP:{host}\nbasicConstraints=CA:FALSE\n")
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    _openssl("req", "-x509", *ec, "-keyout", ca_key, "-out", ca, "-days", "2", "-subj", "/CN=ca")
    _openssl("req", *ec, "-keyout", key, "-out", csr, "-subj", f"/CN={host}")
    _openssl("x509", "-req", "-in", csr, "-CA", ca, "-CAkey", ca_key, "-CAcreateserial",
             "-out", cert, "-days", str(days), "-extfile", ext)  # fmt: skip
    return Certificates(ca, cert, key)


def _openssl(*args: object) -> None:
    subprocess.run(["openssl", *map(str, args)], check=True, capture_output=True, timeout=60)


def wrap_server_socket(
    sock: socket.socket, certs: Certificates, maximum: ssl.TLSVersion | None = None
) -> ssl.SSLSocket:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(certs.cert, certs.key)
    if maximum is not None:  # a server that offers nothing newer than this
        with warnings.catch_warnings():  # TLS 1.0 is deprecated: that is the point
            warnings.simplefilter("ignore", DeprecationWarning)
            context.minimum_version = ssl.TLSVersion.MINIMUM_SUPPORTED
            context.maximum_version = maximum
        context.set_ciphers("DEFAULT:@SECLEVEL=0")
    return context.wrap_socket(sock, server_side=True)
