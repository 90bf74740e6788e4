"""A network failure is named in words a user can act on, and says whether the
request may have reached the server: that decides whether a re-send is repeated.

Failures come from real sockets on 127.0.0.1 where one can be made to fail that
way; the others are built the way requests and urllib3 nest them.

What a user is told about a base URL the client secret may not be sent to, and
about an invite id no URL can carry: the whole message, showing only scheme,
host, port and path of the URL (never user info, query or fragment).
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import socket
import ssl
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import certifi
import pytest
import requests
import urllib3.exceptions as u3
from support.loopback import serving

from reconciler.api.exceptions import InvalidRequest, TransportError
from reconciler.api.exchange import GuardedAdapter
from reconciler.api.network import (
    ProxiedSession,
    invite_path,
    make_session,
    parse_base_url,
    transport_error,
)
from reconciler.errors import ConfigError

HOST = "127.0.0.1"
URL = "/v1/invites/inv_1"


@contextmanager
def listener(on_connect: Callable[[socket.socket], None]) -> Iterator[str]:
    """``host:port`` of a server on 127.0.0.1 that hands each connection to ``on_connect``."""

    def handle(conn: socket.socket, done: threading.Event) -> None:
        with conn:
            on_connect(conn)

    with serving(handle) as address:
        yield address


def session(url: str = "https://api.example", validate_certs: bool = True) -> ProxiedSession:
    return make_session(url, GuardedAdapter(), validate_certs=validate_certs)


def environ(monkeypatch: pytest.MonkeyPatch, unset: str = "", **values: str) -> None:
    """The variables named in ``unset`` (space-separated) removed, ``values`` set."""
    for name in unset.split():
        monkeypatch.delenv(name, raising=False)
    for name, value in values.items():
        monkeypatch.setenv(name, value)


def failure(url: str, timeout: float = 5.0, **kwargs: object) -> TransportError:
    with pytest.raises(requests.RequestException) as failed:
        session(url).get(url, timeout=(timeout, timeout), **kwargs)  # type: ignore[arg-type]
    return transport_error(failed.value, "the platform", timeout)


def said_and_sent(error: TransportError, said: str, maybe_sent: bool, permanent: bool) -> None:
    assert str(error) == said
    assert (error.maybe_sent, error.permanent) == (maybe_sent, permanent)


def closed_port() -> int:
    with socket.create_server((HOST, 0)) as probe:
        return int(probe.getsockname()[1])


def test_a_closed_port_is_refused_and_certainly_not_sent():
    error = failure(f"http://{HOST}:{closed_port()}{URL}")
    said = "could not connect to the platform (connection refused); check RECONCILER_BASE_URL"
    said_and_sent(error, said, False, False)


def answering(raw: bytes) -> Callable[[socket.socket], None]:
    def answer(conn: socket.socket) -> None:
        conn.recv(65536)
        conn.sendall(raw)

    return answer


NOT_GZIP = b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: 5\r\n\r\nhello"
NOT_HTTP = "the platform sent an answer that is not valid HTTP"
ANSWERS = {  # id: (what the server sends, what the user is told)
    "closed": (b"", "connection to the platform closed without an answer"),
    "cut-off": (
        b'HTTP/1.1 200 OK\r\nContent-Length: 500\r\n\r\n{"success": true',
        "the answer from the platform was cut off",
    ),
    "bad-status": (b"HTTP/1.1 abc OK\r\n\r\n", f"{NOT_HTTP} (BadStatusLine)"),
    "no-status-line": (b'{"data": {}}', f"{NOT_HTTP} (BadStatusLine)"),
    "endless-header": (
        b"HTTP/1.1 200 OK\r\nX: " + b"a" * 100_000 + b"\r\n\r\n",
        f"{NOT_HTTP} (LineTooLong)",
    ),
    "not-gzip": (NOT_GZIP, f"{NOT_HTTP} (DecodeError)"),
    "bad-chunk-size": (
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
        f"{NOT_HTTP} (InvalidChunkLength)",
    ),
}


@pytest.mark.parametrize(("raw", "said"), list(ANSWERS.values()), ids=list(ANSWERS))
def test_an_answer_closed_cut_off_or_not_http_says_so_and_may_have_been_received(raw, said):
    with listener(answering(raw)) as address:
        error = failure(f"http://{address}{URL}")
    said_and_sent(error, said, True, False)


def test_a_server_that_never_answers_may_have_received_the_request():
    gave_up = threading.Event()

    def say_nothing(conn: socket.socket) -> None:
        conn.recv(65536)
        gave_up.wait(5)  # hold the connection open until the client gave up

    with listener(say_nothing) as address:
        error = failure(f"http://{address}{URL}", timeout=0.3)
        gave_up.set()
    said_and_sent(error, "no answer from the platform within 0.3s", True, False)


def test_https_to_a_plain_http_port_is_a_handshake_failure_not_retried():
    with listener(answering(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")) as address:
        error = failure(f"https://{address}{URL}")
    said = "TLS handshake with the platform failed: it does not speak TLS on this port"
    said_and_sent(error, said, False, True)


def test_a_header_that_cannot_be_sent_is_permanent_and_never_left():
    with socket.create_server((HOST, 0)) as probe:
        url = f"http://{HOST}:{probe.getsockname()[1]}{URL}"
        error = failure(url, headers={"Authorization": "Bearer a\r\nX-Evil: 1"})
    said = "request to the platform could not be built (InvalidHeader); nothing was sent"
    said_and_sent(error, said, False, True)


def wrapped_as_requests_does(reason: BaseException, outer: type[Exception]) -> Exception:
    pool_error = u3.MaxRetryError(None, URL, reason)  # type: ignore[arg-type]
    return outer(pool_error)


def chained(outer: BaseException, cause: BaseException) -> BaseException:
    """``outer`` as ``raise outer from cause`` inside ``except cause`` leaves it."""
    outer.__cause__ = outer.__context__ = cause
    return outer


def cycle() -> BaseException:
    first, second = RuntimeError("a"), RuntimeError("b")
    first.__context__, second.__context__ = second, first
    return first


def unverified(message: str | None = None, code: int | None = None) -> Exception:
    verify = ssl.SSLCertVerificationError(1, "certificate verify failed")
    if message is not None:
        verify.verify_message = message
    if code is not None:
        verify.verify_code = code
    return wrapped_as_requests_does(u3.SSLError(verify), requests.exceptions.SSLError)


def handshake(reason: str | None) -> Exception:
    failed = ssl.SSLError(1, "alert")
    if reason is not None:
        failed.reason = reason
    return wrapped_as_requests_does(u3.SSLError(failed), requests.ConnectionError)


REFUSED = "could not connect to api.example (connection refused); check RECONCILER_BASE_URL"
VERIFY = "TLS verification failed for api.example (certificate verify failed: "
PRIVATE_CA = (
    "; for a private CA, point REQUESTS_CA_BUNDLE at its certificate "
    "(a PEM file, or a directory hashed with `openssl rehash`)"
)
NOT_IN_BUNDLE = (
    "; REQUESTS_CA_BUNDLE names /etc/ssl/private-ca, which does not hold the CA that issued "
    "this server's certificate: add that CA to it (or check that this is the server meant)"
)
TOO_OLD = (
    "TLS handshake with api.example failed: the server offers only TLS versions below this "
    "client's minimum (TLS 1.2); the server must be upgraded"
)
ISSUER = "unable to get local issuer certificate"
TLS = {  # id: (the failure, REQUESTS_CA_BUNDLE, what the user is told)
    "verify-says-how-to-trust-a-private-ca": (
        unverified("self-signed certificate"),
        None,
        VERIFY + "self-signed certificate)" + PRIVATE_CA,
    ),
    # a CA bundle set: never told to set it
    "verify-with-a-ca-bundle-set": (
        unverified(ISSUER, 20),
        "/etc/ssl/private-ca",
        VERIFY + ISSUER + ")" + NOT_IN_BUNDLE,
    ),
    "no-reason": (unverified(), None, VERIFY + "certificate not trusted)" + PRIVATE_CA),
    # no private CA makes an expired certificate good
    "expired": (
        unverified("certificate has expired", 10),
        None,
        VERIFY + "certificate has expired)",
    ),
    "tls": (handshake(None), None, "TLS handshake with api.example failed"),
    "unsupported-protocol": (handshake("UNSUPPORTED_PROTOCOL"), None, TOO_OLD),
    "alert-version": (handshake("TLSV1_ALERT_PROTOCOL_VERSION"), None, TOO_OLD),
    "openssl-reason": (
        handshake("SSLV3_ALERT_HANDSHAKE_FAILURE"),
        None,
        "TLS handshake with api.example failed (SSLV3_ALERT_HANDSHAKE_FAILURE)",
    ),
}


@pytest.mark.parametrize(("exc", "ca_bundle", "said"), list(TLS.values()), ids=list(TLS))
def test_a_tls_failure_says_why_is_permanent_and_was_never_sent(monkeypatch, exc, ca_bundle, said):
    environ(monkeypatch, "CURL_CA_BUNDLE REQUESTS_CA_BUNDLE")
    if ca_bundle is not None:
        monkeypatch.setenv("REQUESTS_CA_BUNDLE", ca_bundle)
    said_and_sent(transport_error(exc, "api.example", 30), said, False, True)


UNKNOWN = "request to api.example failed (RuntimeError)"
NOT_RESOLVED = u3.NameResolutionError(
    "nowhere.invalid",
    None,  # type: ignore[arg-type]
    socket.gaierror(-2, "Name or service not known"),
)
UNREACHABLE = u3.MaxRetryError(
    None,  # type: ignore[arg-type]
    "/v1",
    u3.NewConnectionError(None, "[Errno 101] Network is unreachable"),  # type: ignore[arg-type]
)
CONNECT_TIMEOUT = u3.ConnectTimeoutError(None, "timed out")
NESTED = {  # id: (the failure, the timeout, what the user is told, whether it may have left)
    "host-does-not-resolve": (
        wrapped_as_requests_does(NOT_RESOLVED, requests.ConnectionError),
        30,
        "cannot resolve the host of api.example; check RECONCILER_BASE_URL",
        False,
    ),
    "connect-timeout-names-the-time": (
        wrapped_as_requests_does(CONNECT_TIMEOUT, requests.exceptions.ConnectTimeout),
        2.5,
        "could not connect to api.example within 2.5s",
        False,
    ),
    "no-known-kind": (RuntimeError("odd"), 30, UNKNOWN, True),
    "causes-in-a-cycle": (cycle(), 30, UNKNOWN, True),
    "refused-found-through-the-chain": (
        chained(RuntimeError("wrapped"), ConnectionRefusedError(111, "refused")),
        30,
        REFUSED,
        False,
    ),
    # no more than it knows: not "refused"
    "unreachable": (
        requests.ConnectionError(UNREACHABLE),
        30,
        "could not connect to api.example; check RECONCILER_BASE_URL",
        False,
    ),
    # every cause counts, not only the first one wrapped
    "refused-beside-another-cause": (
        chained(
            requests.ConnectionError(u3.ProtocolError("Connection aborted.")),
            ConnectionRefusedError(111, "refused"),
        ),
        30,
        REFUSED,
        False,
    ),
}


@pytest.mark.parametrize(
    ("exc", "timeout", "said", "maybe_sent"), list(NESTED.values()), ids=list(NESTED)
)
def test_a_failure_built_as_requests_nests_it_is_named_and_says_if_it_may_have_been_sent(
    exc, timeout, said, maybe_sent
):
    said_and_sent(transport_error(exc, "api.example", timeout), said, maybe_sent, False)


PROXY_REFUSALS = {  # id: (the proxy's status line, what the user is told, permanent)
    "407": (
        "407 Proxy Authentication Required",
        "the proxy requires authentication (407): check the user and password in "
        "https_proxy (http://USER:PASSWORD@HOST:PORT, percent-encoded)",
        True,
    ),
    "403": (
        "403 Forbidden",
        "the proxy refused to connect to the platform (403): check the proxy's access "
        "rules for this host, or NO_PROXY if the platform should be reached directly",
        True,
    ),
    "502": (
        "502 Bad Gateway",
        "the proxy could not connect to the platform (it answered 502); check the proxy "
        "named by https_proxy, or NO_PROXY for this host",
        False,
    ),
}


@pytest.mark.parametrize(
    ("status", "said", "permanent"), list(PROXY_REFUSALS.values()), ids=list(PROXY_REFUSALS)
)
def test_a_proxy_refusing_the_tunnel_is_named_with_its_status_and_never_its_password(
    monkeypatch, status, said, permanent
):
    seen: list[bytes] = []

    def refuse_the_tunnel(conn: socket.socket) -> None:
        seen.append(conn.recv(65536).split(b"\r\n")[0])
        conn.sendall(f"HTTP/1.1 {status}\r\nContent-Length: 0\r\n\r\n".encode())

    with listener(refuse_the_tunnel) as address:
        environ(monkeypatch, "HTTPS_PROXY NO_PROXY", https_proxy=f"http://ci:pr0xy-pass@{address}")
        url = f"https://api.example{URL}"
        proxied = session(url)
        with pytest.raises(requests.RequestException) as failed:
            proxied.get(url, timeout=(5, 5))
        error = transport_error(failed.value, "the platform", 5, proxied.proxy_source)
    assert seen == [b"CONNECT api.example:443 HTTP/1.0"]
    # 407 and 403 are the proxy's policy: trying again cannot help.
    said_and_sent(error, said, False, permanent)


def test_a_proxy_that_refuses_connections_is_named_not_the_platform(monkeypatch):
    environ(monkeypatch, "NO_PROXY", HTTPS_PROXY=f"http://user:pr0xy-pass@{HOST}:{closed_port()}")
    error = failure(f"https://api.example{URL}")
    assert "through the proxy set in the environment" in str(error)
    assert "pr0xy-pass" not in str(error) and error.maybe_sent is False


# -- what a session is made with ------------------------------------------------------


def test_https_requests_go_through_the_adapter_that_keeps_the_deadline():
    made = session()
    assert isinstance(made.get_adapter("https://api.example/v1/x"), GuardedAdapter)
    assert isinstance(made.get_adapter("http://127.0.0.1:8080/v1/x"), GuardedAdapter)


def test_certificates_are_verified_against_the_ca_bundle_the_environment_names(
    monkeypatch, tmp_path
):
    environ(monkeypatch, "REQUESTS_CA_BUNDLE CURL_CA_BUNDLE")
    assert session().verify is True
    bundle = tmp_path / "private-ca.pem"
    shutil.copy(certifi.where(), bundle)
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(bundle))
    assert session().verify == str(bundle)


OK_EMPTY = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}"


def test_plain_http_to_this_machine_never_goes_through_a_proxy(monkeypatch):
    # A proxy would carry the token request's client secret, in clear, off this machine.
    proxied: list[bytes] = []

    def proxy(conn: socket.socket) -> None:
        proxied.append(conn.recv(65536))

    with listener(proxy) as proxy_address, listener(answering(OK_EMPTY)) as address:
        via = f"http://{proxy_address}"
        environ(monkeypatch, "NO_PROXY no_proxy", HTTP_PROXY=via, http_proxy=via)
        environ(monkeypatch, ALL_PROXY=via, all_proxy=via)
        url = f"http://{address}{URL}"
        answer = session(url).get(url, timeout=5)
    assert answer.status_code == 200 and proxied == []


def test_with_validate_certs_false_no_proxy_carries_the_request_whatever_the_environment(
    monkeypatch,
):
    # Any certificate is trusted then: a proxy (another machine) could end the TLS itself
    # and read the token request's client secret. The host is loopback: this machine.
    proxied: list[bytes] = []
    reached: list[bytes] = []

    def proxy(conn: socket.socket) -> None:
        proxied.append(conn.recv(65536))

    def platform(conn: socket.socket) -> None:
        reached.append(conn.recv(65536))  # the TLS ClientHello; closed without an answer

    with listener(proxy) as proxy_address, listener(platform) as address:
        via = f"http://{proxy_address}"
        environ(monkeypatch, "NO_PROXY no_proxy", HTTPS_PROXY=via, https_proxy=via)
        environ(monkeypatch, ALL_PROXY=via, all_proxy=via)
        url = f"https://{address}{URL}"
        unchecked = session(url, validate_certs=False)
        assert (unchecked.proxies, unchecked.proxy_source, unchecked.verify) == ({}, None, False)
        with pytest.raises(requests.RequestException):
            unchecked.get(url, timeout=5)
        checked = session(url)
    assert proxied == [] and reached and reached[0][:1] == b"\x16"  # a TLS handshake record
    assert checked.proxies == {"https": via}


@pytest.mark.parametrize(
    "written",
    [
        "http://127.0.0.1:8787",
        " HTTP://127.0.0.1:8787",
        "HTTP://127.0.0.1:8787/",
        "\thttp://LOCALHOST:8787",
    ],
)
def test_plain_http_is_decided_on_the_parsed_url_not_the_text_as_written(monkeypatch, written):
    # `HTTP://` or a leading space once sent the token form, in clear, to HTTP_PROXY.
    proxy = "http://proxy.example:3128"
    environ(monkeypatch, HTTP_PROXY=proxy, HTTPS_PROXY=proxy, ALL_PROXY=proxy)
    assert session(written).proxies == {}


def test_only_the_proxy_for_the_platform_is_kept_and_the_variable_that_named_it(monkeypatch):
    environ(
        monkeypatch,
        "HTTPS_PROXY https_proxy NO_PROXY no_proxy",
        ALL_PROXY="http://proxy.example:3128",
    )
    made = session()
    assert (made.proxies, made.proxy_source) == (
        {"https": "http://proxy.example:3128"},
        "ALL_PROXY",
    )
    monkeypatch.setenv("NO_PROXY", "api.example")
    assert session("https://API.example").proxies == {}


def test_a_socks_proxy_without_pysocks_is_one_configuration_error(monkeypatch):
    if importlib.util.find_spec("socks") is not None:
        pytest.skip("PySocks is installed here")
    environ(
        monkeypatch, "HTTPS_PROXY https_proxy", ALL_PROXY="socks5://user:s0cks-pass@127.0.0.1:1080"
    )
    with pytest.raises(ConfigError) as refused:
        session()
    assert str(refused.value) == (
        "ALL_PROXY names a SOCKS proxy (socks5://...), which needs the PySocks package: "
        "install it (pip install 'requests[socks]'), or use an http:// proxy"
    )


def test_a_proxy_of_an_unknown_scheme_is_refused_without_showing_it(monkeypatch):
    monkeypatch.setenv("HTTPS_PROXY", "ftp://user:pw@proxy.example")
    with pytest.raises(ConfigError, match=r"HTTPS_PROXY names a proxy of scheme ftp://") as no:
        session()
    assert "pw" not in str(no.value)


BUNDLES = {  # id: (the file's content, or None for no file; what is said of it)
    "missing": (None, "which does not exist"),
    "empty": (b"", "which holds no certificate"),
    "damaged": (b"-----BEGIN CERTIFICATE-----\nnot base64\n-----END CERTIFICATE-----\n", "no cert"),
    "text": (b"just some text\n", "which holds no certificate"),
}


@pytest.mark.parametrize(("content", "said"), list(BUNDLES.values()), ids=list(BUNDLES))
def test_a_ca_bundle_that_cannot_be_used_is_said_at_start(monkeypatch, tmp_path, content, said):
    bundle = tmp_path / "ca.pem"
    if content is not None:
        bundle.write_bytes(content)
    environ(monkeypatch, "CURL_CA_BUNDLE", REQUESTS_CA_BUNDLE=str(bundle))
    with pytest.raises(ConfigError) as refused:
        session()
    assert str(refused.value).startswith(f"REQUESTS_CA_BUNDLE names {bundle}, ")
    assert said in str(refused.value)
    # The sandbox's plain http:// needs no CA: nothing to refuse.
    assert session("http://127.0.0.1:8787").verify is not None


def test_a_ca_bundle_that_is_a_fifo_is_refused_not_waited_on(monkeypatch, tmp_path):
    fifo = tmp_path / "ca.pem"
    os.mkfifo(fifo)
    environ(monkeypatch, "REQUESTS_CA_BUNDLE", CURL_CA_BUNDLE=str(fifo))
    with pytest.raises(ConfigError, match=r"CURL_CA_BUNDLE names .*, which is not a regular file"):
        session()


@pytest.mark.parametrize(
    "proxy", ["http://ci:p[w@127.0.0.1:3128", "http://127.0.0.1:99999", "http://u:\x1b]0;x\x07@h"]
)
def test_a_proxy_url_that_does_not_parse_is_a_configuration_error_never_shown(monkeypatch, proxy):
    # Once a ValueError traceback that showed part of the password.
    monkeypatch.setenv("HTTPS_PROXY", proxy)
    with pytest.raises(ConfigError) as refused:
        session()
    assert str(refused.value) == (
        "a proxy variable (HTTPS_PROXY, ALL_PROXY or NO_PROXY, in either case) is not a valid "
        "URL: check its port, and percent-encode any of :@/[]% in its user and password"
    )


def ca_directory(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, names: dict[str, bytes]) -> Path:
    """A directory holding ``names``, named by REQUESTS_CA_BUNDLE."""
    directory = tmp_path / "certs"
    directory.mkdir()
    for name, content in names.items():
        (directory / name).write_bytes(content)
    environ(monkeypatch, "CURL_CA_BUNDLE", REQUESTS_CA_BUNDLE=str(directory))
    return directory


@pytest.mark.parametrize(
    ("names", "said"),
    [
        ({}, "a directory with no certificate under a hashed name (HASH.0"),
        ({"private-ca.pem": b"PEM"}, "a directory with no certificate under a hashed name"),
        ({"0123abcd.0": b"not a certificate"}, "a directory whose hashed names hold no certif"),
    ],
    ids=["empty", "not-hashed", "no-certificate"],
)
def test_a_ca_directory_that_cannot_be_used_is_refused_at_start(monkeypatch, tmp_path, names, said):
    directory = ca_directory(monkeypatch, tmp_path, names)
    with pytest.raises(ConfigError) as refused:
        session()
    assert str(refused.value).startswith(f"REQUESTS_CA_BUNDLE names {directory}, ")
    assert said in str(refused.value) and "openssl rehash" in str(refused.value)


def test_a_hashed_ca_directory_is_accepted(monkeypatch, tmp_path):
    from support.tls import make_certificates

    ca = make_certificates(tmp_path / "tls").ca.read_bytes()
    directory = ca_directory(monkeypatch, tmp_path, {"README": b"x", "0123abcd.0": ca})
    assert session().verify == str(directory)


PLAIN_HTTP = (
    "uses plain http://, which would send the client secret and tokens unencrypted; "
    "use https:// (http:// is allowed only for loopback hosts such as 127.0.0.1, "
    "where the sandbox runs)"
)
QUERY = "must not have a query string or fragment"
TYPO = (
    "uses plain http:// to '{}', which is not a loopback host: a typo of localhost? "
    "(http:// is allowed only for loopback hosts such as 127.0.0.1, where the sandbox runs; "
    "any other host needs https://)"
)
CREDENTIALS = (
    "must not carry credentials (user info before the host); "
    "use RECONCILER_CLIENT_ID and RECONCILER_CLIENT_SECRET"
)
NOT_VALID = "is not a valid URL; set RECONCILER_BASE_URL"
NOT_AN_HTTP_URL = "is not an http(s) URL"


def shown(url: str, why: str) -> str:
    return f"'{url}' {why}"


def no_scheme(written: str, meant: str) -> str:
    return f"'{written}' has no scheme; did you mean '{meant}'?"


EXAMPLE = "https://api.example.com"


# What follows `base_url `: only scheme, host, port and path of the URL are shown, never
# user info, query or fragment (the "hunter2pw" of these URLs).
@pytest.mark.parametrize(
    ("url", "said"),
    [
        ("https://api.example.com:99999", f"(https://...) {NOT_VALID}"),
        ("x" * 30 + "://h:port", f"({'x' * 20}://...) {NOT_VALID}"),
        ("ftp://api.example.com/x", shown("ftp://api.example.com/x", NOT_AN_HTTP_URL)),
        ("https:///platform", shown("https:///platform", NOT_AN_HTTP_URL)),
        ("ftp://user:hunter2pw@api.example.com", shown("ftp://api.example.com", NOT_AN_HTTP_URL)),
        ("https://ci:pw@api.example.com/p", shown(EXAMPLE + "/p", CREDENTIALS)),
        ("https://reconciler-ci:hunter2pw@api.example.com", shown(EXAMPLE, CREDENTIALS)),
        ("https://hunter2pw@api.example.com", shown(EXAMPLE, CREDENTIALS)),
        ("https://user:hunter2pw@api.example.com/x", shown(EXAMPLE + "/x", CREDENTIALS)),
        ("https://api.example.com/x?t=pw", shown(EXAMPLE + "/x", QUERY)),
        ("https://api.example.com/x#pw", shown(EXAMPLE + "/x", QUERY)),
        ("https://api.example.com/x?", shown(EXAMPLE + "/x", QUERY)),
        ("https://api.example.com/x#\t", shown(EXAMPLE + "/x", QUERY)),
        ("https://api.example.com/p?access_token=hunter2pw", shown(EXAMPLE + "/p", QUERY)),
        ("http://api.example.com/?token=hunter2pw", shown("http://api.example.com/", QUERY)),
        ("https://api.example.com/#hunter2pw", shown(EXAMPLE + "/", QUERY)),
        ("http://api.example.com", shown("http://api.example.com", PLAIN_HTTP)),
        ("HTTP://api.example.com/", shown("http://api.example.com/", PLAIN_HTTP)),
        ("http://[2001:db8::1]:8080/v1", shown("http://[2001:db8::1]:8080/v1", PLAIN_HTTP)),
        ("http://10.0.0.5:8080", shown("http://10.0.0.5:8080", PLAIN_HTTP)),
        ("http://localhost.example.com", shown("http://localhost.example.com", PLAIN_HTTP)),
        ("http://127.0.0.1.nip.io", shown("http://127.0.0.1.nip.io", PLAIN_HTTP)),
        ("http://locahost:8787", shown("http://locahost:8787", TYPO.format("locahost"))),
        ("http://localhots/v1", shown("http://localhots/v1", TYPO.format("localhots"))),
        ("http://lokalhost", shown("http://lokalhost", TYPO.format("lokalhost"))),
        ("api.example.com", no_scheme("api.example.com", EXAMPLE)),
        # never read as the scheme `localhost` (`localhost://18787`)
        ("localhost:18787", no_scheme("localhost:18787", "http://localhost:18787")),
        (" 127.0.0.1:8787/v1 ", no_scheme("127.0.0.1:8787/v1", "http://127.0.0.1:8787/v1")),
        ("api.example.com:8443/kyb", no_scheme("api.example.com:8443/kyb", EXAMPLE + ":8443/kyb")),
        # user info and a query are never echoed, even here
        ("ci:pw@api.example.com/x?t=secret", no_scheme("api.example.com/x", EXAMPLE + "/x")),
    ],
)
def test_a_base_url_refused_says_why_and_shows_only_where_it_points(url, said):
    with pytest.raises(ConfigError) as refused:
        parse_base_url(url)
    assert str(refused.value) == f"base_url {said}"


@pytest.mark.parametrize("invite_id", [".", "..", "..."])
def test_an_id_of_dots_alone_cannot_be_put_in_a_url(invite_id):
    with pytest.raises(InvalidRequest) as refused:
        invite_path("/v1/invites/{inviteId}", invite_id)
    assert str(refused.value) == f"invite id '{invite_id}' cannot be used in a URL"


@pytest.mark.parametrize(
    ("invite_id", "path"),
    [
        ("X", "/v1/invites/X"),
        ("X.", "/v1/invites/X."),
        ("a/b?c#d", "/v1/invites/a%2Fb%3Fc%23d"),
        ("../admin", "/v1/invites/..%2Fadmin"),
    ],
)
def test_an_id_is_percent_encoded_into_its_path(invite_id, path):
    assert invite_path("/v1/invites/{inviteId}", invite_id) == path


@pytest.mark.parametrize(
    ("written", "scheme", "netloc", "text"),
    [
        ("https://api.example.com", "https", "api.example.com", "https://api.example.com"),
        ("https://api.example.com/platform/", "https", "api.example.com", EXAMPLE + "/platform"),
        ("https://api.example.com/FX//", "https", "api.example.com", EXAMPLE + "/FX"),  # slashes
        ("http://127.0.0.1:8080", "http", "127.0.0.1:8080", "http://127.0.0.1:8080"),
        ("http://127.0.0.2:8080/", "http", "127.0.0.2:8080", "http://127.0.0.2:8080"),
        ("http://localhost:5000", "http", "localhost:5000", "http://localhost:5000"),
        ("http://[::1]:9000", "http", "[::1]:9000", "http://[::1]:9000"),
        (" HTTP://127.0.0.1:8787/", "http", "127.0.0.1:8787", "http://127.0.0.1:8787"),
        ("HTTPS://API.Example.com/V1\n", "https", "api.example.com", "https://api.example.com/V1"),
        ("http://[::1]:80/v1/", "http", "[::1]:80", "http://[::1]:80/v1"),
    ],
)
def test_https_and_loopback_http_are_accepted_parsed_and_normalised_once(
    written, scheme, netloc, text
):
    base = parse_base_url(written)
    assert (base.scheme, base.netloc, base.text) == (scheme, netloc, text)
    assert parse_base_url(written).text == text


@pytest.mark.parametrize("url", ["https://api.exa\tmple.com", "https://api.example.com/v\n1"])
def test_whitespace_inside_the_base_url_is_refused_not_silently_dropped(url):
    with pytest.raises(ConfigError, match="holds whitespace or a control character"):
        parse_base_url(url)


def test_a_loopback_host_in_capitals_is_still_loopback():
    assert parse_base_url("HTTP://LOCALHOST:1").is_loopback
    assert not parse_base_url("https://localhost.example").is_loopback
