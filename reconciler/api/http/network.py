"""The HTTP session of a run: requests' Session less what a run never needs, with the
proxy and CA bundle read from the environment once and checked (``trust``). Failures
on the network are named in ``failures``."""

from __future__ import annotations

from typing import Any, cast
from urllib.parse import urlsplit

import requests
from requests.hooks import dispatch_hook
from requests.utils import select_proxy

from reconciler import __version__
from reconciler.api.http.deadline import GuardedAdapter
from reconciler.api.http.trust import check_proxy, checked_verify, proxy_variable
from reconciler.api.http.urls import BaseUrl, parse_base_url
from reconciler.errors import ConfigError

CONNECT_TIMEOUT = 10.0


class _IgnoredCookies(requests.cookies.RequestsCookieJar):
    """The API authenticates with bearer tokens: a cookie it sets is never kept or sent,
    which also spares parsing Set-Cookie on every answer."""

    def extract_cookies(self, response: Any, request: Any) -> None:
        return None


def requests_own_send() -> bool:
    """Whether requests' Session.send is requests' own now, not a wrapper (requests-mock,
    a tracer): judged by the function itself, since one captured at import may already be
    the wrapper (this module imported first under requests-mock)."""
    send = requests.Session.send
    return (
        send.__module__ == "requests.sessions"
        and send.__qualname__ == "Session.send"
        and not hasattr(send, "__wrapped__")
    )


class ProxiedSession(requests.Session):
    """A session that never follows a redirect, nor reads a 3xx body to prepare one:
    with allow_redirects=False, requests' Session.send still reads the whole body
    of a 3xx (resolve_redirects consumes it), however long the server makes it.
    It knows which variable named its proxy, for messages."""

    proxy_source: str | None = None

    def get_redirect_target(self, resp: requests.Response) -> None:
        return None

    def send(self, request: requests.PreparedRequest, **kwargs: Any) -> requests.Response:
        """requests' Session.send for what the run sends (streamed, never redirected, the
        environment not trusted), less what it never needs: the redirect it would not
        follow looked for, cookies it would not keep, the elapsed time as a timedelta.
        The same adapter sends it, with the same arguments, and the same response hooks
        (the token's renewal on a 401) see the answer. Anything that wraps requests' own
        send (requests-mock, a tracer) gets the whole of it, wrapper included."""
        if (
            not requests_own_send()
            or kwargs.get("allow_redirects", True)
            or not kwargs.get("stream")
            or self.trust_env
        ):
            return super().send(request, **kwargs)
        del kwargs["allow_redirects"]
        kwargs.setdefault("verify", self.verify)
        kwargs.setdefault("cert", self.cert)
        kwargs.setdefault("proxies", dict(self.proxies))  # resolve_proxies, the environment aside
        adapter = self.get_adapter(url=cast(str, request.url))
        response = adapter.send(request, **kwargs)
        hooked = dispatch_hook("response", request.hooks, response, **kwargs)  # type: ignore[no-untyped-call]
        return cast(requests.Response, hooked)


def make_session(base: BaseUrl | str, parallelism: int) -> ProxiedSession:
    """The run's session: proxies and the CA bundle read from the environment once, and
    checked now, so a bad one is one clear configuration error, not a failure per request."""
    if isinstance(base, str):
        base = parse_base_url(base)
    session = ProxiedSession()
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
    try:
        environment = session.merge_environment_settings(base.text, {}, None, None, None)
        # Plain http:// is allowed only because the host is this machine; a proxy
        # would carry the form with the client secret, in clear, to another one.
        # Decided on the parsed scheme: `HTTP://127.0.0.1` is plain http too.
        proxy = select_proxy(base.text, environment["proxies"]) if base.scheme == "https" else None
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
            session.proxy_source = proxy_variable(proxy)
            check_proxy(proxy, session.proxy_source)
            session.proxies = {"https": proxy}
        session.verify = checked_verify(environment["verify"])
    session.trust_env = False
    session.cookies = _IgnoredCookies()
    return session
