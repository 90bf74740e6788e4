"""The HTTP session of a run, and network failures named by exception type.

Only a failure to connect proves the server never saw a request; every other
failure may have reached it, which decides whether a re-send may be repeated.
"""

from __future__ import annotations

import http.client
import ssl
from collections.abc import Iterator
from typing import Any

import requests
import urllib3.exceptions as u3

from reconciler import __version__
from reconciler.api.exceptions import TransportError
from reconciler.api.http.deadline import GuardedAdapter

CONNECT_TIMEOUT = 10.0


class _IgnoredCookies(requests.cookies.RequestsCookieJar):
    """The API authenticates with bearer tokens: a cookie it sets is never kept or sent,
    which also spares parsing Set-Cookie on every answer."""

    def extract_cookies(self, response: Any, request: Any) -> None:
        return None


class _NeverRedirects(requests.Session):
    """A session that never follows a redirect, nor reads a 3xx body to prepare one:
    with allow_redirects=False, requests' Session.send still reads the whole body
    of a 3xx (resolve_redirects consumes it), however long the server makes it."""

    def get_redirect_target(self, resp: requests.Response) -> None:
        return None


def make_session(base_url: str, parallelism: int) -> requests.Session:
    session = _NeverRedirects()
    adapter = GuardedAdapter(pool_connections=2, pool_maxsize=max(parallelism, 4), max_retries=0)
    session.mount("https://", adapter)
    session.mount("http://", adapter)
    session.headers["User-Agent"] = f"invite-reconciler/{__version__}"
    session.headers["Accept"] = "application/json"
    # Answers are a few KiB: compression saves nothing, and a compressed body is
    # one more way for a server to make a small answer large once decoded.
    session.headers["Accept-Encoding"] = "identity"
    # requests re-reads proxies and the CA bundle from the environment on every
    # request, scanning os.environ each time; read them once per run instead.
    environment = session.merge_environment_settings(base_url, {}, None, None, None)
    # Plain http:// is allowed only because the host is this machine; a proxy
    # would carry the form with the client secret, in clear, to another one.
    if not base_url.startswith("http://"):
        session.proxies.update(environment["proxies"])
    session.verify = environment["verify"]
    session.trust_env = False
    session.cookies = _IgnoredCookies()
    return session


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


def transport_error(exc: BaseException, host: str, timeout: float) -> TransportError:
    """What went wrong on the network, in words a user can act on."""
    if _first(exc, (ssl.SSLError, u3.SSLError, requests.exceptions.SSLError)):
        return _tls_error(exc, host)
    if _first(exc, (u3.ProxyError, requests.exceptions.ProxyError)):
        # Never the proxy's address: it may carry a user and password.
        return TransportError(
            f"could not reach {host} through the proxy set in the environment "
            "(HTTPS_PROXY or ALL_PROXY); check the proxy, or NO_PROXY for this host",
            maybe_sent=False,
        )
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


def _tls_error(exc: BaseException, host: str) -> TransportError:
    verify = _first(exc, ssl.SSLCertVerificationError)
    if verify is not None:
        # OpenSSL's reason says what to fix: self-signed, expired, wrong host...
        reason = getattr(verify, "verify_message", None) or "certificate not trusted"
        message = (
            f"TLS verification failed for {host} (certificate verify failed: {reason}); "
            "for a private CA, point REQUESTS_CA_BUNDLE at its certificate"
        )
    elif getattr(_first(exc, ssl.SSLError), "reason", None) == "WRONG_VERSION_NUMBER":
        message = f"TLS handshake with {host} failed: it does not speak TLS on this port"
    else:
        message = f"TLS handshake with {host} failed"
    return TransportError(message, maybe_sent=False, permanent=True)
