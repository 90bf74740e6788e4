"""Where requests may go: the base URL a secret may be sent to, and invite paths."""

from __future__ import annotations

import ipaddress
from typing import NamedTuple
from urllib.parse import SplitResult, quote, urlsplit

from reconciler.api.exceptions import InvalidRequest
from reconciler.errors import ConfigError
from reconciler.safetext import escape, quote_value


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
        return _is_loopback(self.host)


def check_base_url(base_url: str) -> str:
    """The base URL, normalised, without a trailing slash, if it is safe to send a secret to."""
    return parse_base_url(base_url).text


def parse_base_url(base_url: str) -> BaseUrl:
    """The base URL parsed and normalised once, if it is safe to send a secret to.

    Surrounding whitespace is dropped and scheme and host are lower-cased; what is
    left is checked and kept as parts. Errors show only scheme, host and path: the
    user info or query string of a refused URL is exactly where a credential would sit.
    """
    written = base_url.strip()
    no_scheme = _no_scheme(written) if "://" not in written else None
    if no_scheme:
        raise ConfigError(no_scheme)
    try:
        parts = urlsplit(written)
        parts.port  # noqa: B018 - parsing the port is what raises for a bad one
    except ValueError:
        scheme = escape(written.partition(":")[0][:20])
        raise ConfigError(
            f"base_url ({scheme}://...) is not a valid URL; set RECONCILER_BASE_URL"
        ) from None
    shown = quote_value(_scheme_host_path(parts), limit=None)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(f"base_url {shown} is not an http(s) URL")
    if parts.username is not None or parts.password is not None:
        raise ConfigError(
            f"base_url {shown} must not carry credentials (user info before the host); "
            "use RECONCILER_CLIENT_ID and RECONCILER_CLIENT_SECRET"
        )
    if parts.query or parts.fragment or written.endswith(("?", "#")):
        raise ConfigError(f"base_url {shown} must not have a query string or fragment")
    if any(c.isspace() or not c.isprintable() for c in written):
        # urlsplit silently drops tabs and line breaks: what it parsed is not what was written.
        raise ConfigError(f"base_url {shown} holds whitespace or a control character")
    if parts.scheme == "http" and not _is_loopback(parts.hostname):
        raise ConfigError(
            f"base_url {shown} uses plain http://, which would send the client secret "
            "and tokens unencrypted; use https:// (http:// is allowed only for loopback "
            "hosts such as 127.0.0.1, where the sandbox runs)"
        )
    return BaseUrl(parts.scheme, parts.hostname, parts.port, parts.path.rstrip("/"))


def _no_scheme(written: str) -> str | None:
    """The message for a URL written without its scheme (`api.example.com`, `localhost:8787`):
    quoted as written, with the URL meant, never read as a scheme (`localhost://8787`)."""
    try:
        meant = urlsplit(f"https://{written}")
        meant.port  # noqa: B018 - parsing the port is what raises for a bad one
    except ValueError:
        meant = None
    if meant is None or not meant.hostname or any(c.isspace() for c in written):
        return None  # no URL meant can be told: the checks below word it
    if _is_loopback(meant.hostname):
        meant = meant._replace(scheme="http")
    # Only scheme, host and path are shown: user info or a query may hold a credential.
    shown = _scheme_host_path(meant)
    return (
        f"base_url {quote_value(shown.partition('://')[2], limit=None)} has no scheme; "
        f"did you mean {quote_value(shown, limit=None)}?"
    )


def _scheme_host_path(parts: SplitResult) -> str:
    """What a message may show of a URL: never its user info, query or fragment."""
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    port = f":{parts.port}" if parts.port is not None else ""
    return f"{parts.scheme}://{host}{port}{parts.path}"


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


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
