"""A real nginx in front of a sandbox, for tests and benchmarks (no pytest here).

Each ``Nginx`` is its own process with its own prefix in a temporary directory:
``nginx -p PREFIX -c nginx.conf`` with ``daemon off``, its pid and error log in that
directory, listening on a free port of 127.0.0.1. The system's nginx service is never
touched. What sits in front of the sandbox is chosen with ``Gateway``: ``limit_req``
at a rate, with or without a burst (``nodelay``), a ``Retry-After`` header or not, and
the status of a refusal (429, or nginx's default 503).

    with Sandbox(invites) as sandbox, Nginx(sandbox.url, Gateway(rate=10)) as gateway:
        env = gateway.client_env(sandbox)
"""

from __future__ import annotations

import signal
import subprocess
from dataclasses import dataclass

from .daemon import RealServer, system_binary


class NginxMissing(RuntimeError):
    """No nginx binary on PATH (nor in /usr/sbin)."""


def nginx_binary() -> str | None:
    """The nginx to run, or None when it is not installed."""
    return system_binary("nginx")


@dataclass(frozen=True)
class Gateway:
    """What nginx does in front of the sandbox.

    ``rate`` in requests per second (None: no limit), ``burst`` requests over it
    answered at once (``nodelay``), ``retry_after`` seconds in a ``Retry-After``
    header on every refusal (None: no header, as nginx's default), ``status`` of
    a refusal (nginx's own default is 503).
    """

    rate: float | None = None
    burst: int = 0
    retry_after: int | None = None
    status: int = 429
    # Seconds nginx waits for the answer to a re-send (`proxy_read_timeout`); past it,
    # nginx answers 504 while the platform goes on and sends the e-mail.
    resend_read_timeout: float | None = None

    def resend_location(self) -> str:
        if self.resend_read_timeout is None:
            return ""
        return (
            "location ~ /resend$ {\n"
            f"            proxy_read_timeout {self.resend_read_timeout:g}s;\n"
            "            proxy_pass http://sandbox;\n"
            "            proxy_http_version 1.1;\n"
            '            proxy_set_header Connection "";\n'
            "            proxy_set_header Host $http_host;\n"
            "        }"
        )

    # TLS with this (certificate, key) and these protocols, a client
    # certificate required (signed by client_ca), bodies over max_body_size refused (413).
    tls: tuple[str, str] | None = None
    tls_protocols: str = "TLSv1.2 TLSv1.3"
    client_ca: str | None = None
    max_body_size: str | None = None

    def server_lines(self) -> str:
        lines = []
        if self.tls is not None:
            cert, key = self.tls
            lines += [f"ssl_certificate {cert};", f"ssl_certificate_key {key};"]
            lines += [f"ssl_protocols {self.tls_protocols};"]
            # OpenSSL 3 refuses TLS 1.0 at its default security level, even to offer it.
            lines += ["ssl_ciphers DEFAULT:@SECLEVEL=0;"]
        if self.client_ca is not None:
            lines += [f"ssl_client_certificate {self.client_ca};", "ssl_verify_client on;"]
        if self.max_body_size is not None:
            lines += [f"client_max_body_size {self.max_body_size};"]
        return "".join(f"{line}\n        " for line in lines)

    def limit_lines(self) -> str:
        if self.rate is None:
            return ""
        burst = f" burst={self.burst} nodelay" if self.burst else ""
        lines = f"limit_req zone=api{burst};\n            limit_req_status {self.status};\n"
        if self.retry_after is not None:
            # `always`: nginx adds headers to error answers only when told to; the
            # map leaves the header off every other answer (an empty value is no header).
            lines += "            add_header Retry-After $retry_after always;\n"
        return lines

    def zone_line(self) -> str:
        if self.rate is None:
            return ""
        # nginx takes whole requests per second or per minute.
        rate = f"{self.rate:g}r/s" if self.rate == int(self.rate) else f"{self.rate * 60:.0f}r/m"
        # One key for every client: the limit is the gateway's, whoever asks.
        zone = f"limit_req_zone $server_name zone=api:1m rate={rate};"
        if self.retry_after is None:
            return zone
        refusal = f"{self.status} {self.retry_after};"
        return f'{zone}\n    map $status $retry_after {{ {refusal} default ""; }}'


_CONFIG = """\
daemon off;
worker_processes 1;
pid {prefix}/nginx.pid;
error_log {prefix}/error.log warn;
events {{ worker_connections 512; }}
http {{
    access_log off;
    client_body_temp_path {prefix}/tmp/body;
    proxy_temp_path {prefix}/tmp/proxy;
    fastcgi_temp_path {prefix}/tmp/fastcgi;
    uwsgi_temp_path {prefix}/tmp/uwsgi;
    scgi_temp_path {prefix}/tmp/scgi;
    {zone}
    upstream sandbox {{
        server {upstream};
        keepalive 32;
    }}
    server {{
        listen 127.0.0.1:{port}{ssl};
        server_name gateway;
        {server}{resend}
        location / {{
            {limit}proxy_pass http://sandbox;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_set_header Host $http_host;
        }}
    }}
}}
"""


class Nginx(RealServer):
    """A real nginx proxying to ``upstream`` (a sandbox's URL), started on ``start()``."""

    NAME = "nginx"
    STOP_SIGNAL = signal.SIGQUIT  # graceful: finish answers, then exit

    def __init__(self, upstream: str, gateway: Gateway | None = None) -> None:
        binary = nginx_binary()
        if binary is None:
            raise NginxMissing("nginx is not installed (Debian: apt-get install nginx-light)")
        super().__init__(upstream, binary)
        self.gateway = gateway or Gateway()

    @property
    def url(self) -> str:
        scheme = "https" if self.gateway.tls else "http"
        return f"{scheme}://127.0.0.1:{self.port}"

    def config(self) -> None:
        assert self.prefix is not None
        (self.prefix / "tmp").mkdir()
        config = _CONFIG.format(
            prefix=self.prefix,
            port=self.port,
            upstream=self.upstream,
            zone=self.gateway.zone_line(),
            limit=self.gateway.limit_lines(),
            resend=self.gateway.resend_location(),
            ssl=" ssl" if self.gateway.tls else "",
            server=self.gateway.server_lines(),
        )
        (self.prefix / "nginx.conf").write_text(config, encoding="utf-8")

    def popen(self) -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            [self.binary, "-p", str(self.prefix), "-c", "nginx.conf", "-e", "stderr"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )

    def error_log(self) -> str:
        """What nginx said: its error log, and its stderr once it has exited."""
        text = ""
        if self.prefix is not None and (self.prefix / "error.log").exists():
            text = (self.prefix / "error.log").read_text(encoding="utf-8", errors="replace")
        if self._process is not None and self._process.poll() is not None and self._process.stderr:
            text += self._process.stderr.read().decode("utf-8", "replace")
        return text.strip()[-2000:]

    def refusals(self) -> int:
        """Requests nginx refused for its limit so far (it logs each one)."""
        if self.prefix is None or not (self.prefix / "error.log").exists():
            return 0
        with open(self.prefix / "error.log", encoding="utf-8", errors="replace") as log:
            return sum(1 for line in log if "limiting requests" in line)
