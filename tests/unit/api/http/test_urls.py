"""What a user is told about a base URL the client secret may not be sent to, and
about an invite id no URL can carry: the whole message, showing only scheme,
host, port and path of the URL (never user info, query or fragment)."""

from __future__ import annotations

import pytest

from reconciler.api.exceptions import InvalidRequest
from reconciler.api.http.urls import check_base_url, invite_path, parse_base_url
from reconciler.errors import ConfigError

PLAIN_HTTP = (
    "uses plain http://, which would send the client secret and tokens unencrypted; "
    "use https:// (http:// is allowed only for loopback hosts such as 127.0.0.1, "
    "where the sandbox runs)"
)
QUERY = "must not have a query string or fragment"


@pytest.mark.parametrize(
    ("url", "said"),
    [
        (
            "https://api.example.com:99999",
            "base_url (https://...) is not a valid URL; set RECONCILER_BASE_URL",
        ),
        (
            "x" * 30 + "://h:port",
            f"base_url ({'x' * 20}://...) is not a valid URL; set RECONCILER_BASE_URL",
        ),
        ("ftp://api.example.com/x", "base_url 'ftp://api.example.com/x' is not an http(s) URL"),
        ("https:///platform", "base_url 'https:///platform' is not an http(s) URL"),
        (
            "https://ci:pw@api.example.com/p",
            "base_url 'https://api.example.com/p' must not carry credentials (user info "
            "before the host); use RECONCILER_CLIENT_ID and RECONCILER_CLIENT_SECRET",
        ),
        ("https://api.example.com/x?t=pw", f"base_url 'https://api.example.com/x' {QUERY}"),
        ("https://api.example.com/x#pw", f"base_url 'https://api.example.com/x' {QUERY}"),
        ("https://api.example.com/x?", f"base_url 'https://api.example.com/x' {QUERY}"),
        ("https://api.example.com/x#\t", f"base_url 'https://api.example.com/x' {QUERY}"),
        ("http://api.example.com", f"base_url 'http://api.example.com' {PLAIN_HTTP}"),
        (
            "http://[2001:db8::1]:8080/v1",
            f"base_url 'http://[2001:db8::1]:8080/v1' {PLAIN_HTTP}",
        ),
    ],
    ids=[
        "bad-port",
        "bad-port-long-scheme",
        "ftp",
        "no-host",
        "user-info",
        "query",
        "fragment",
        "empty-query",
        "empty-fragment-then-tab",
        "plain-http",
        "plain-http-ipv6-port",
    ],
)
def test_a_base_url_refused_says_why_and_shows_only_where_it_points(url: str, said: str) -> None:
    with pytest.raises(ConfigError) as refused:
        check_base_url(url)
    assert str(refused.value) == said


@pytest.mark.parametrize(
    ("written", "said"),
    [
        (
            "api.example.com",
            "'api.example.com' has no scheme; did you mean 'https://api.example.com'?",
        ),
        (  # never read as the scheme `localhost` (`localhost://18787`)
            "localhost:18787",
            "'localhost:18787' has no scheme; did you mean 'http://localhost:18787'?",
        ),
        (
            " 127.0.0.1:8787/v1 ",
            "'127.0.0.1:8787/v1' has no scheme; did you mean 'http://127.0.0.1:8787/v1'?",
        ),
        (
            "api.example.com:8443/kyb",
            "'api.example.com:8443/kyb' has no scheme; "
            "did you mean 'https://api.example.com:8443/kyb'?",
        ),
        (  # user info and a query are never echoed, even here
            "ci:pw@api.example.com/x?t=secret",
            "'api.example.com/x' has no scheme; did you mean 'https://api.example.com/x'?",
        ),
    ],
)
def test_a_base_url_without_a_scheme_is_quoted_with_the_url_meant(written: str, said: str) -> None:
    with pytest.raises(ConfigError) as refused:
        check_base_url(written)
    assert str(refused.value) == f"base_url {said}"


def test_trailing_slashes_are_dropped_and_nothing_else() -> None:
    assert check_base_url("https://api.example.com/FX//") == "https://api.example.com/FX"


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
    assert check_base_url(written) == text


@pytest.mark.parametrize("url", ["https://api.exa\tmple.com", "https://api.example.com/v\n1"])
def test_whitespace_inside_the_base_url_is_refused_not_silently_dropped(url: str) -> None:
    with pytest.raises(ConfigError, match="holds whitespace or a control character"):
        parse_base_url(url)


def test_a_loopback_host_in_capitals_is_still_loopback() -> None:
    assert parse_base_url("HTTP://LOCALHOST:1").is_loopback
    assert not parse_base_url("https://localhost.example").is_loopback
