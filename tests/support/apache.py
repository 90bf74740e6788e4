"""A real Apache 2.4 with mod_evasive in front of a sandbox, for tests and benchmarks (no
pytest here).

Each ``Apache`` is its own process with its config, pid and logs in a temporary
directory: ``apache2 -d PREFIX -f httpd.conf -DFOREGROUND``, one child (the event MPM,
``ServerLimit 1``: mod_evasive keeps its counts per child), listening on a free port of
127.0.0.1 and proxying to the sandbox with mod_proxy_http. The system's apache2 service
is never touched.

mod_evasive (Debian ``libapache2-mod-evasive``) is a burst blocker: more than
``DOSSiteCount`` requests from one address within ``DOSSiteInterval`` seconds, or more
than ``DOSPageCount`` to one URI within ``DOSPageInterval``, and the address is answered
Apache's own HTML 403 page for ``DOSBlockingPeriod`` seconds, a period that starts again
with every request it refuses (a client that keeps sending stays blocked). It counts in
whole seconds of the clock.

    with Sandbox(invites) as sandbox, Apache(sandbox.url, Evasive()) as gateway:
        env = gateway.client_env(sandbox)
"""

from __future__ import annotations

import os
import signal
import subprocess
from dataclasses import dataclass
from typing import NamedTuple

from .daemon import RealServer, system_binary

MODULES = "/usr/lib/apache2/modules"


class ApacheMissing(RuntimeError):
    """No apache2 binary, or no mod_evasive."""


def apache_binary() -> str | None:
    """The apache2 to run, or None when it or mod_evasive is not installed."""
    binary = system_binary("apache2")
    if binary is None or not os.path.exists(f"{MODULES}/mod_evasive20.so"):
        return None
    return binary


@dataclass(frozen=True)
class Evasive:
    """mod_evasive's settings (its directives' names, lower-cased)."""

    site_count: int = 50
    page_count: int = 10
    site_interval: int = 1
    page_interval: int = 1
    blocking_period: int = 5

    def describe(self) -> str:
        return (
            f"mod_evasive DOSSiteCount {self.site_count}, DOSPageCount {self.page_count}, "
            f"intervals {self.site_interval}/{self.page_interval} s, "
            f"DOSBlockingPeriod {self.blocking_period}"
        )

    @property
    def rate(self) -> int:
        """Requests a second the site count lets through."""
        return self.site_count // self.site_interval


class Logged(NamedTuple):
    """One request as Apache logged it."""

    at: float  # time.time() when Apache had the request
    method: str
    path: str
    status: int


_CONFIG = """\
ServerRoot "{prefix}"
DefaultRuntimeDir "{prefix}"
PidFile "{prefix}/apache2.pid"
Mutex file:{prefix} default
Listen 127.0.0.1:{port}
ServerName 127.0.0.1
LoadModule mpm_event_module {modules}/mod_mpm_event.so
LoadModule authz_core_module {modules}/mod_authz_core.so
LoadModule proxy_module {modules}/mod_proxy.so
LoadModule proxy_http_module {modules}/mod_proxy_http.so
LoadModule evasive20_module {modules}/mod_evasive20.so
ErrorLog "{prefix}/error.log"
LogLevel warn
LogFormat "%{{sec}}t.%{{msec_frac}}t %>s %m %U" timed
CustomLog "{prefix}/access.log" timed
StartServers 1
ServerLimit 1
ThreadLimit 64
ThreadsPerChild 64
MaxRequestWorkers 64
MinSpareThreads 1
MaxSpareThreads 64
MaxConnectionsPerChild 0
KeepAlive On
MaxKeepAliveRequests 0
KeepAliveTimeout 60
Timeout 60
<IfModule mod_evasive20.c>
    DOSHashTableSize 3097
    DOSSiteCount {site_count}
    DOSPageCount {page_count}
    DOSSiteInterval {site_interval}
    DOSPageInterval {page_interval}
    DOSBlockingPeriod {blocking_period}
</IfModule>
ProxyPass "/" "http://{upstream}/" keepalive=On
ProxyPassReverse "/" "http://{upstream}/"
"""


class Apache(RealServer):
    """A real Apache with mod_evasive proxying to ``upstream`` (a sandbox's URL)."""

    NAME = "apache2"
    STOP_SIGNAL = signal.SIGWINCH  # graceful-stop: finish answers, then exit

    def __init__(self, upstream: str, evasive: Evasive | None = None) -> None:
        binary = apache_binary()
        if binary is None:
            raise ApacheMissing(
                "apache2 with mod_evasive is not installed "
                "(Debian: apt-get install apache2 libapache2-mod-evasive)"
            )
        super().__init__(upstream, binary)
        self.evasive = evasive or Evasive()

    def config(self) -> None:
        assert self.prefix is not None
        e = self.evasive
        config = _CONFIG.format(
            prefix=self.prefix,
            port=self.port,
            modules=MODULES,
            upstream=self.upstream,
            site_count=e.site_count,
            page_count=e.page_count,
            site_interval=e.site_interval,
            page_interval=e.page_interval,
            blocking_period=e.blocking_period,
        )
        (self.prefix / "httpd.conf").write_text(config, encoding="utf-8")

    def popen(self) -> subprocess.Popen[bytes]:
        assert self.prefix is not None
        with open(self.prefix / "errors", "wb") as errors:
            return subprocess.Popen(
                [self.binary, "-d", str(self.prefix), "-f", "httpd.conf", "-DFOREGROUND"],
                stdin=subprocess.DEVNULL,
                stdout=errors,
                stderr=errors,
                env={**os.environ, "APACHE_RUN_DIR": str(self.prefix)},
            )

    def error_log(self) -> str:
        """What apache2 said at start and in its error log."""
        if self.prefix is None:
            return ""
        said = []
        for name in ("errors", "error.log"):
            path = self.prefix / name
            if path.exists():
                said.append(path.read_text(encoding="utf-8", errors="replace").strip())
        return "\n".join(said)[-2000:]

    def requests(self) -> list[Logged]:
        """Every request Apache answered so far, in the order it had them."""
        return super().requests()

    def refusals(self) -> int:
        """Requests mod_evasive refused so far (its 403s: the sandbox answers none)."""
        return sum(entry.status == 403 for entry in self.requests())

    @staticmethod
    def parse(line: str) -> Logged | None:
        return _parse(line)


def _parse(line: str) -> Logged | None:
    fields = line.split()
    if len(fields) < 4:
        return None
    try:
        at, status = float(fields[0]), int(fields[1])
    except ValueError:
        return None
    return Logged(at, fields[2], fields[3], status)
