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
    invite_path,
    make_session,
    parse_base_url,
    transport_error,
)
from reconciler.errors import ConfigError

HOST = "127.0.0.1"


@contextmanager
def listener(on_connect: Callable[[socket.socket], None]) -> Iterator[str]:
    """``host:port`` of a server on 127.0.0.1 that hands each connection to ``on_connect``."""

    def handle(conn: socket.socket, done: threading.Event) -> None:
        with conn:
            on_connect(conn)

    with serving(handle) as address:
        yield address


def failure(url: str, timeout: float = 5.0, **kwargs: object) -> TransportError:
    session = make_session(url, GuardedAdapter())
    with pytest.raises(requests.RequestException) as failed:
        session.get(url, timeout=(timeout, timeout), **kwargs)  # type: ignore[arg-type]
    return transport_error(failed.value, "the platform", timeout)


def test_a_closed_port_is_refused_and_certainly_not_sent() -> None:
    with socket.create_server((HOST, 0)) as probe:
        port = probe.getsockname()[1]
    error = failure(f"http://{HOST}:{port}/v1/invites/inv_1")
    assert str(error) == (
        "could not connect to the platform (connection refused); check RECONCILER_BASE_URL"
    )
    assert (error.maybe_sent, error.permanent) == (False, False)


def answering(raw: bytes) -> Callable[[socket.socket], None]:
    def answer(conn: socket.socket) -> None:
        conn.recv(65536)
        conn.sendall(raw)

    return answer


NOT_GZIP = b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: 5\r\n\r\nhello"
NOT_HTTP = "the platform sent an answer that is not valid HTTP"


@pytest.mark.parametrize(
    ("raw", "said"),
    [
        (b"", "connection to the platform closed without an answer"),
        (
            b'HTTP/1.1 200 OK\r\nContent-Length: 500\r\n\r\n{"success": true',
            "the answer from the platform was cut off",
        ),
        (b"HTTP/1.1 abc OK\r\n\r\n", f"{NOT_HTTP} (BadStatusLine)"),
        (b'{"data": {}}', f"{NOT_HTTP} (BadStatusLine)"),  # no status line at all
        (b"HTTP/1.1 200 OK\r\nX: " + b"a" * 100_000 + b"\r\n\r\n", f"{NOT_HTTP} (LineTooLong)"),
        (NOT_GZIP, f"{NOT_HTTP} (DecodeError)"),
        (
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
            f"{NOT_HTTP} (InvalidChunkLength)",
        ),
    ],
    ids=[
        "closed",
        "cut-off",
        "bad-status",
        "no-status-line",
        "endless-header",
        "not-gzip",
        "bad-chunk-size",
    ],
)
def test_an_answer_closed_cut_off_or_not_http_says_so_and_may_have_been_received(
    raw: bytes, said: str
) -> None:
    with listener(answering(raw)) as address:
        error = failure(f"http://{address}/v1/invites/inv_1")
    assert str(error) == said
    assert (error.maybe_sent, error.permanent) == (True, False)


def test_a_server_that_never_answers_may_have_received_the_request() -> None:
    gave_up = threading.Event()

    def say_nothing(conn: socket.socket) -> None:
        conn.recv(65536)
        gave_up.wait(5)  # hold the connection open until the client gave up

    with listener(say_nothing) as address:
        error = failure(f"http://{address}/v1/invites/inv_1", timeout=0.3)
        gave_up.set()
    assert str(error) == "no answer from the platform within 0.3s"
    assert (error.maybe_sent, error.permanent) == (True, False)


def test_https_to_a_plain_http_port_is_a_handshake_failure_not_retried() -> None:
    def speak_http(conn: socket.socket) -> None:
        conn.recv(65536)
        conn.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")

    with listener(speak_http) as address:
        error = failure(f"https://{address}/v1/invites/inv_1")
    assert str(error) == (
        "TLS handshake with the platform failed: it does not speak TLS on this port"
    )
    assert (error.maybe_sent, error.permanent) == (False, True)


def test_a_header_that_cannot_be_sent_is_permanent_and_never_left() -> None:
    with socket.create_server((HOST, 0)) as probe:
        url = f"http://{HOST}:{probe.getsockname()[1]}/v1/invites/inv_1"
        error = failure(url, headers={"Authorization": "Bearer a\r\nX-Evil: 1"})
    assert str(error) == (
        "request to the platform could not be built (InvalidHeader); nothing was sent"
    )
    assert (error.maybe_sent, error.permanent) == (False, True)


def wrapped_as_requests_does(reason: BaseException, outer: type[Exception]) -> Exception:
    pool_error = u3.MaxRetryError(None, "/v1/invites/inv_1", reason)  # type: ignore[arg-type]
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


@pytest.mark.parametrize(
    ("exc", "ca_bundle", "said"),
    [
        pytest.param(
            unverified("self-signed certificate"),
            None,
            VERIFY + "self-signed certificate)" + PRIVATE_CA,
            id="verify-says-how-to-trust-a-private-ca",
        ),
        pytest.param(  # a CA bundle set: never told to set it
            unverified("unable to get local issuer certificate", 20),
            "/etc/ssl/private-ca",
            VERIFY + "unable to get local issuer certificate)" + NOT_IN_BUNDLE,
            id="verify-with-a-ca-bundle-set",
        ),
        pytest.param(
            unverified(), None, VERIFY + "certificate not trusted)" + PRIVATE_CA, id="no-reason"
        ),
        pytest.param(  # no private CA makes an expired certificate good
            unverified("certificate has expired", 10),
            None,
            VERIFY + "certificate has expired)",
            id="expired",
        ),
        pytest.param(handshake(None), None, "TLS handshake with api.example failed", id="tls"),
        pytest.param(handshake("UNSUPPORTED_PROTOCOL"), None, TOO_OLD, id="unsupported-protocol"),
        pytest.param(handshake("TLSV1_ALERT_PROTOCOL_VERSION"), None, TOO_OLD, id="alert-version"),
        pytest.param(
            handshake("SSLV3_ALERT_HANDSHAKE_FAILURE"),
            None,
            "TLS handshake with api.example failed (SSLV3_ALERT_HANDSHAKE_FAILURE)",
            id="openssl-reason",
        ),
    ],
)
def test_a_tls_failure_says_why_is_permanent_and_was_never_sent(
    monkeypatch: pytest.MonkeyPatch, exc: Exception, ca_bundle: str | None, said: str
) -> None:
    monkeypatch.delenv("CURL_CA_BUNDLE", raising=False)
    monkeypatch.delenv("REQUESTS_CA_BUNDLE", raising=False)
    if ca_bundle is not None:
        monkeypatch.setenv("REQUESTS_CA_BUNDLE", ca_bundle)
    error = transport_error(exc, "api.example", 30)
    assert str(error) == said
    assert (error.maybe_sent, error.permanent) == (False, True)


UNKNOWN = "request to api.example failed (RuntimeError)"


@pytest.mark.parametrize(
    ("exc", "timeout", "said", "maybe_sent"),
    [
        pytest.param(
            wrapped_as_requests_does(
                u3.NameResolutionError(
                    "nowhere.invalid",
                    None,  # type: ignore[arg-type]
                    socket.gaierror(-2, "Name or service not known"),
                ),
                requests.ConnectionError,
            ),
            30,
            "cannot resolve the host of api.example; check RECONCILER_BASE_URL",
            False,
            id="host-does-not-resolve",
        ),
        pytest.param(
            wrapped_as_requests_does(
                u3.ConnectTimeoutError(None, "timed out"), requests.exceptions.ConnectTimeout
            ),
            2.5,
            "could not connect to api.example within 2.5s",
            False,
            id="connect-timeout-names-the-time",
        ),
        pytest.param(RuntimeError("odd"), 30, UNKNOWN, True, id="no-known-kind"),
        pytest.param(cycle(), 30, UNKNOWN, True, id="causes-in-a-cycle"),
        pytest.param(
            chained(RuntimeError("wrapped"), ConnectionRefusedError(111, "refused")),
            30,
            REFUSED,
            False,
            id="refused-found-through-the-chain",
        ),
        pytest.param(  # no more than it knows: not "refused"
            requests.ConnectionError(
                u3.MaxRetryError(
                    None,  # type: ignore[arg-type]
                    "/v1",
                    u3.NewConnectionError(None, "[Errno 101] Network is unreachable"),  # type: ignore[arg-type]
                )
            ),
            30,
            "could not connect to api.example; check RECONCILER_BASE_URL",
            False,
            id="unreachable",
        ),
        pytest.param(  # every cause counts, not only the first one wrapped
            chained(
                requests.ConnectionError(u3.ProtocolError("Connection aborted.")),
                ConnectionRefusedError(111, "refused"),
            ),
            30,
            REFUSED,
            False,
            id="refused-beside-another-cause",
        ),
    ],
)
def test_a_failure_built_as_requests_nests_it_is_named_and_says_if_it_may_have_been_sent(
    exc: BaseException, timeout: float, said: str, maybe_sent: bool
) -> None:
    error = transport_error(exc, "api.example", timeout)
    assert str(error) == said
    assert (error.maybe_sent, error.permanent) == (maybe_sent, False)


def failure_via_proxy(url: str) -> TransportError:
    session = make_session(url, GuardedAdapter())
    with pytest.raises(requests.RequestException) as failed:
        session.get(url, timeout=(5, 5))
    return transport_error(failed.value, "the platform", 5, session.proxy_source)


@pytest.mark.parametrize(
    ("status", "said", "permanent"),
    [
        (
            "407 Proxy Authentication Required",
            "the proxy requires authentication (407): check the user and password in "
            "https_proxy (http://USER:PASSWORD@HOST:PORT, percent-encoded)",
            True,
        ),
        (
            "403 Forbidden",
            "the proxy refused to connect to the platform (403): check the proxy's access "
            "rules for this host, or NO_PROXY if the platform should be reached directly",
            True,
        ),
        (
            "502 Bad Gateway",
            "the proxy could not connect to the platform (it answered 502); check the proxy "
            "named by https_proxy, or NO_PROXY for this host",
            False,
        ),
    ],
    ids=["407", "403", "502"],
)
def test_a_proxy_refusing_the_tunnel_is_named_with_its_status_and_never_its_password(
    monkeypatch: pytest.MonkeyPatch, status: str, said: str, permanent: bool
) -> None:
    seen: list[bytes] = []

    def refuse_the_tunnel(conn: socket.socket) -> None:
        seen.append(conn.recv(65536).split(b"\r\n")[0])
        conn.sendall(f"HTTP/1.1 {status}\r\nContent-Length: 0\r\n\r\n".encode())

    with listener(refuse_the_tunnel) as address:
        monkeypatch.delenv("HTTPS_PROXY", raising=False)
        monkeypatch.setenv("https_proxy", f"http://ci:pr0xy-pass@{address}")
        monkeypatch.delenv("NO_PROXY", raising=False)
        error = failure_via_proxy("https://api.example/v1/invites/inv_1")
    assert seen == [b"CONNECT api.example:443 HTTP/1.0"]
    assert str(error) == said
    # 407 and 403 are the proxy's policy: trying again cannot help.
    assert (error.maybe_sent, error.permanent) == (False, permanent)


def test_a_proxy_that_refuses_connections_is_named_not_the_platform(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with socket.create_server((HOST, 0)) as probe:
        port = probe.getsockname()[1]
    monkeypatch.setenv("HTTPS_PROXY", f"http://user:pr0xy-pass@{HOST}:{port}")
    monkeypatch.delenv("NO_PROXY", raising=False)
    error = failure("https://api.example/v1/invites/inv_1")
    assert "through the proxy set in the environment" in str(error)
    assert "pr0xy-pass" not in str(error) and error.maybe_sent is False


# -- what a session is made with ------------------------------------------------------


def test_https_requests_go_through_the_adapter_that_keeps_the_deadline() -> None:
    session = make_session("https://api.example", GuardedAdapter())
    assert isinstance(session.get_adapter("https://api.example/v1/x"), GuardedAdapter)
    assert isinstance(session.get_adapter("http://127.0.0.1:8080/v1/x"), GuardedAdapter)


def test_certificates_are_verified_against_the_ca_bundle_the_environment_names(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    for name in ("REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE"):
        monkeypatch.delenv(name, raising=False)
    assert make_session("https://api.example", GuardedAdapter()).verify is True
    bundle = tmp_path / "private-ca.pem"
    shutil.copy(certifi.where(), bundle)
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(bundle))
    assert make_session("https://api.example", GuardedAdapter()).verify == str(bundle)


def test_plain_http_to_this_machine_never_goes_through_a_proxy(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A proxy would carry the token request's client secret, in clear, off this machine.
    proxied: list[bytes] = []

    def proxy(conn: socket.socket) -> None:
        proxied.append(conn.recv(65536))

    def platform(conn: socket.socket) -> None:
        conn.recv(65536)
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}")

    with listener(proxy) as proxy_address, listener(platform) as address:
        for name in ("HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"):
            monkeypatch.setenv(name, f"http://{proxy_address}")
        monkeypatch.delenv("NO_PROXY", raising=False)
        monkeypatch.delenv("no_proxy", raising=False)
        url = f"http://{address}/v1/invites/inv_1"
        answer = make_session(url, GuardedAdapter()).get(url, timeout=5)
    assert answer.status_code == 200 and proxied == []


def test_with_validate_certs_false_no_proxy_carries_the_request_whatever_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Any certificate is trusted then: a proxy (another machine) could end the TLS itself
    # and read the token request's client secret. The host is loopback: this machine.
    proxied: list[bytes] = []
    reached: list[bytes] = []

    def proxy(conn: socket.socket) -> None:
        proxied.append(conn.recv(65536))

    def platform(conn: socket.socket) -> None:
        reached.append(conn.recv(65536))  # the TLS ClientHello; closed without an answer

    with listener(proxy) as proxy_address, listener(platform) as address:
        for name in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"):
            monkeypatch.setenv(name, f"http://{proxy_address}")
        monkeypatch.delenv("NO_PROXY", raising=False)
        monkeypatch.delenv("no_proxy", raising=False)
        url = f"https://{address}/v1/invites/inv_1"
        session = make_session(url, GuardedAdapter(), validate_certs=False)
        assert (session.proxies, session.proxy_source, session.verify) == ({}, None, False)
        with pytest.raises(requests.RequestException):
            session.get(url, timeout=5)
        checked = make_session(url, GuardedAdapter())
    assert proxied == [] and reached and reached[0][:1] == b"\x16"  # a TLS handshake record
    assert checked.proxies == {"https": f"http://{proxy_address}"}


@pytest.mark.parametrize(
    "written",
    [
        "http://127.0.0.1:8787",
        " HTTP://127.0.0.1:8787",
        "HTTP://127.0.0.1:8787/",
        "\thttp://LOCALHOST:8787",
    ],
)
def test_plain_http_is_decided_on_the_parsed_url_not_the_text_as_written(
    monkeypatch: pytest.MonkeyPatch, written: str
) -> None:
    # `HTTP://` or a leading space once sent the token form, in clear, to HTTP_PROXY.
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"):
        monkeypatch.setenv(name, "http://proxy.example:3128")
    assert make_session(written, GuardedAdapter()).proxies == {}


def test_only_the_proxy_for_the_platform_is_kept_and_the_variable_that_named_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in ("HTTPS_PROXY", "https_proxy", "NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("ALL_PROXY", "http://proxy.example:3128")
    session = make_session("https://api.example", GuardedAdapter())
    assert (session.proxies, session.proxy_source) == (
        {"https": "http://proxy.example:3128"},
        "ALL_PROXY",
    )
    monkeypatch.setenv("NO_PROXY", "api.example")
    assert make_session("https://API.example", GuardedAdapter()).proxies == {}


def test_a_socks_proxy_without_pysocks_is_one_configuration_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    if importlib.util.find_spec("socks") is not None:
        pytest.skip("PySocks is installed here")
    monkeypatch.delenv("HTTPS_PROXY", raising=False)
    monkeypatch.delenv("https_proxy", raising=False)
    monkeypatch.setenv("ALL_PROXY", "socks5://user:s0cks-pass@127.0.0.1:1080")
    with pytest.raises(ConfigError) as refused:
        make_session("https://api.example", GuardedAdapter())
    assert str(refused.value) == (
        "ALL_PROXY names a SOCKS proxy (socks5://...), which needs the PySocks package: "
        "install it (pip install 'requests[socks]'), or use an http:// proxy"
    )


def test_a_proxy_of_an_unknown_scheme_is_refused_without_showing_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "ftp://user:pw@proxy.example")
    with pytest.raises(ConfigError, match=r"HTTPS_PROXY names a proxy of scheme ftp://") as no:
        make_session("https://api.example", GuardedAdapter())
    assert "pw" not in str(no.value)


@pytest.mark.parametrize(
    ("content", "said"),
    [
        (None, "which does not exist"),
        (b"", "which holds no certificate"),
        (b"-----BEGIN CERTIFICATE-----\nnot base64\n-----END CERTIFICATE-----\n", "no cert"),
        (b"just some text\n", "which holds no certificate"),
    ],
    ids=["missing", "empty", "damaged", "text"],
)
def test_a_ca_bundle_that_cannot_be_used_is_said_at_start(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, content: bytes | None, said: str
) -> None:
    bundle = tmp_path / "ca.pem"
    if content is not None:
        bundle.write_bytes(content)
    monkeypatch.delenv("CURL_CA_BUNDLE", raising=False)
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(bundle))
    with pytest.raises(ConfigError) as refused:
        make_session("https://api.example", GuardedAdapter())
    assert str(refused.value).startswith(f"REQUESTS_CA_BUNDLE names {bundle}, ")
    assert said in str(refused.value)
    # The sandbox's plain http:// needs no CA: nothing to refuse.
    assert make_session("http://127.0.0.1:8787", GuardedAdapter()).verify is not None


def test_a_ca_bundle_that_is_a_fifo_is_refused_not_waited_on(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    fifo = tmp_path / "ca.pem"
    os.mkfifo(fifo)
    monkeypatch.setenv("CURL_CA_BUNDLE", str(fifo))
    monkeypatch.delenv("REQUESTS_CA_BUNDLE", raising=False)
    with pytest.raises(ConfigError, match=r"CURL_CA_BUNDLE names .*, which is not a regular file"):
        make_session("https://api.example", GuardedAdapter())


@pytest.mark.parametrize(
    "proxy", ["http://ci:p[w@127.0.0.1:3128", "http://127.0.0.1:99999", "http://u:\x1b]0;x\x07@h"]
)
def test_a_proxy_url_that_does_not_parse_is_a_configuration_error_never_shown(
    monkeypatch: pytest.MonkeyPatch, proxy: str
) -> None:
    # Once a ValueError traceback that showed part of the password.
    monkeypatch.setenv("HTTPS_PROXY", proxy)
    with pytest.raises(ConfigError) as refused:
        make_session("https://api.example", GuardedAdapter())
    assert str(refused.value) == (
        "a proxy variable (HTTPS_PROXY, ALL_PROXY or NO_PROXY, in either case) is not a valid "
        "URL: check its port, and percent-encode any of :@/[]% in its user and password"
    )


def _ca_directory(tmp_path: Path, names: dict[str, bytes]) -> Path:
    directory = tmp_path / "certs"
    directory.mkdir()
    for name, content in names.items():
        (directory / name).write_bytes(content)
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
def test_a_ca_directory_that_cannot_be_used_is_refused_at_start(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, names: dict[str, bytes], said: str
) -> None:
    directory = _ca_directory(tmp_path, names)
    monkeypatch.delenv("CURL_CA_BUNDLE", raising=False)
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(directory))
    with pytest.raises(ConfigError) as refused:
        make_session("https://api.example", GuardedAdapter())
    assert str(refused.value).startswith(f"REQUESTS_CA_BUNDLE names {directory}, ")
    assert said in str(refused.value) and "openssl rehash" in str(refused.value)


def test_a_hashed_ca_directory_is_accepted(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from support.tls import make_certificates

    ca = make_certificates(tmp_path / "tls").ca.read_bytes()
    directory = _ca_directory(tmp_path, {"README": b"x", "0123abcd.0": ca})
    monkeypatch.delenv("CURL_CA_BUNDLE", raising=False)
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(directory))
    assert make_session("https://api.example", GuardedAdapter()).verify == str(directory)


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
NOT_HTTP = "is not an http(s) URL"


def no_scheme(written: str, meant: str) -> str:
    return f"'{written}' has no scheme; did you mean '{meant}'?"


# What follows `base_url `: only scheme, host, port and path of the URL are shown, never
# user info, query or fragment (the "hunter2pw" of these URLs).
@pytest.mark.parametrize(
    ("url", "said"),
    [
        ("https://api.example.com:99999", f"(https://...) {NOT_VALID}"),
        ("x" * 30 + "://h:port", f"({'x' * 20}://...) {NOT_VALID}"),
        ("ftp://api.example.com/x", f"'ftp://api.example.com/x' {NOT_HTTP}"),
        ("https:///platform", f"'https:///platform' {NOT_HTTP}"),
        ("ftp://user:hunter2pw@api.example.com", f"'ftp://api.example.com' {NOT_HTTP}"),
        ("https://ci:pw@api.example.com/p", f"'https://api.example.com/p' {CREDENTIALS}"),
        (
            "https://reconciler-ci:hunter2pw@api.example.com",
            f"'https://api.example.com' {CREDENTIALS}",
        ),
        ("https://hunter2pw@api.example.com", f"'https://api.example.com' {CREDENTIALS}"),
        ("https://user:hunter2pw@api.example.com/x", f"'https://api.example.com/x' {CREDENTIALS}"),
        ("https://api.example.com/x?t=pw", f"'https://api.example.com/x' {QUERY}"),
        ("https://api.example.com/x#pw", f"'https://api.example.com/x' {QUERY}"),
        ("https://api.example.com/x?", f"'https://api.example.com/x' {QUERY}"),
        ("https://api.example.com/x#\t", f"'https://api.example.com/x' {QUERY}"),
        (
            "https://api.example.com/p?access_token=hunter2pw",
            f"'https://api.example.com/p' {QUERY}",
        ),
        ("http://api.example.com/?token=hunter2pw", f"'http://api.example.com/' {QUERY}"),
        ("https://api.example.com/#hunter2pw", f"'https://api.example.com/' {QUERY}"),
        ("http://api.example.com", f"'http://api.example.com' {PLAIN_HTTP}"),
        ("HTTP://api.example.com/", f"'http://api.example.com/' {PLAIN_HTTP}"),
        ("http://[2001:db8::1]:8080/v1", f"'http://[2001:db8::1]:8080/v1' {PLAIN_HTTP}"),
        ("http://10.0.0.5:8080", f"'http://10.0.0.5:8080' {PLAIN_HTTP}"),
        ("http://localhost.example.com", f"'http://localhost.example.com' {PLAIN_HTTP}"),
        ("http://127.0.0.1.nip.io", f"'http://127.0.0.1.nip.io' {PLAIN_HTTP}"),
        ("http://locahost:8787", "'http://locahost:8787' " + TYPO.format("locahost")),
        ("http://localhots/v1", "'http://localhots/v1' " + TYPO.format("localhots")),
        ("http://lokalhost", "'http://lokalhost' " + TYPO.format("lokalhost")),
        ("api.example.com", no_scheme("api.example.com", "https://api.example.com")),
        # never read as the scheme `localhost` (`localhost://18787`)
        ("localhost:18787", no_scheme("localhost:18787", "http://localhost:18787")),
        (" 127.0.0.1:8787/v1 ", no_scheme("127.0.0.1:8787/v1", "http://127.0.0.1:8787/v1")),
        (
            "api.example.com:8443/kyb",
            no_scheme("api.example.com:8443/kyb", "https://api.example.com:8443/kyb"),
        ),
        # user info and a query are never echoed, even here
        (
            "ci:pw@api.example.com/x?t=secret",
            no_scheme("api.example.com/x", "https://api.example.com/x"),
        ),
    ],
)
def test_a_base_url_refused_says_why_and_shows_only_where_it_points(url: str, said: str) -> None:
    with pytest.raises(ConfigError) as refused:
        parse_base_url(url)
    assert str(refused.value) == f"base_url {said}"


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("https://api.example.com", "https://api.example.com"),
        ("https://api.example.com/platform/", "https://api.example.com/platform"),
        ("https://api.example.com/FX//", "https://api.example.com/FX"),  # slashes, nothing else
        ("http://127.0.0.1:8080", "http://127.0.0.1:8080"),
        ("http://127.0.0.2:8080/", "http://127.0.0.2:8080"),
        ("http://localhost:5000", "http://localhost:5000"),
        ("http://[::1]:9000", "http://[::1]:9000"),
    ],
)
def test_https_and_loopback_http_are_accepted(url: str, expected: str) -> None:
    assert parse_base_url(url).text == expected


@pytest.mark.parametrize("invite_id", [".", "..", "..."])
def test_an_id_of_dots_alone_cannot_be_put_in_a_url(invite_id: str) -> None:
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
def test_an_id_is_percent_encoded_into_its_path(invite_id: str, path: str) -> None:
    assert invite_path("/v1/invites/{inviteId}", invite_id) == path


@pytest.mark.parametrize(
    ("written", "scheme", "netloc", "text"),
    [
        (" HTTP://127.0.0.1:8787/", "http", "127.0.0.1:8787", "http://127.0.0.1:8787"),
        ("HTTPS://API.Example.com/V1\n", "https", "api.example.com", "https://api.example.com/V1"),
        ("http://[::1]:80/v1/", "http", "[::1]:80", "http://[::1]:80/v1"),
    ],
)
def test_the_base_url_is_parsed_and_normalised_once(
    written: str, scheme: str, netloc: str, text: str
) -> None:
    base = parse_base_url(written)
    assert (base.scheme, base.netloc, base.text) == (scheme, netloc, text)
    assert parse_base_url(written).text == text


@pytest.mark.parametrize("url", ["https://api.exa\tmple.com", "https://api.example.com/v\n1"])
def test_whitespace_inside_the_base_url_is_refused_not_silently_dropped(url: str) -> None:
    with pytest.raises(ConfigError, match="holds whitespace or a control character"):
        parse_base_url(url)


def test_a_loopback_host_in_capitals_is_still_loopback() -> None:
    assert parse_base_url("HTTP://LOCALHOST:1").is_loopback
    assert not parse_base_url("https://localhost.example").is_loopback
