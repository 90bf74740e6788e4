"""Why the sandbox refuses a request: raised anywhere, turned into an envelope in one place."""

from __future__ import annotations

from typing import Any


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
