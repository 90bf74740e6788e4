"""A small platform API on 127.0.0.1 that lies, stalls, floods and echoes secrets.

Each knob of ``Hostility`` is one way a server can lie or stall; with none
set it answers like the sandbox. It records every request it receives (a
redirect target is just another HostileServer that should record nothing).
"""

from __future__ import annotations

import gzip
import hashlib
import json
import secrets
import threading
import time
from collections import Counter
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass, field
from typing import Any, NamedTuple
from urllib.parse import parse_qs, unquote, urlsplit

from .local_http import INVITES, LocalServer, QuietHandler, envelope

CLIENT_ID = "hostile-ci"


@dataclass
class Hostility:
    token_redirect: str | None = None  # 1: the token request answered 307 to this URL
    redirect_status: int = 307
    wrong_ids: dict[str, str] = field(default_factory=dict)  # 2: GET key answers about value
    envelope_failure: Collection[str] = ()  # 3: these methods get 200 with success: false
    retry_after: str | None = None  # 4: GET answered 429 with this Retry-After
    drip_seconds: float | None = None  # 5: GET bodies sent one byte per this many seconds
    header_drip_seconds: float | None = None  # 5: GET status line and headers, likewise
    huge_body: int | None = None  # 6: GET bodies this many bytes long, sent as they are made
    huge_body_length_header: bool = False  # 6: announce that length in Content-Length
    gzip_bomb_mib: int | None = None  # 6: GET bodies gzipped, this many MiB once inflated
    echo_form_on_401: bool = False  # 7: the token endpoint refuses, echoing the posted form
    echo_authorization: Collection[str] = ()  # 7: these methods get a 400 echoing the header
    token_value: str | None = None  # 8: the access token issued (default: a fresh JWT-like one)
    # 9: these methods ("POST" is the token request) answered by a gateway's HTML error
    # page of this status, as nginx writes them (no envelope, no requestId)
    html_errors: dict[str, int] = field(default_factory=dict)
    # 10: the re-send is carried out (the e-mail goes), then a gateway answers with this
    # status and its HTML page, as nginx does when the platform outlasts proxy_read_timeout.
    resend_gateway_status: int | None = None
    resend_huge_body: int | None = None  # 10: the re-send is carried out, then a 200 this long
    # 11: each GET answers the invite with the client secret and the token it was read with
    # in its name and in a contact sub-field the files never manage (`title`), and in the
    # envelope's message; an unknown id's 404 quotes them too
    echo_secrets: bool = False
    # 12 (issue 33): what a platform makes of a write.
    patch_wrong_ids: dict[str, str] = field(default_factory=dict)  # PATCH key answers about value
    # What the platform stores of a PATCH body (normalising, ignoring a field...).
    patch_store: Callable[[dict[str, Any]], dict[str, Any]] | None = None
    patch_data: bool = True  # False: a PATCH is answered with `data: null`
    # 14 (issue 51): a PATCH answered with the request body as its data (many APIs echo
    # it), whatever ``patch_store`` made of it; a re-send of key e-mails value's invite
    # and answers about it, as a path template that leads elsewhere makes it.
    patch_echo: bool = False
    resend_wrong_ids: dict[str, str] = field(default_factory=dict)
    patch_statuses: list[int] = field(default_factory=list)  # PATCHes answered these first
    etags: bool = False  # GETs carry an ETag; a PATCH with another If-Match gets 412
    always_412: bool = False  # every PATCH refused 412, ETag or not
    # Before the Nth GET of an invite is answered (N from 1), these changes are made to it:
    # {invite_id: (N, changes)}; "after" makes them once the Nth GET has been answered.
    change_before_get: dict[str, tuple[int, dict[str, Any]]] = field(default_factory=dict)
    change_after_get: dict[str, tuple[int, dict[str, Any]]] = field(default_factory=dict)
    # Re-sends answered these first, in turn: 429 and 503 refuse (no e-mail), 502 and
    # "timeout" carry it out and then answer a gateway's page or nothing in time.
    resend_answers: list[int | str] = field(default_factory=list)
    patch_delay: float = 0.0  # seconds each PATCH is answered after (a signal can arrive)
    # 13: PATCHes carried out (stored), then answered with these gateway statuses first,
    # as nginx answers 504 when the platform outlasts proxy_read_timeout.
    patch_landed_statuses: list[int] = field(default_factory=list)
    # ETags as the GETs send them: "weak" (W/"...", which If-Match never matches: RFC 9110
    # §13.1.1 compares strongly) or "fresh" (a new one each GET, only the last one honoured).
    etag_style: str = "strong"
    # Re-sends answered these first, in turn: (status, headers, body, the e-mail went).
    resend_raw: list[tuple[int, dict[str, str], bytes, bool]] = field(default_factory=list)


class Seen(NamedTuple):
    method: str
    target: str
    headers: dict[str, str]
    body: str


def jwt_like() -> str:
    return "eyJhbGciOiJIUzI1NiJ9." + secrets.token_urlsafe(24) + "." + secrets.token_urlsafe(16)


class HostileServer(LocalServer):
    def __init__(
        self,
        invites: list[dict[str, Any]] | None = None,
        hostility: Hostility | None = None,
        *,
        secret: str,
        host: str = "127.0.0.1",
    ) -> None:
        super().__init__(_Handler, host)
        self.invites = {i["id"]: dict(i) for i in invites or []}
        self.hostility = hostility or Hostility()
        self.secret = secret
        self.seen: list[Seen] = []
        self.tokens: list[str] = []  # every token issued
        self.resends: Counter[str] = Counter()
        self.gets: Counter[str] = Counter()
        self.last_etag: dict[str, str] = {}  # etag_style "fresh": the one a PATCH must carry
        self.bytes_sent = 0
        self.stopping = threading.Event()
        self.lock = threading.Lock()

    def __exit__(self, *exc: object) -> None:
        self.stopping.set()
        super().__exit__()

    def client_env(self) -> dict[str, str]:
        """The CLI's settings for this server (as ``Sandbox.client_env``)."""
        return {
            "RECONCILER_BASE_URL": self.url,
            "RECONCILER_CLIENT_ID": CLIENT_ID,
            "RECONCILER_CLIENT_SECRET": self.secret,
        }

    def calls(self, method: str, prefix: str = INVITES) -> list[Seen]:
        return [s for s in self.seen if s.method == method and s.target.startswith(prefix)]

    # -- answers ------------------------------------------------------------------

    def token(self, form: dict[str, list[str]], raw: str) -> tuple[int, bytes, dict[str, str]]:
        h = self.hostility
        if h.token_redirect:
            return h.redirect_status, b"", {"Location": h.token_redirect}
        if form.get("client_secret") != [self.secret] or h.echo_form_on_401:
            return 401, envelope(401, None, f"invalid client; you sent: {raw}"), {}
        value = h.token_value if h.token_value is not None else jwt_like()
        with self.lock:
            self.tokens.append(value)
        data = {"access_token": value, "token_type": "Bearer", "expires_in": 3600}
        return 201, envelope(201, data, "Token created"), {}

    def invite(self, method: str, invite_id: str, body: Any, auth: str) -> tuple[int, bytes]:
        h = self.hostility
        if method in h.echo_authorization:
            return 400, envelope(
                400, {"authorization": auth}, f"malformed request header Authorization: {auth}"
            )
        if method in h.envelope_failure:
            current = self.invites.get(invite_id)
            return 200, envelope(200, current, "request could not be processed", success=False)
        token = auth.removeprefix("Bearer ")
        if invite_id not in self.invites:
            echoed = f" (asked by {self.secret} with {token})" if h.echo_secrets else ""
            return 404, envelope(404, None, f"invite {invite_id} not found{echoed}")
        if method == "GET":
            with self.lock:
                self.gets[invite_id] += 1
                count = self.gets[invite_id]
            due = h.change_before_get.get(invite_id)
            if due is not None and due[0] == count:
                self.invites[invite_id].update(due[1])
        if method == "PATCH":
            sent = body if isinstance(body, dict) else {}
            self.invites[invite_id].update(h.patch_store(sent) if h.patch_store else sent)
            if h.etag_style == "fresh":
                self.last_etag.pop(invite_id, None)  # the write made a new version
            if not h.patch_data:
                return 200, envelope(200, None, "invite updated")
            if h.patch_echo:
                return 200, envelope(200, {"id": invite_id, **sent}, "invite updated")
            answered = self.invites.get(h.patch_wrong_ids.get(invite_id, invite_id))
            return 200, envelope(200, answered, "invite updated")
        elif method == "RESEND":
            about = h.resend_wrong_ids.get(invite_id)
            self.resends[about or invite_id] += 1
            return 200, envelope(200, {"id": about, "status": "pending"} if about else None)
        answered = self.invites.get(h.wrong_ids.get(invite_id, invite_id))
        if h.echo_secrets and method == "GET" and answered is not None:
            contact = dict(answered.get("primaryContact") or {})
            contact["title"] = f"{self.secret}/{token}"
            name = f"{answered.get('name')} {self.secret} {token}"
            answered = dict(answered, name=name, primaryContact=contact)
            return 200, envelope(200, answered, f"read by {self.secret} with {auth}")
        return 200, envelope(200, answered)

    def etag(self, invite_id: str) -> str:
        if self.hostility.etag_style == "fresh":
            return self.last_etag.get(invite_id, '"none yet"')
        invite = self.invites.get(invite_id, {})
        digest = hashlib.sha256(json.dumps(invite, sort_keys=True).encode()).hexdigest()
        return f'"{digest[:16]}"'

    def etag_to_send(self, invite_id: str) -> str:
        """The ETag a GET answer carries, as ``etag_style`` makes it."""
        style = self.hostility.etag_style
        if style == "fresh":
            with self.lock:
                self.last_etag[invite_id] = f'"{secrets.token_hex(8)}"'
            return self.last_etag[invite_id]
        tag = self.etag(invite_id)
        return f"W/{tag}" if style == "weak" else tag

    def if_match_holds(self, if_match: str, invite_id: str) -> bool:
        """RFC 9110 §13.1.1: If-Match compares strongly; a weak tag never matches."""
        tags = [t.strip() for t in if_match.split(",")]
        return any(t == self.etag(invite_id) and not t.startswith("W/") for t in tags)


class _Handler(QuietHandler):
    @property
    def hostile(self) -> HostileServer:
        return self.server.owner  # type: ignore[attr-defined]

    def handle_method(self, method: str) -> None:
        hostile = self.hostile
        raw = self.read_body()
        with hostile.lock:
            hostile.seen.append(Seen(method, self.path, dict(self.headers), raw))
        path = urlsplit(self.path).path
        if method in hostile.hostility.html_errors:
            return self._html_error(hostile.hostility.html_errors[method])
        if method == "POST" and path == "/oauth/token":
            status, body, headers = hostile.token(parse_qs(raw), raw)
            return self._answer(status, body, headers)
        if not path.startswith(INVITES):
            return self._answer(404, envelope(404, None, "no such endpoint"), {})
        invite_id = unquote(path[len(INVITES) :].removesuffix("/resend"))
        operation = "RESEND" if path.endswith("/resend") else method
        h = hostile.hostility
        if operation == "RESEND" and invite_id in hostile.invites:
            if h.resend_gateway_status is not None:
                with hostile.lock:
                    hostile.resends[invite_id] += 1
                page = f"<html><body><h1>{h.resend_gateway_status} Gateway</h1></body></html>"
                headers = {"Content-Type": "text/html"}
                return self._answer(h.resend_gateway_status, page.encode(), headers)
            if h.resend_huge_body is not None:
                with hostile.lock:
                    hostile.resends[invite_id] += 1
                return self._flood(h.resend_huge_body, announce=False)
        if operation == "RESEND" and invite_id in hostile.invites and h.resend_raw:
            with hostile.lock:
                status, headers, raw_page, went = h.resend_raw.pop(0)
                if went:
                    hostile.resends[invite_id] += 1
            return self._answer(status, raw_page, headers)
        if operation == "RESEND" and invite_id in hostile.invites and h.resend_answers:
            with hostile.lock:
                answer = h.resend_answers.pop(0)
                if answer in (502, "timeout"):
                    hostile.resends[invite_id] += 1  # carried out; the answer is lost
            if answer == "timeout":
                time.sleep(3.5)  # past the client's timeout (QUICK-style settings)
                self.close_connection = True
                return None
            if answer in (429, 503):  # a gateway's refusal, before the platform saw it
                return self._html_error(int(answer))
            return self._html_error(int(answer))
        if method == "PATCH" and invite_id in hostile.invites:
            if h.patch_delay:
                time.sleep(h.patch_delay)
            with hostile.lock:
                refused = h.patch_statuses.pop(0) if h.patch_statuses else None
            if refused is not None:
                return self._html_error(refused)
            if_match = self.headers.get("If-Match")
            if h.always_412 or (
                h.etags and if_match is not None and not hostile.if_match_holds(if_match, invite_id)
            ):
                return self._answer(412, envelope(412, None, "precondition failed"), {})
            with hostile.lock:
                landed = h.patch_landed_statuses.pop(0) if h.patch_landed_statuses else None
            if landed is not None:
                sent = json.loads(raw) if raw else {}
                hostile.invites[invite_id].update(h.patch_store(sent) if h.patch_store else sent)
                if h.etag_style == "fresh":
                    hostile.last_etag.pop(invite_id, None)  # the write made a new version
                return self._html_error(landed)
        if method == "GET" and h.retry_after is not None:
            headers = {"Retry-After": h.retry_after}
            return self._answer(429, envelope(429, None, "rate limit exceeded"), headers)
        if method == "GET" and h.header_drip_seconds is not None:
            return self._drip_headers(h.header_drip_seconds)
        if method == "GET" and h.huge_body is not None:
            return self._flood(h.huge_body, h.huge_body_length_header)
        if method == "GET" and h.gzip_bomb_mib is not None:
            return self._answer(200, gzip_bomb(h.gzip_bomb_mib), {"Content-Encoding": "gzip"})
        sent_body = json.loads(raw) if raw else None
        auth = self.headers.get("Authorization", "")
        status, reply = hostile.invite(operation, invite_id, sent_body, auth)
        if method == "GET" and h.drip_seconds is not None:
            return self._drip(reply, h.drip_seconds)
        headers = {"ETag": hostile.etag_to_send(invite_id)} if method == "GET" and h.etags else {}
        self._answer(status, reply, headers)
        due = h.change_after_get.get(invite_id)
        if method == "GET" and due is not None and due[0] == hostile.gets[invite_id]:
            hostile.invites[invite_id].update(due[1])
        return None

    def _html_error(self, status: int) -> None:
        title = f"{status} {self.responses.get(status, ('Error',))[0]}"
        page = (
            f"<html>\r\n<head><title>{title}</title></head>\r\n<body>\r\n"
            f"<center><h1>{title}</h1></center>\r\n<hr><center>nginx/1.22.1</center>\r\n"
            "</body>\r\n</html>\r\n"
        ).encode()
        self.send_response(status)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(page)))
        self.end_headers()
        self._write(page)

    def _answer(self, status: int, body: bytes, headers: dict[str, str]) -> None:
        self.send_response(status)
        if "Content-Type" not in headers:
            self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        self._write(body)

    def _write(self, data: bytes) -> bool:
        try:
            self.wfile.write(data)
            self.wfile.flush()
        except OSError:  # the client hung up: what a bounded client does
            self.close_connection = True
            return False
        with self.hostile.lock:
            self.hostile.bytes_sent += len(data)
        return True

    def _drip(self, body: bytes, seconds: float) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Connection", "close")  # no length: the body ends when we say
        self.end_headers()
        for byte in _endless(body):
            if self.hostile.stopping.is_set() or not self._write(byte):
                break
            time.sleep(seconds)
        self.close_connection = True

    def _drip_headers(self, seconds: float) -> None:
        """An answer that never gets past its headers: each read gets a byte in time."""
        head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
        for byte in _endless(head, b"X-Padding: " + b"a" * 1000 + b"\r\n"):
            if self.hostile.stopping.is_set() or not self._write(byte):
                break
            time.sleep(seconds)
        self.close_connection = True

    def _flood(self, size: int, announce: bool) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        if announce:
            self.send_header("Content-Length", str(size))
        self.send_header("Connection", "close")
        self.end_headers()
        block = b'{"data": "' + b"x" * (64 * 1024)
        sent = 0
        while sent < size and not self.hostile.stopping.is_set() and self._write(block):
            sent += len(block)
        self.close_connection = True


def gzip_bomb(mebibytes: int) -> bytes:
    """About 1 KiB per MiB inflated: gzip members may follow one another in one body."""
    member = gzip.compress(b'{"data": "' + b" " * (1024 * 1024 - 10), compresslevel=9)
    return member * mebibytes


def _endless(start: bytes, then: bytes = b" ") -> Iterator[bytes]:
    """``start`` a byte at a time, then ``then`` over and over: a drip that never ends."""
    for i in range(len(start)):
        yield start[i : i + 1]
    while True:
        for i in range(len(then)):
            yield then[i : i + 1]
