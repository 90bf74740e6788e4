"""The network a run talks over: where requests may go (the base URL a secret may be
sent to, invite paths), the HTTP session (requests' Session less what a run never
needs), what it trusts (the proxy the environment names, the CA bundle that
REQUESTS_CA_BUNDLE names: checked once before any request, so a bad one is one clear
configuration error at start, never a failure per request), and network failures
named by exception type, in words a user can act on.

Only a failure to connect proves the server never saw a request; every other
failure may have reached it, which decides whether a re-send may be repeated.
"""

from __future__ import annotations

import http.client
import importlib.util
import os
import re
import ssl
import stat
from collections.abc import Iterator
from contextlib import suppress
from typing import Any, NamedTuple
from urllib.parse import SplitResult, quote, urlsplit

import requests
import urllib3.exceptions as u3
from requests.adapters import HTTPAdapter
from requests.utils import select_proxy

from reconciler import __version__
from reconciler.api.exceptions import InvalidRequest, TransportError
from reconciler.errors import ConfigError
from reconciler.safetext import escape, quote_value, redact_and_escape
from reconciler.settings.contract import BASE_URL_VARIABLE, no_scheme
from reconciler.settings.contract import is_loopback_host as is_loopback_host

CONNECT_TIMEOUT = 10.0


class _IgnoredCookies(requests.cookies.RequestsCookieJar):
    """The API authenticates with bearer tokens: a cookie it sets is never kept or sent."""

    def extract_cookies(self, response: Any, request: Any) -> None:
        return None


class ProxiedSession(requests.Session):
    """A session that never follows a redirect, nor reads a 3xx body to prepare one:
    with allow_redirects=False, requests' Session.send still reads the whole body
    of a 3xx (resolve_redirects consumes it), however long the server makes it.
    It knows which variable named its proxy, for messages."""

    proxy_source: str | None = None

    def get_redirect_target(self, resp: requests.Response) -> None:
        return None


def make_session(
    base: BaseUrl | str,
    adapter: HTTPAdapter,
    ca_path: str | None = None,
    validate_certs: bool = True,
) -> ProxiedSession:
    """The run's session, sending through ``adapter``: proxies and the CA bundle read from
    the environment once, and checked now, so a bad one is one clear configuration error,
    not a failure per request. ``ca_path`` (set by code: the Ansible module's option of
    that name) takes the place of REQUESTS_CA_BUNDLE; ``validate_certs`` False trusts any
    certificate and sends through no proxy, whatever HTTPS_PROXY says (the module allows
    it for a loopback host only: this machine, which a proxy would stand in front of)."""
    if isinstance(base, str):
        base = parse_base_url(base)
    session = ProxiedSession()
    session.mount("https://", adapter)
    session.mount("http://", adapter)
    session.headers["User-Agent"] = f"invite-reconciler/{__version__}"
    session.headers["Accept"] = "application/json"
    # Answers are a few KiB: compression saves nothing, and a compressed body is
    # one more way for a server to make a small answer large once decoded.
    session.headers["Accept-Encoding"] = "identity"
    # requests re-reads proxies and the CA bundle from the environment on every
    # request, scanning os.environ each time; read them once per run instead.
    try:
        environment = session.merge_environment_settings(base.text, {}, None, None, None)
        # Plain http:// is allowed only because the host is this machine; a proxy
        # would carry the form with the client secret, in clear, to another one.
        # Decided on the parsed scheme: `HTTP://127.0.0.1` is plain http too. Nor with
        # validate_certs False (allowed for a loopback host only, this machine): a proxy
        # could answer the tunnel with any certificate and read the secret.
        proxied = base.scheme == "https" and validate_certs
        proxy = select_proxy(base.text, environment["proxies"]) if proxied else None
        if proxy:
            urlsplit(proxy if "://" in proxy else f"http://{proxy}").port  # noqa: B018
    except ValueError:  # a proxy URL urllib cannot parse ("[" in its password, a bad port)
        # Never shown: its user info may hold a password.
        raise ConfigError(
            "a proxy variable (HTTPS_PROXY, ALL_PROXY or NO_PROXY, in either case) is not a "
            "valid URL: check its port, and percent-encode any of :@/[]% in its user and password"
        ) from None
    if base.scheme == "https":
        if proxy:
            # Lower case wins, as in urllib's getproxies.
            names = ("https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY")
            session.proxy_source = _named_by(proxy, names, "HTTPS_PROXY")
            check_proxy(proxy, session.proxy_source)
            session.proxies = {"https": proxy}
        if not validate_certs:
            session.verify = False
        elif ca_path is not None:
            session.verify = checked_verify(ca_path, "ca_path")
        else:
            session.verify = checked_verify(environment["verify"])
    session.trust_env = False
    session.cookies = _IgnoredCookies()
    return session


_SOCKS = ("socks4", "socks4a", "socks5", "socks5h")


_CA_BUNDLE_LIMIT = 64 * 2**20


def _named_by(value: str, names: tuple[str, ...], default: str) -> str:
    """The first of the variables ``names`` that holds ``value``, else ``default``."""
    return next((name for name in names if os.environ.get(name) == value), default)


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


def checked_verify(verify: Any, variable: str | None = None) -> Any:
    """The CA bundle that REQUESTS_CA_BUNDLE (or CURL_CA_BUNDLE, or ``variable``) names,
    checked now."""
    if not isinstance(verify, str):
        return verify
    bundles = ("REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE")
    variable = variable or _named_by(verify, bundles, bundles[0])
    shown = f"{variable} names {escape(verify)}"
    try:
        status = os.stat(verify)
    except FileNotFoundError:
        raise ConfigError(f"{shown}, which does not exist") from None
    except OSError as exc:
        raise ConfigError(f"{shown}, which cannot be read ({exc.strerror})") from None
    if stat.S_ISDIR(status.st_mode):
        return _checked_ca_directory(verify, shown)
    return _checked_ca_file(verify, status, shown)


def _checked_ca_file(verify: str, status: os.stat_result, shown: str) -> str:
    """A PEM file of CA certificates: regular, within its bound, holding one at least."""
    if not stat.S_ISREG(status.st_mode):
        raise ConfigError(f"{shown}, which is not a regular file")
    if status.st_size > _CA_BUNDLE_LIMIT:
        raise ConfigError(
            f"{shown}, which is larger than {_CA_BUNDLE_LIMIT // 2**20} MiB; "
            "a CA bundle is a PEM file of certificates"
        )
    try:
        held = _certificates_in(verify)
    except OSError as exc:
        raise ConfigError(f"{shown}, which cannot be read ({exc.strerror})") from None
    if not held:
        raise ConfigError(
            f"{shown}, which holds no certificate; it must be a PEM file of the CA "
            "certificates to trust (-----BEGIN CERTIFICATE-----)"
        )
    return verify


def _certificates_in(path: str) -> int:
    """How many certificates OpenSSL loads from the PEM file ``path`` (0: none, or not
    PEM at all)."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    try:
        context.load_verify_locations(cafile=path)
    except ssl.SSLError:
        return 0
    return int(context.cert_store_stats().get("x509", 0))


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
    for candidate in _regular_hashed(path, names, shown, advice)[:20]:
        with suppress(OSError):
            if os.path.getsize(candidate) <= _CA_BUNDLE_LIMIT and _certificates_in(candidate):
                return path
    raise ConfigError(f"{shown}, a directory whose hashed names hold no certificate; {advice}")


def _regular_hashed(path: str, names: list[str], shown: str, advice: str) -> list[str]:
    """The hashed names' paths that are regular files; one that is not is refused."""
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
    return regular


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
    exc: BaseException,
    host: str,
    timeout: float,
    proxy: str | None = None,
    base_url_source: str = BASE_URL_VARIABLE,
) -> TransportError:
    """What went wrong on the network, in words a user can act on; ``proxy`` is the
    variable that named the proxy, if one is used, ``base_url_source`` what set the URL."""
    unsent = _unsent_failure(exc, host, timeout, proxy, base_url_source)
    if unsent is not None:
        return unsent
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


def _unsent_failure(
    exc: BaseException, host: str, timeout: float, proxy: str | None, source: str
) -> TransportError | None:
    """A failure before the request could reach the server (the proxy, TLS, the name,
    the connection), or None."""
    if _first(exc, (u3.ProxyError, requests.exceptions.ProxyError)):
        return _proxy_error(exc, host, proxy)
    if _first(exc, (ssl.SSLError, u3.SSLError, requests.exceptions.SSLError)):
        return _tls_error(exc, host)
    if _first(exc, u3.NameResolutionError):
        return TransportError(
            f"cannot resolve the host of {host}; check {source}", maybe_sent=False
        )
    # NewConnectionError is a ConnectTimeoutError in urllib3: look for it first.
    if _first(exc, (u3.NewConnectionError, ConnectionRefusedError)):
        why = " (connection refused)" if _first(exc, ConnectionRefusedError) else ""
        return TransportError(f"could not connect to {host}{why}; check {source}", maybe_sent=False)
    if _first(exc, (u3.ConnectTimeoutError, requests.exceptions.ConnectTimeout)):
        return TransportError(f"could not connect to {host} within {timeout:g}s", maybe_sent=False)
    return None


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


class BaseUrl(NamedTuple):
    """The base URL as parsed once: every decision (scheme, loopback, proxy) reads these
    parts, never the text as it was written (`` HTTP://127.0.0.1``)."""

    scheme: str  # "http" or "https", lower case
    host: str  # lower case; an IPv6 address without brackets
    port: int | None
    path: str  # without a trailing slash

    @property
    def netloc(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return host if self.port is None else f"{host}:{self.port}"

    @property
    def text(self) -> str:
        """The normalised URL requests are built on."""
        return f"{self.scheme}://{self.netloc}{self.path}"

    @property
    def is_loopback(self) -> bool:
        return is_loopback_host(self.host)


def parse_base_url(base_url: str) -> BaseUrl:
    """The base URL parsed and normalised once, if it is safe to send a secret to.

    Surrounding whitespace is dropped and scheme and host are lower-cased; what is
    left is checked and kept as parts. Errors show only scheme, host and path: the
    user info or query string of a refused URL is exactly where a credential would sit.
    """
    written = base_url.strip()
    said = no_scheme(written) if "://" not in written else None
    if said:
        raise ConfigError(f"base_url {said}")
    try:
        parts = urlsplit(written)
        parts.port  # noqa: B018 - parsing the port is what raises for a bad one
    except ValueError:
        scheme = escape(written.partition(":")[0][:20])
        raise ConfigError(
            f"base_url ({scheme}://...) is not a valid URL; set RECONCILER_BASE_URL"
        ) from None
    refused = _refused_base(parts, written)
    if refused:
        raise ConfigError(f"base_url {quote_value(_scheme_host_path(parts), limit=None)} {refused}")
    assert parts.hostname is not None  # refused without one
    return BaseUrl(parts.scheme, parts.hostname, parts.port, parts.path.rstrip("/"))


def _refused_base(parts: SplitResult, written: str) -> str | None:
    """Why a secret may not be sent to this base URL (None: it may)."""
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return "is not an http(s) URL"
    if parts.username is not None or parts.password is not None:
        return (
            "must not carry credentials (user info before the host); "
            "use RECONCILER_CLIENT_ID and RECONCILER_CLIENT_SECRET"
        )
    if parts.query or parts.fragment or written.endswith(("?", "#")):
        return "must not have a query string or fragment"
    if any(c.isspace() or not c.isprintable() for c in written):
        # urlsplit silently drops tabs and line breaks: what it parsed is not what was written.
        return "holds whitespace or a control character"
    if parts.scheme == "http" and not is_loopback_host(parts.hostname):
        return _typo_of_localhost(parts.hostname) or (
            "uses plain http://, which would send the client secret and tokens unencrypted; "
            "use https:// (http:// is allowed only for loopback hosts such as 127.0.0.1, "
            "where the sandbox runs)"
        )
    return None


def _typo_of_localhost(host: str) -> str | None:
    """`http://locahost:8787` meant the sandbox: say so, not "use https://"."""
    from difflib import SequenceMatcher

    if host == "localhost" or SequenceMatcher(None, host, "localhost").ratio() < 0.8:
        return None
    return (
        f"uses plain http:// to {quote_value(host, limit=None)}, which is not a loopback "
        "host: a typo of localhost? (http:// is allowed only for loopback hosts such as "
        "127.0.0.1, where the sandbox runs; any other host needs https://)"
    )


def _scheme_host_path(parts: SplitResult) -> str:
    """What a message may show of a URL: never its user info, query or fragment."""
    return BaseUrl(parts.scheme, parts.hostname or "", parts.port, parts.path).text


def invite_path(template: str, invite_id: str) -> str:
    """The template with the id percent-encoded into it as one segment (a template is a
    plain path, `{inviteId}` a whole segment of it: settings.contract.path_problem)."""
    if not invite_id.strip("."):
        # URL normalisation would turn "." and ".." into other resources' paths.
        raise InvalidRequest(
            f"invite id {quote_value(invite_id, limit=None)} cannot be used in a URL"
        )
    return template.replace("{inviteId}", quote(invite_id, safe=""))


def host_of(url: str) -> str:
    """The host (and port) of a URL, for messages; never its user info or query."""
    try:
        parts = urlsplit(url)
        port = f":{parts.port}" if parts.port is not None else ""
    except ValueError:
        return "an unreadable address"
    return f"{parts.hostname}{port}" if parts.hostname else "the same host"
