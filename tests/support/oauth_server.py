"""A token server built on oauthlib (RFC 6749's client credentials grant, as
``BackendApplicationServer`` implements it), behind a small ``http.server`` on
127.0.0.1, with the platform's invite endpoints behind its bearer tokens (RFC 6750).

What oauthlib answers is what a standard token server answers: bare RFC 6749 token
bodies, ``{"error": "invalid_client"}`` with 401, ``invalid_scope`` and
``unauthorized_client`` with 400. ``TokenPolicy`` says which client authentication
it takes and what it issues; it records every request it receives.
"""

from __future__ import annotations

import base64
import threading
from dataclasses import dataclass, field
from typing import Any, NamedTuple
from urllib.parse import unquote_plus

from oauthlib.oauth2 import BackendApplicationServer, RequestValidator

from .local_http import LocalServer, QuietHandler, envelope

CLIENT_ID = "oauth-ci"
# Changes when encoded, holds the ':' Basic splits on, and a space and a plus that "+"
# would confuse: oauthlib's server decodes with unquote_plus, Authlib's with unquote.
SECRET = "s3cr3t:/+&=é oauth"
SCOPES = ("kyb:invites:read", "kyb:invites:write")


@dataclass
class TokenPolicy:
    methods: tuple[str, ...] = ("client_secret_post", "client_secret_basic")
    token_type: str = "Bearer"  # what the token answer says (DPoP, mac, ...)
    expires_in: Any = 3600  # what it says of the lifetime: 0.001, 0, 10**400
    grant_allowed: bool = True  # False: unauthorized_client
    scopes: tuple[str, ...] = SCOPES  # what the client may ask for
    invites: dict[str, dict[str, Any]] = field(default_factory=dict)


class Seen(NamedTuple):
    method: str
    path: str
    headers: dict[str, str]
    body: str


class _Client:
    def __init__(self, client_id: str) -> None:
        self.client_id = client_id


class _Validator(RequestValidator):
    def __init__(self, policy: TokenPolicy, issued: set[str]) -> None:
        self.policy = policy
        self.issued = issued

    def client_authentication_required(self, request: Any, *args: Any, **kwargs: Any) -> bool:
        return True

    def authenticate_client(self, request: Any, *args: Any, **kwargs: Any) -> bool:
        client_id, secret = None, None
        auth = request.headers.get("Authorization", "")
        if auth.startswith("Basic ") and "client_secret_basic" in self.policy.methods:
            # RFC 6749 §2.3.1: each part form-encoded before Base64.
            pair = base64.b64decode(auth[6:]).decode("utf-8")
            user, _, password = pair.partition(":")
            client_id, secret = unquote_plus(user), unquote_plus(password)
        elif request.client_secret is not None and "client_secret_post" in self.policy.methods:
            client_id, secret = request.client_id, request.client_secret
        if client_id != CLIENT_ID or secret != SECRET:
            return False
        request.client = _Client(client_id)
        request.client_id = client_id
        return True

    def authenticate_client_id(self, client_id: str, request: Any, *a: Any, **k: Any) -> bool:
        return False

    def validate_grant_type(self, client_id: str, grant_type: str, client: Any, request: Any,
                            *args: Any, **kwargs: Any) -> bool:  # fmt: skip
        return self.policy.grant_allowed and grant_type == "client_credentials"

    def validate_scopes(self, client_id: str, scopes: list[str], client: Any, request: Any,
                        *args: Any, **kwargs: Any) -> bool:  # fmt: skip
        return set(scopes) <= set(self.policy.scopes)

    def get_default_scopes(self, client_id: str, request: Any, *a: Any, **k: Any) -> list[str]:
        return list(self.policy.scopes)

    def save_bearer_token(self, token: dict[str, Any], request: Any, *a: Any, **k: Any) -> None:
        token["token_type"] = self.policy.token_type  # what the answer says, as configured
        self.issued.add(token["access_token"])

    def validate_bearer_token(self, token: str, scopes: list[str], request: Any) -> bool:
        if token not in self.issued:
            return False
        request.scopes = scopes
        return True


class OAuthServer(LocalServer):
    def __init__(self, policy: TokenPolicy | None = None) -> None:
        self.policy = policy or TokenPolicy()
        self.issued: set[str] = set()
        self.seen: list[Seen] = []
        self.lock = threading.Lock()
        self.validator = _Validator(self.policy, self.issued)

        def expires_in(request: Any) -> Any:
            return self.policy.expires_in

        self.endpoint = BackendApplicationServer(self.validator, token_expires_in=expires_in)
        super().__init__(_Handler)

    def token_requests(self) -> list[Seen]:
        return [s for s in self.seen if s.path == "/oauth/token"]


class _Handler(QuietHandler):
    def handle_method(self, method: str) -> None:
        oauth: OAuthServer = self.server.owner  # type: ignore[attr-defined]
        body = self.read_body()
        headers = dict(self.headers)
        with oauth.lock:
            oauth.seen.append(Seen(method, self.path, headers, body))
        # oauthlib checks the transport is secure: the URI it sees says https, as a
        # TLS-terminating proxy in front of it would.
        uri = f"https://127.0.0.1{self.path}"
        if method == "POST" and self.path == "/oauth/token":
            out_headers, out_body, status = oauth.endpoint.create_token_response(
                uri, http_method="POST", body=body, headers=headers
            )
            return self.answer(status, (out_body or "").encode(), out_headers)
        valid, _ = oauth.endpoint.verify_request(
            uri, http_method=method, body=body, headers=headers, scopes=["kyb:invites:read"]
        )
        if not valid:
            challenge = {"WWW-Authenticate": 'Bearer error="invalid_token"'}
            return self.answer(401, envelope(401, None, "invalid token"), challenge)
        return self.answer_invite(method, body, oauth.policy.invites)
