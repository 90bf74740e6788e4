"""What the sandbox's exchanges are made of: a request and its answer, the paths and
scopes of the contract as published, each status's hint in the envelope, and the
refusals (raised anywhere, turned into an envelope in one place)."""

from __future__ import annotations

import json
from typing import Any, NamedTuple
from urllib.parse import unquote

READ_SCOPE = "kyb:invites:read"


WRITE_SCOPE = "kyb:invites:write"


KNOWN_SCOPES = (READ_SCOPE, WRITE_SCOPE)


INVITES_PREFIX = "/public-api/v1/kyb/invites/"


STATUS_HINTS = {
    200: "The request succeeded.",
    201: "This kind of response is used when a new entity is created.",
    400: "The request body or parameters are invalid.",
    401: "Authentication is missing, invalid or expired.",
    403: "The access token lacks a scope this operation needs.",
    404: "The requested resource does not exist.",
    409: "The request conflicts with the resource's current state.",
    412: "The resource changed since it was read; read it again.",
    413: "The request body is too large.",
    429: "Too many requests; wait for Retry-After seconds.",
    503: "The service is temporarily unavailable.",
}


class Response(NamedTuple):
    status: int
    body: bytes
    headers: dict[str, str]


DROP = Response(0, b"", {})  # close the connection without answering


class Request(NamedTuple):
    method: str
    path: str
    headers: Any
    body: bytes
    invite_id: str = ""


def resource_of(path: str) -> tuple[str, str]:
    """What a path names ("token", "accounts", "invite", "resend"; "" for nothing) and the
    invite id in it."""
    if path == "/oauth/token":
        return "token", ""
    if path == "/public-api/v1/accounts":
        return "accounts", ""
    if not path.startswith(INVITES_PREFIX):
        return "", ""
    invite_id, _, action = path[len(INVITES_PREFIX) :].partition("/")
    resource = {"": "invite", "resend": "resend"}.get(action, "")
    return resource, unquote(invite_id)


def decoded_body(body: bytes) -> Any:
    if not body:
        return None
    try:
        return json.loads(body)
    except (UnicodeDecodeError, ValueError):
        return None  # forms (the token request, with its secret) are never kept


class Refused(Exception):
    """A request the contract answers with an error status and an envelope."""

    status = 400

    def __init__(self, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.message = message
        self.data = data


class BadRequest(Refused):
    status = 400


class Unauthorized(Refused):
    status = 401


class Forbidden(Refused):
    status = 403


class NotFound(Refused):
    status = 404


class MethodNotAllowed(Refused):
    status = 405


class NotPending(Refused):
    """The invite exists but is no longer pending: it cannot change or be re-sent."""

    status = 409


class PreconditionFailed(Refused):
    """A PATCH whose If-Match is not the invite's ETag: it changed since it was read."""

    status = 412
