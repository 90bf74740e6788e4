"""The platform's API as ApiClient tests mock it: URLs, the answer envelope, a token, an invite."""

from __future__ import annotations

from typing import Any

BASE = "https://api.example.test"


TOKEN = "eyJhbGciOiJSUzI1NiJ9.tokFIRSTpayload.sig1"


INVITES = BASE + "/public-api/v1/kyb/invites/"


INVITE_URL = INVITES + "inv_8f2k1"


def envelope(
    data: Any,
    *,
    status: int = 200,
    message: str = "OK",
    request_id: str = "1001",
) -> dict[str, Any]:
    return {
        "status": status,
        "success": 200 <= status < 300,
        "message": message,
        "data": data,
        "metadata": {"requestId": request_id, "timestamp": "2026-11-22T10:00:00.000Z"},
        "details": {"hint": "test"},
    }


def token_response(token: str = TOKEN, expires_in: int = 86400) -> dict[str, Any]:
    data = {"access_token": token, "token_type": "Bearer", "expires_in": expires_in}
    return {"status_code": 201, "json": envelope(data, status=201, message="Token created")}


INVITE = {
    "id": "inv_8f2k1",
    "status": "pending",
    "name": "Acme Holdings Ltd",
    "email": "compliance@acme.example",
    "phone": "+442079460000",
    "primaryContact": {"name": "Jane Doe", "email": "jane@acme.example"},
    "groups": ["emea", "enterprise"],
    "addOns": ["edd"],
    "attachments": ["certificate-of-incorporation"],
    "createdAt": "2026-01-01T00:00:00.000Z",
}
