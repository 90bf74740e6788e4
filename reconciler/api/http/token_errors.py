"""What a user is told when the token request fails: the request named, the token
endpoint's own words (RFC 6749 §5.2 ``error`` and ``error_description``, redacted,
escaped and bounded), and advice that fits the error code, about settings that exist.

No token means no request of the run can succeed: every failure here is one error
for the whole run, never the same refusal repeated for every invite.
"""

from __future__ import annotations

from collections.abc import Callable

from reconciler.api.exceptions import ApiError, AuthenticationFailed, Redirected
from reconciler.api.http.token_answer import OAuthError
from reconciler.settings.config import Settings

_HOW = {
    "client_secret_post": "the id and secret in the form",
    "client_secret_basic": "HTTP Basic",
}
_OTHER = {"client_secret_post": "client_secret_basic", "client_secret_basic": "client_secret_post"}


def _sent_as(settings: Settings) -> str:
    method = settings.token_auth_method
    return f"token_auth_method {method}: {_HOW.get(method, method)}"


def _credentials(settings: Settings) -> str:
    other = _OTHER.get(settings.token_auth_method, "client_secret_basic")
    return (
        f"check RECONCILER_CLIENT_ID and RECONCILER_CLIENT_SECRET; they were sent with "
        f"{_sent_as(settings)} (a server that takes only the other way needs "
        f"token_auth_method: {other}, or RECONCILER_TOKEN_AUTH_METHOD={other})"
    )


def _scope(settings: Settings) -> str:
    return (
        f"the scope asked for ({settings.contract.scope!r}, set with RECONCILER_SCOPE) is "
        f"unknown to the server or more than client id {settings.client_id!r} was granted; "
        "ask for the scopes this client holds"
    )


def _grant(settings: Settings) -> str:
    return (
        f"client id {settings.client_id!r} may not use the client_credentials grant; the "
        "platform must allow that grant for this client"
    )


def _grant_type(settings: Settings) -> str:
    return (
        f"this endpoint does not offer the client_credentials grant; check token_path "
        f"({settings.contract.token_path!r}) and RECONCILER_BASE_URL"
    )


def _malformed(settings: Settings) -> str:
    return (
        f"the server found the request malformed; check token_path "
        f"({settings.contract.token_path!r}) and {_sent_as(settings)}"
    )


# RFC 6749 §5.2's codes, and what each asks the user to check.
ADVICE: dict[str, Callable[[Settings], str]] = {
    "invalid_client": _credentials,
    "invalid_grant": _credentials,
    "invalid_scope": _scope,
    "unauthorized_client": _grant,
    "unsupported_grant_type": _grant_type,
    "invalid_request": _malformed,
}


def token_failure(error: ApiError, oauth: OAuthError | None, settings: Settings) -> ApiError:
    """The error a failed token request becomes (not a network failure: those name the
    host themselves)."""
    request = f"the token request (POST {settings.contract.token_path})"
    status = error.status
    if oauth is not None:
        advice = ADVICE.get(oauth.code)
        if advice is None:  # a code RFC 6749 does not define: the generic advice by status
            advice = _credentials if status == 401 else _by_status(status)
        message = f"{request} was refused: {oauth}; {advice(settings)}"
    elif isinstance(error, Redirected):
        message = (
            f"no token from {request}: {error.message}; check RECONCILER_BASE_URL and token_path"
        )
    elif status == 401:
        message = (
            f"the token endpoint refused client id {settings.client_id!r}: {error.message}; "
            f"{_credentials(settings)}"
        )
    elif status is not None and 400 <= status < 500 and status != 429:
        message = f"no token from {request}: {error.message}; {_by_status(status)(settings)}"
    else:
        # A 5xx or 429 after every retry, or an answer unreadable: the request is named,
        # the class kept (a server fault is not the credentials' fault).
        error.message = f"no token from {request}: {error.message}"
        return error
    return AuthenticationFailed(
        message,
        status=status,
        request_id=error.request_id,
        details=error.details,
    )


def _by_status(status: int | None) -> Callable[[Settings], str]:
    def advice(settings: Settings) -> str:
        if status == 404:
            return f"check token_path ({settings.contract.token_path!r}) and RECONCILER_BASE_URL"
        if status == 413:
            return (
                "a proxy or gateway in front of the token endpoint limits request bodies; "
                "ask its operators"
            )
        return (
            f"check RECONCILER_SCOPE ({settings.contract.scope!r}), RECONCILER_CLIENT_ID and "
            "token_path"
        )

    return advice
