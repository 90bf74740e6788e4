"""A real HAProxy in front of a sandbox, for tests and benchmarks (no pytest here).

Each ``Haproxy`` is its own process with its config, pid and log in a temporary
directory: ``haproxy -db -f haproxy.cfg`` (in the foreground, no daemon), listening on a
free port of 127.0.0.1. The system's haproxy service is never touched. What sits in
front of the sandbox is chosen with ``Limit``:

- a rate limit as most HAProxy guides write it: a stick table keyed on the client's
  address storing ``http_req_rate(1s)``, ``track-sc0 src``, and ``deny`` while the rate
  is over ``rate``. HAProxy's rate is a sliding window (this period's count plus the
  last period's, weighted by how much of it is still inside the window), and it counts
  every request tracked, the refused ones too: a client knocking on a closed window keeps
  it closed;
- the same counting only the requests let through (``counts="let-through"``:
  ``gpc0_rate``, incremented after the deny rule);
- refused with HAProxy's own HTML page as 429 (or 503), with ``Retry-After`` or not;
- on one path only (``path_end="/resend"``: the endpoint that sends e-mail);
- a server queue (``maxconn``: requests at once to the sandbox, the rest wait in
  HAProxy's queue for at most ``queue_timeout`` seconds, then get its 503 page).

Every request HAProxy answered is in its log (``requests()``): when it arrived, its
status, and whether HAProxy itself answered it (a deny, a queue timeout).

    with Sandbox(invites) as sandbox, Haproxy(sandbox.url, Limit(rate=10)) as gateway:
        env = gateway.client_env(sandbox)
"""

from __future__ import annotations

import signal
import subprocess
from dataclasses import dataclass
from typing import Literal, NamedTuple
from urllib.parse import urlsplit

from .daemon import RealServer, system_binary


class HaproxyMissing(RuntimeError):
    """No haproxy binary on PATH (nor in /usr/sbin)."""


def haproxy_binary() -> str | None:
    """The haproxy to run, or None when it is not installed."""
    return system_binary("haproxy")


@dataclass(frozen=True)
class Limit:
    """What HAProxy does in front of the sandbox.

    ``rate``: requests let through in any sliding ``period`` (seconds; None: no rate
    limit); ``counts``: whether every request tracked counts against it (``all``:
    ``http_req_rate``, the refused ones too) or only those let through (``let-through``:
    ``gpc0_rate``); ``status`` of a refusal and ``retry_after`` seconds in a header on it
    (None: no header, as HAProxy's default); ``path_end``: only requests whose path ends
    so are counted and refused. ``maxconn``: requests at once to the sandbox (None: no
    limit), the rest queued for at most ``queue_timeout`` seconds, then answered 503.
    """

    rate: int | None = None
    period: int = 1
    counts: Literal["all", "let-through"] = "all"
    status: int = 429
    retry_after: int | None = None
    path_end: str | None = None
    maxconn: int | None = None
    queue_timeout: float = 1.0

    def describe(self) -> str:
        parts = []
        if self.rate is not None:
            window = "" if self.period == 1 else f" per {self.period} s"
            counted = "let through" if self.counts == "let-through" else "all counted"
            said = f", Retry-After {self.retry_after}" if self.retry_after is not None else ""
            where = f" on {self.path_end}" if self.path_end else ""
            parts.append(f"{self.rate}/s{window} ({counted}){where}, {self.status}{said}")
        if self.maxconn is not None:
            parts.append(f"maxconn {self.maxconn}, timeout queue {self.queue_timeout:g}s")
        return "; ".join(parts) or "no limit"

    def frontend_lines(self) -> str:
        if self.rate is None:
            return ""
        store = "gpc0_rate" if self.counts == "let-through" else "http_req_rate"
        where = " if limited" if self.path_end else ""
        also = " limited" if self.path_end else ""
        lines = []
        if self.path_end:
            lines.append(f"acl limited path_end {self.path_end}")
        lines.append(f"stick-table type ip size 1k expire 10s store {store}({self.period}s)")
        lines.append(f"http-request track-sc0 src{where}")
        if self.counts == "let-through":
            over = f"{{ sc_gpc0_rate(0) ge {self.rate} }}"
        else:
            over = f"{{ sc_http_req_rate(0) gt {self.rate} }}"
        deny = f"http-request deny deny_status {self.status}"
        if self.retry_after is not None:
            # A header needs a body of its own: HAProxy's default page's text, as a string.
            page = _PAGES.get(self.status, f"<html><body><h1>{self.status}</h1></body></html>")
            deny += f' content-type text/html string "{page}" hdr Retry-After {self.retry_after}'
        lines.append(f"{deny} if{also} {over}")
        if self.counts == "let-through":
            lines.append(f"http-request sc-inc-gpc0(0){where}")
        return "".join(f"    {line}\n" for line in lines)

    def server_options(self) -> str:
        return f" maxconn {self.maxconn}" if self.maxconn is not None else ""


_PAGES = {
    429: "<html><body><h1>429 Too Many Requests</h1>You have sent too many requests "
    "in a given amount of time.</body></html>",
    503: "<html><body><h1>503 Service Unavailable</h1>No server is available to handle "
    "this request.</body></html>",
}


class Logged(NamedTuple):
    """One request as HAProxy logged it."""

    at: float  # time.time() when HAProxy had the request (not when it answered)
    method: str
    path: str
    status: int
    refused: bool  # HAProxy answered itself: a deny, or a queue wait past its timeout
    queued: float  # seconds it waited in HAProxy's queue


# The accept date (%Ts.%ms) is the connection's for its first request, the end of the
# previous request's answer for the next ones on it; the request arrived %Th + %Ti ms later.
# %tsc: the termination state, "PR" (a deny) or "sQ" (a queue timeout) when HAProxy
# answered itself.
_LOG_FORMAT = "%Ts.%ms %Th %Ti %Tw %ST %tsc %HM %HU"

_CONFIG = """\
global
    maxconn 1024
    log stdout format raw local0
    pidfile {prefix}/haproxy.pid
    nbthread 1
defaults
    mode http
    log global
    option dontlognull
    log-format "{log_format}"
    timeout connect 5s
    timeout client 60s
    timeout server 60s
    timeout http-keep-alive 60s
    timeout queue {queue_timeout}s
frontend api
    bind 127.0.0.1:{port}
{frontend}    default_backend sandbox
backend sandbox
    server platform {upstream}{server}
"""


class Haproxy(RealServer):
    """A real HAProxy proxying to ``upstream`` (a sandbox's URL), started on ``start()``."""

    NAME = "haproxy"
    STOP_SIGNAL = signal.SIGUSR1  # soft stop: finish answers, then exit

    def __init__(self, upstream: str, limit: Limit | None = None) -> None:
        binary = haproxy_binary()
        if binary is None:
            raise HaproxyMissing("haproxy is not installed (Debian: apt-get install haproxy)")
        super().__init__(upstream, binary)
        self.limit = limit or Limit()

    def config(self) -> None:
        assert self.prefix is not None
        config = _CONFIG.format(
            prefix=self.prefix,
            port=self.port,
            upstream=self.upstream,
            log_format=_LOG_FORMAT,
            queue_timeout=f"{self.limit.queue_timeout:g}",
            frontend=self.limit.frontend_lines(),
            server=self.limit.server_options(),
        )
        (self.prefix / "haproxy.cfg").write_text(config, encoding="utf-8")

    def popen(self) -> subprocess.Popen[bytes]:
        assert self.prefix is not None
        with open(self.prefix / "access.log", "wb") as log, open(self.prefix / "errors", "wb") as e:
            return subprocess.Popen(
                [self.binary, "-db", "-f", str(self.prefix / "haproxy.cfg")],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=e,
            )

    def error_log(self) -> str:
        """What haproxy said on stderr (warnings, and why it did not start)."""
        if self.prefix is None or not (self.prefix / "errors").exists():
            return ""
        text = (self.prefix / "errors").read_text(encoding="utf-8", errors="replace")
        return text.strip()[-2000:]

    def requests(self) -> list[Logged]:
        """Every request HAProxy answered so far, in the order it had them."""
        return super().requests()

    def refusals(self) -> int:
        """Requests HAProxy answered itself so far (its deny, its queue's timeout)."""
        return sum(entry.refused for entry in self.requests())

    @staticmethod
    def parse(line: str) -> Logged | None:
        return _parse(line)


def _parse(line: str) -> Logged | None:
    fields = line.split()
    if len(fields) < 8:
        return None
    try:
        accepted, handshake, idle, queued, status = (float(f) for f in fields[:5])
    except ValueError:
        return None
    state, method, url = fields[5], fields[6], fields[7]
    at = accepted + (max(handshake, 0) + max(idle, 0)) / 1000
    refused = state[:2] in ("PR", "sQ")
    return Logged(at, method, urlsplit(url).path, int(status), refused, max(queued, 0) / 1000)
