"""A token server built on Authlib's ``AuthorizationServer`` (the client credentials grant,
its client authentication and its bearer token generator), behind a small
``http.server`` on 127.0.0.1, with the platform's invite endpoints behind its tokens.

A second implementation beside ``oauth_server`` (oauthlib), because they differ where
the tool must work with both: Authlib decodes ``client_secret_basic`` with ``unquote``
(a ``+`` stays a plus), and grants the scope the client is allowed, narrower than asked
when the client may do less, saying so in the token answer's ``scope`` (RFC 6749 §3.3).
A token lacking the scope an endpoint needs is refused with 403 and RFC 6750's
``insufficient_scope`` body and challenge, as Authlib's resource protector words it.

``AuthlibPolicy`` lets a test make the server lie: a ``scope`` in the token answer other
than the one granted, or an ``error_description`` of its choosing on a 403.
"""

from __future__ import annotations

import json
import secrets
import threading
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl

from authlib.oauth2 import AuthorizationServer
from authlib.oauth2.rfc6749 import ClientMixin, OAuth2Request
from authlib.oauth2.rfc6749.grants import ClientCredentialsGrant
from authlib.oauth2.rfc6749.requests import BasicOAuth2Payload
from authlib.oauth2.rfc6750 import BearerTokenGenerator, InsufficientScopeError

from .local_http import LocalServer, QuietHandler, envelope

CLIENT_ID = "authlib-ci"
SECRET = "s3cr3t with spaces+plus/é"  # a space and a plus: %20 and %2B tell them apart
READ, WRITE = "kyb:invites:read", "kyb:invites:write"
_ANSWERED = object()


@dataclass
class AuthlibPolicy:
    allowed: tuple[str, ...] = (READ, WRITE)  # what the client may be granted
    methods: tuple[str, ...] = ("client_secret_basic", "client_secret_post")
    said_scope: Any = _ANSWERED  # the token answer's `scope`: as granted unless set
    forbidden_description: str | None = None  # a 403's error_description, if set
    invites: dict[str, dict[str, Any]] = field(default_factory=dict)


class _Client(ClientMixin):
    def __init__(self, policy: AuthlibPolicy) -> None:
        self.policy = policy

    def get_client_id(self) -> str:
        return CLIENT_ID

    def check_client_secret(self, client_secret: str) -> bool:
        return secrets.compare_digest(client_secret.encode(), SECRET.encode())

    def check_endpoint_auth_method(self, method: str, endpoint: str) -> bool:
        return method in self.policy.methods

    def check_grant_type(self, grant_type: str) -> bool:
        return grant_type == "client_credentials"

    def get_allowed_scope(self, scope: str | None) -> str:
        asked = (scope or "").split()
        return " ".join(s for s in asked if s in self.policy.allowed)


class _Request(OAuth2Request):
    def __init__(self, uri: str, body: str, headers: dict[str, str]) -> None:
        super().__init__("POST", uri, headers=headers)
        self._form = dict(parse_qsl(body, keep_blank_values=True))
        self.payload = BasicOAuth2Payload(self._form)

    @property
    def args(self) -> dict[str, str]:
        return {}

    @property
    def form(self) -> dict[str, str]:
        return self._form


class _Server(AuthorizationServer):
    def __init__(self, owner: AuthlibServer) -> None:
        super().__init__(scopes_supported=[READ, WRITE])
        self.owner = owner
        self.register_grant(ClientCredentialsGrant)
        self.register_token_generator(
            "default", BearerTokenGenerator(lambda **_: secrets.token_urlsafe(32))
        )

    def query_client(self, client_id: str) -> _Client | None:
        return _Client(self.owner.policy) if client_id == CLIENT_ID else None

    def save_token(self, token: dict[str, Any], request: Any) -> None:
        self.owner.granted[token["access_token"]] = set(str(token.get("scope", "")).split())
        said = self.owner.policy.said_scope
        if said is not _ANSWERED:
            if said is None:
                token.pop("scope", None)
            else:
                token["scope"] = said

    def create_oauth2_request(self, request: Any) -> _Request:
        return request

    def create_json_request(self, request: Any) -> Any:
        raise NotImplementedError

    def handle_response(self, status: int, body: Any, headers: Any) -> tuple[int, bytes, Any]:
        data = json.dumps(body).encode() if isinstance(body, dict) else (body or b"")
        return status, data, dict(headers)

    def send_signal(self, name: str, *args: Any, **kwargs: Any) -> None:
        pass


class AuthlibServer(LocalServer):
    def __init__(self, policy: AuthlibPolicy | None = None) -> None:
        self.policy = policy or AuthlibPolicy()
        self.granted: dict[str, set[str]] = {}
        self.seen: list[tuple[str, str, dict[str, str]]] = []
        self.lock = threading.Lock()
        self.oauth = _Server(self)
        super().__init__(_Handler)

    def requests(self, method: str) -> list[str]:
        return [path for m, path, _ in self.seen if m == method]


class _Handler(QuietHandler):
    def handle_method(self, method: str) -> None:
        owner: AuthlibServer = self.server.owner  # type: ignore[attr-defined]
        body = self.read_body()
        headers = dict(self.headers)
        with owner.lock:
            owner.seen.append((method, self.path, headers))
        if method == "POST" and self.path == "/oauth/token":
            # Authlib checks the transport is secure: the URI says https, as behind a proxy.
            request = _Request(f"https://127.0.0.1{self.path}", body, headers)
            status, data, out = owner.oauth.create_token_response(request)
            return self.answer(status, data, out)
        auth = headers.get("Authorization", "")
        token = auth[7:] if auth.startswith("Bearer ") else ""
        granted = owner.granted.get(token)
        if granted is None:
            challenge = {"WWW-Authenticate": 'Bearer error="invalid_token"'}
            return self.answer(401, envelope(401, None, "invalid token"), challenge)
        needed = WRITE if method == "PATCH" else READ
        if needed not in granted:
            error = InsufficientScopeError()
            if owner.policy.forbidden_description is not None:
                error.description = owner.policy.forbidden_description
            payload = dict(error.get_body())
            scope_challenge = (
                f'Bearer error="insufficient_scope", scope="{needed}", '
                f'error_description="{error.description}"'
            )
            headers = {"WWW-Authenticate": scope_challenge}
            return self.answer(403, json.dumps(payload).encode(), headers)
        return self.answer_invite(method, body, owner.policy.invites)
