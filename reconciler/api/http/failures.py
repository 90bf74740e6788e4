"""Network failures named by exception type, in words a user can act on.

Only a failure to connect proves the server never saw a request; every other
failure may have reached it, which decides whether a re-send may be repeated.
"""

from __future__ import annotations

import http.client
import os
import re
import ssl
from collections.abc import Iterator
from typing import Any

import requests
import urllib3.exceptions as u3

from reconciler.api.exceptions import TransportError
from reconciler.safetext import escape, redact_and_escape

# http.client's words when a proxy answers CONNECT with anything but 200.
_TUNNEL_STATUS = re.compile(r"Tunnel connection failed: (\d{3})")


# OpenSSL's reasons when client and server share no TLS version.
_OLD_TLS = frozenset(
    {
        "UNSUPPORTED_PROTOCOL",
        "TLSV1_ALERT_PROTOCOL_VERSION",
        "NO_PROTOCOLS_AVAILABLE",
        "WRONG_SSL_VERSION",
        "VERSION_TOO_LOW",
    }
)


# Verification codes that mean "the issuer is not trusted here": a private CA.
_UNTRUSTED_ISSUER = frozenset({2, 18, 19, 20, 21})


def _causes(exc: BaseException) -> Iterator[BaseException]:
    """The exception and what it wraps: requests and urllib3 nest the real cause."""
    seen: set[int] = set()
    todo: list[BaseException | None] = [exc]
    while todo:
        current = todo.pop(0)
        if current is None or id(current) in seen:
            continue
        seen.add(id(current))
        yield current
        # urllib3 keeps the cause in .reason; ssl.SSLError keeps a text there.
        linked = [*current.args, getattr(current, "reason", None)]
        todo += [a for a in linked if isinstance(a, BaseException)]
        todo += [current.__cause__, current.__context__]


def _first(exc: BaseException, kind: type[BaseException] | tuple[type[BaseException], ...]) -> Any:
    return next((c for c in _causes(exc) if isinstance(c, kind)), None)


def transport_error(
    exc: BaseException, host: str, timeout: float, proxy: str | None = None
) -> TransportError:
    """What went wrong on the network, in words a user can act on; ``proxy`` is the
    variable that named the proxy, if one is used."""
    if _first(exc, (u3.ProxyError, requests.exceptions.ProxyError)):
        return _proxy_error(exc, host, proxy)
    if _first(exc, (ssl.SSLError, u3.SSLError, requests.exceptions.SSLError)):
        return _tls_error(exc, host)
    if _first(exc, u3.NameResolutionError):
        return TransportError(
            f"cannot resolve the host of {host}; check RECONCILER_BASE_URL", maybe_sent=False
        )
    # NewConnectionError is a ConnectTimeoutError in urllib3: look for it first.
    if _first(exc, (u3.NewConnectionError, ConnectionRefusedError)):
        why = " (connection refused)" if _first(exc, ConnectionRefusedError) else ""
        return TransportError(
            f"could not connect to {host}{why}; check RECONCILER_BASE_URL", maybe_sent=False
        )
    if _first(exc, (u3.ConnectTimeoutError, requests.exceptions.ConnectTimeout)):
        return TransportError(f"could not connect to {host} within {timeout:g}s", maybe_sent=False)
    if _first(exc, (u3.ReadTimeoutError, requests.exceptions.ReadTimeout, TimeoutError)):
        return TransportError(f"no answer from {host} within {timeout:g}s", maybe_sent=True)
    if _first(exc, (requests.exceptions.InvalidHeader, requests.exceptions.InvalidURL)):
        return TransportError(
            f"request to {host} could not be built ({type(exc).__name__}); nothing was sent",
            maybe_sent=False,
            permanent=True,
        )
    broken = _broken_answer(exc, host)
    if broken is not None:
        return broken
    if _first(exc, (requests.ConnectionError, u3.ProtocolError, ConnectionError)):
        return TransportError(f"connection to {host} closed without an answer", maybe_sent=True)
    return TransportError(f"request to {host} failed ({type(exc).__name__})", maybe_sent=True)


def _broken_answer(exc: BaseException, host: str) -> TransportError | None:
    """An answer that began but was cut short or is not HTTP: the request arrived."""
    if _first(exc, http.client.RemoteDisconnected):  # closed before any answer
        return None
    if _first(exc, http.client.IncompleteRead) and not _first(exc, u3.InvalidChunkLength):
        return TransportError(f"the answer from {host} was cut off", maybe_sent=True)
    malformed = _first(exc, (http.client.HTTPException, u3.DecodeError))
    if malformed is None:
        return None
    return TransportError(
        f"{host} sent an answer that is not valid HTTP ({type(malformed).__name__})",
        maybe_sent=True,
    )


def _proxy_error(exc: BaseException, host: str, proxy: str | None) -> TransportError:
    """The proxy, not the platform, failed. Never the proxy's address: it may carry a
    user and password."""
    variable = proxy or "HTTPS_PROXY or ALL_PROXY"
    tunnel = next((m for c in _causes(exc) if (m := _TUNNEL_STATUS.search(str(c)))), None)
    code = int(tunnel.group(1)) if tunnel else None
    if code == 407:
        # Trying again with the same credentials cannot help.
        return TransportError(
            f"the proxy requires authentication (407): check the user and password in "
            f"{variable} (http://USER:PASSWORD@HOST:PORT, percent-encoded)",
            maybe_sent=False,
            permanent=True,
        )
    if code == 403:
        return TransportError(
            f"the proxy refused to connect to {host} (403): check the proxy's access rules "
            f"for this host, or NO_PROXY if {host} should be reached directly",
            maybe_sent=False,
            permanent=True,
        )
    if code is not None:
        return TransportError(
            f"the proxy could not connect to {host} (it answered {code}); check the proxy "
            f"named by {variable}, or NO_PROXY for this host",
            maybe_sent=False,
        )
    return TransportError(
        f"could not reach {host} through the proxy set in the environment "
        f"({variable}); check the proxy, or NO_PROXY for this host",
        maybe_sent=False,
    )


def _untrusted_advice() -> str:
    """How to trust a private CA, true to what the environment already says."""
    for name in ("REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE"):
        named = os.environ.get(name)
        if named:
            return (
                f"; {name} names {escape(named)}, which does not hold the CA that issued "
                "this server's certificate: add that CA to it (or check that this is the "
                "server meant)"
            )
    return (
        "; for a private CA, point REQUESTS_CA_BUNDLE at its certificate (a PEM file, or a "
        "directory hashed with `openssl rehash`)"
    )


def _tls_error(exc: BaseException, host: str) -> TransportError:
    verify = _first(exc, ssl.SSLCertVerificationError)
    reason = str(getattr(_first(exc, ssl.SSLError), "reason", None) or "")
    if verify is not None:
        # OpenSSL's reason says what to fix: self-signed, expired, wrong host...
        why = redact_and_escape(
            str(getattr(verify, "verify_message", None) or "certificate not trusted")
        )
        message = f"TLS verification failed for {host} (certificate verify failed: {why})"
        code = getattr(verify, "verify_code", None)
        if code is None or code in _UNTRUSTED_ISSUER:  # not an expired or wrong-host one
            message += _untrusted_advice()
    elif reason == "WRONG_VERSION_NUMBER":
        message = f"TLS handshake with {host} failed: it does not speak TLS on this port"
    elif reason in _OLD_TLS:
        message = (
            f"TLS handshake with {host} failed: the server offers only TLS versions below "
            "this client's minimum (TLS 1.2); the server must be upgraded"
        )
    else:
        said = f" ({redact_and_escape(reason)[:80]})" if reason else ""
        message = f"TLS handshake with {host} failed{said}"
    return TransportError(message, maybe_sent=False, permanent=True)
