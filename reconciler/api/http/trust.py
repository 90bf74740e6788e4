"""What a run trusts, checked once before any request: the proxy the environment names,
and the CA bundle (a PEM file or a hashed directory) that REQUESTS_CA_BUNDLE names.

A bad one is one clear configuration error at start, never a failure per request.
"""

from __future__ import annotations

import importlib.util
import os
import re
import ssl
import stat
from typing import Any

from reconciler.errors import ConfigError
from reconciler.safetext import escape

_SOCKS = ("socks4", "socks4a", "socks5", "socks5h")


_CA_BUNDLE_LIMIT = 64 * 2**20


def proxy_variable(proxy: str) -> str:
    """Which variable named ``proxy``: lower case wins, as in urllib's getproxies."""
    for name in ("https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"):
        if os.environ.get(name) == proxy:
            return name
    return "HTTPS_PROXY"


def check_proxy(proxy: str, variable: str) -> None:
    """A proxy this client cannot use is a configuration error, said once, before any request.

    Never shown whole: its user info may hold a password."""
    scheme = proxy.partition("://")[0].lower() if "://" in proxy else "http"
    if scheme in ("http", "https"):
        return
    shown = escape(scheme[:20])
    if scheme in _SOCKS:
        if importlib.util.find_spec("socks") is None:  # PySocks, which urllib3 needs for SOCKS
            raise ConfigError(
                f"{variable} names a SOCKS proxy ({shown}://...), which needs the PySocks "
                "package: install it (pip install 'requests[socks]'), or use an http:// proxy"
            )
        return
    raise ConfigError(
        f"{variable} names a proxy of scheme {shown}://, which is not supported: "
        "use http://, https:// or socks5://"
    )


def checked_verify(verify: Any) -> Any:
    """The CA bundle that REQUESTS_CA_BUNDLE (or CURL_CA_BUNDLE) names, checked now."""
    if not isinstance(verify, str):
        return verify
    variable = next(
        (n for n in ("REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE") if os.environ.get(n) == verify),
        "REQUESTS_CA_BUNDLE",
    )
    shown = f"{variable} names {escape(verify)}"
    try:
        status = os.stat(verify)
    except FileNotFoundError:
        raise ConfigError(f"{shown}, which does not exist") from None
    except OSError as exc:
        raise ConfigError(f"{shown}, which cannot be read ({exc.strerror})") from None
    if stat.S_ISDIR(status.st_mode):
        return _checked_ca_directory(verify, shown)
    if not stat.S_ISREG(status.st_mode):
        raise ConfigError(f"{shown}, which is not a regular file")
    if status.st_size > _CA_BUNDLE_LIMIT:
        raise ConfigError(
            f"{shown}, which is larger than {_CA_BUNDLE_LIMIT // 2**20} MiB; "
            "a CA bundle is a PEM file of certificates"
        )
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    try:
        context.load_verify_locations(cafile=verify)
    except ssl.SSLError:
        stats = {"x509": 0}
    except OSError as exc:
        raise ConfigError(f"{shown}, which cannot be read ({exc.strerror})") from None
    else:
        stats = context.cert_store_stats()
    if not stats.get("x509"):
        raise ConfigError(
            f"{shown}, which holds no certificate; it must be a PEM file of the CA "
            "certificates to trust (-----BEGIN CERTIFICATE-----)"
        )
    return verify


# OpenSSL looks a CA up in a directory by the hash of its subject: HASH.N (`openssl
# rehash`, c_rehash); HASH.rN are revocation lists.
_HASHED_CERTIFICATE = re.compile(r"[0-9a-f]{8}\.[0-9]+")


_DIRECTORY_ENTRIES_READ = 100_000


def _checked_ca_directory(path: str, shown: str) -> str:
    """A directory of CA certificates, as OpenSSL reads one: at least one hashed name
    (HASH.0) holding a certificate. Anything else would fail only at the first request,
    with every server's certificate untrusted."""
    try:
        with os.scandir(path) as entries:
            names = sorted(
                entry.name
                for _, entry in zip(range(_DIRECTORY_ENTRIES_READ), entries, strict=False)
                if _HASHED_CERTIFICATE.fullmatch(entry.name)
            )
    except OSError as exc:
        raise ConfigError(f"{shown}, a directory that cannot be read ({exc.strerror})") from None
    advice = (
        "put the CA certificates (PEM) there and run `openssl rehash` on it, or name a "
        "PEM file of them instead"
    )
    if not names:
        raise ConfigError(
            f"{shown}, a directory with no certificate under a hashed name (HASH.0, which "
            f"is how OpenSSL finds a CA in a directory); {advice}"
        )
    regular = []
    for name in names:
        candidate = os.path.join(path, name)
        try:
            mode = os.stat(candidate).st_mode  # through a symlink, as OpenSSL opens it
        except OSError:  # a dangling link or a loop, unreadable: OpenSSL passes it by too
            continue
        if not stat.S_ISREG(mode):
            # OpenSSL opens it when a server's issuer has its hash: a FIFO would hang that
            # handshake (and this check) for ever, a device feed it without end.
            raise ConfigError(
                f"{shown}, a directory whose hashed name {escape(name)} is not a regular "
                f"file (a FIFO, device or socket, which OpenSSL would wait on); {advice}"
            )
        regular.append(candidate)
    for candidate in regular[:20]:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        try:
            if os.path.getsize(candidate) > _CA_BUNDLE_LIMIT:
                continue
            context.load_verify_locations(cafile=candidate)
        except (OSError, ssl.SSLError):
            continue
        if context.cert_store_stats().get("x509"):
            return path
    raise ConfigError(f"{shown}, a directory whose hashed names hold no certificate; {advice}")
