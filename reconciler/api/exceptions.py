"""API failures as a small hierarchy chosen by HTTP status (after github3.py).

Which statuses mean what, and when a write may have been carried out although no
answer says so (``outcome_unknown``): docs/api-contract.md, "Status codes" and
"Re-sending is not idempotent".
"""

from __future__ import annotations

from typing import Any

from reconciler.errors import ReconcilerError
from reconciler.safetext import redact_and_escape


class ApiError(ReconcilerError):
    """A request that failed, with what the server said about it."""

    # Whether every other request of the run would fail the same way (the credentials,
    # the scope, the server or the network): the run stops rather than list each one.
    run_fatal = False

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        request_id: str | None = None,
        retry_after: float | None = None,
        details: Any = None,
        enveloped: bool = False,
        said_success: bool = False,
        bearer_error: str | None = None,
    ) -> None:
        # Messages and ids often come from the server, which may echo what it was
        # sent: redacted and escaped here, whoever builds the error (twice is harmless).
        message = redact_and_escape(message)
        super().__init__(message)
        self.message = message
        self.status = status
        self.request_id = redact_and_escape(request_id) if request_id is not None else None
        self.retry_after = retry_after
        self.details = details  # per-field problems from the envelope's data
        # The answer was the platform's own envelope, not a gateway's page or a cut body.
        self.enveloped = enveloped
        # A failure status whose envelope says `success: true`: the answer contradicts
        # itself, so it is no refusal anyone can trust (the platform may have done it).
        self.said_success = said_success
        # RFC 6750's error code, when the resource server gave one (`insufficient_scope`).
        self.bearer_error = bearer_error

    @property
    def outcome_unknown(self) -> bool:
        """Whether the request may have been carried out although no answer says so."""
        return self.said_success

    @property
    def refused_before_acting(self) -> bool:
        """A refusal made before the request was acted on (a 429 or a 503, any body):
        sending it again is safe even for a write that is not idempotent (the re-send),
        and it is sent again within the run (``exchange.may_retry``). The one place that
        decides it: an answer newly known to be such a refusal is classified here."""
        return False

    def __str__(self) -> str:
        status = f"HTTP {self.status}: " if self.status else ""
        request = f" (requestId {self.request_id})" if self.request_id else ""
        return f"{status}{self.message}{_problems(self.details)}{request}"


def _problems(details: Any) -> str:
    """The server's per-field problems, when a failure body lists them."""
    if not isinstance(details, dict) or not details:
        return ""
    shown = [
        f"{redact_and_escape(str(key))}: {redact_and_escape(str(value))}"
        for key, value in list(details.items())[:5]
    ]
    more = f"; and {len(details) - 5} more" if len(details) > 5 else ""
    return f" [{'; '.join(shown)}{more}]"


class TransportError(ApiError):
    """No HTTP answer: connection refused or dropped, timeout, TLS failure."""

    run_fatal = True

    def __init__(self, message: str, *, maybe_sent: bool, permanent: bool = False) -> None:
        super().__init__(message)
        # False only when the request certainly never reached the server.
        self.maybe_sent = maybe_sent
        # True when trying again cannot help (a certificate that fails verification).
        self.permanent = permanent

    @property
    def outcome_unknown(self) -> bool:
        return self.maybe_sent


class InvalidRequest(ApiError):
    """400: the server rejected the body."""


class AuthenticationFailed(ApiError):
    """401: credentials refused, or token missing, invalid or expired."""

    run_fatal = True


class PermissionDenied(ApiError):
    """403: the platform's own refusal (its envelope, its requestId): the client may not do
    this (a scope its token lacks, a permission on the platform). Never retried."""

    run_fatal = True


_NOT_THE_PLATFORMS = "; not the platform's answer"
# Said of a 403 that is not the platform's when no token of this run was accepted yet
# (the token request's, or an invite operation's before any answer): one text for both.
GATEWAY_PAGE = (
    "not the platform's answer (no envelope): a gateway or proxy in front of it refused "
    "the request. One that blocks a client sending too fast (mod_evasive, a WAF's rate "
    "rule) refuses every request for a while after a burst: wait, then run again with "
    "--max-rate below its limit"
)


class GatewayForbidden(ApiError):
    """A 403 that is not the platform's (no envelope: an HTML page, an empty body, a JSON
    body of another's making) after a token of this run was accepted: a gateway in front
    refusing a client it finds too fast (Apache's mod_evasive, a WAF's rate-based rule, a
    CDN's bot rule), which blocks it for a while and keeps blocking while it keeps
    sending. A rate signal, like a 429 without Retry-After.

    Whether the platform saw the request is known only when the block is ``confirmed``
    to cover the whole client (``exchange``): a harmless read sent right after it was
    refused too, or the block was on when it left. A gateway that refuses in the answer
    phase (a WAF's response rule) may have let a write through first: unconfirmed, a
    write's outcome is unknown, and it is never sent again on the strength of the 403."""

    def __init__(self, message: str, *, confirmed: bool = True, **kwargs: Any) -> None:
        super().__init__(message, **kwargs)
        self.confirmed = confirmed

    @property
    def run_fatal(self) -> bool:  # type: ignore[override]
        # A block on the client refuses every request after it; a refusal of one write
        # that the next read got past says nothing of the others.
        return self.confirmed

    @property
    def outcome_unknown(self) -> bool:
        return self.said_success or not self.confirmed

    @property
    def refused_before_acting(self) -> bool:
        # Confirmed a block on the client: the platform never saw it, a write or a
        # re-send alike. Unconfirmed: the gateway may have refused the answer, not the
        # request.
        return self.status == 403 and not self.said_success and self.confirmed

    def unconfirmed(self, why: str) -> GatewayForbidden:
        """This refusal of a write, not shown to be a block on the client (``why``)."""
        page = self.message.split(_NOT_THE_PLATFORMS)[0]
        return GatewayForbidden(
            f"{page}{_NOT_THE_PLATFORMS} (no envelope), yet {why}: a gateway that refuses "
            "answers, not requests (a WAF's response rule), may have let it through to the "
            "platform, so whether it was carried out is unknown",
            status=self.status,
            request_id=self.request_id,
            confirmed=False,
        )

    @classmethod
    def of(cls, error: ApiError) -> GatewayForbidden | None:
        """``error`` as a gateway's refusal, when it is a 403 that is not the platform's
        (no envelope, no RFC 6750 challenge); None otherwise. An ``X-Request-Id`` header
        alone does not make it the platform's: nginx's ``add_header`` and Heroku's router
        set one on any page. Whether a token was accepted before is the caller's to know
        (``exchange``)."""
        if not isinstance(error, PermissionDenied) or error.status != 403:
            return None
        if error.enveloped or error.bearer_error is not None:
            return None
        return cls(
            f"{error.message}{_NOT_THE_PLATFORMS} (no envelope) to a client whose "
            "token it had accepted: a gateway in front of it refused the request, for speed",
            status=error.status,
            request_id=error.request_id,
        )


class NotFound(ApiError):
    """404: no invite with that id."""


class Conflict(ApiError):
    """409: the invite is no longer pending."""


class RateLimited(ApiError):
    """429: too many requests; retry_after says how long to wait."""

    run_fatal = True

    @property
    def refused_before_acting(self) -> bool:
        # A 429 from an answer; not the run's own "not sent" (no status), which never left.
        return self.status == 429 and not self.said_success


class PreconditionFailed(ApiError):
    """412: the PATCH's If-Match no longer matches: the invite changed since it was read,
    and nothing was written."""


class ServerError(ApiError):
    """5xx: a fault on the server or a gateway in front of it."""

    run_fatal = True

    @property
    def outcome_unknown(self) -> bool:
        # A gateway's 502 or 504 (nginx timing out on the platform, say) or any 5xx that
        # is not the platform's envelope says nothing of whether the platform did it. A
        # refusal before acting (a 503, whatever its body: nginx's limit_req, HAProxy's
        # full queue, the platform's own) did nothing.
        if self.said_success:
            return True
        if self.refused_before_acting:
            return False
        return self.status in (502, 504) or not self.enveloped

    @property
    def refused_before_acting(self) -> bool:
        return self.status == 503 and not self.said_success


class GatewayRefused(ServerError):
    """A bare 503 (no API envelope, no Retry-After): how nginx's ``limit_req`` refuses
    a request over its rate by default. A signal about the rate, like a 429."""


class UnexpectedResponse(ApiError):
    """A status or body the contract does not describe."""

    @property
    def outcome_unknown(self) -> bool:
        # A 2xx whose answer cannot be read or checked: the platform may well have done it.
        return self.status is not None and 200 <= self.status < 300


class Redirected(UnexpectedResponse):
    """3xx: no endpoint of the API redirects, so the answer is never followed."""

    @property
    def outcome_unknown(self) -> bool:
        return False


class EnvelopeFailure(UnexpectedResponse):
    """A 2xx whose envelope says ``success: false``: a failure whatever the status."""

    @property
    def outcome_unknown(self) -> bool:
        # `success: false` is the platform saying it did not do it; `"true"`, null or a
        # number is an answer nobody can check, after which the platform may have done it.
        return not self.enveloped


class WrongInvite(UnexpectedResponse):
    """An answer about another invite than the one asked for."""


class BadInviteValue(UnexpectedResponse):
    """An invite whose updatable field breaks the contract's type or size: compared, it
    could take minutes (a set of 150,000 groups) or put a number where a string belongs
    (NaN, ``1e999``) into a PATCH, a plan or an export. That invite alone is left alone."""


class AnswerTooLarge(UnexpectedResponse):
    """A body longer than ``max_response_bytes``: reading stopped at the cap."""

    @property
    def outcome_unknown(self) -> bool:
        # Unread, so unchecked: after a 2xx or a 5xx the platform may have done it.
        return self.status is None or not 300 <= self.status < 500


class TokenRefused(AuthenticationFailed):
    """The token endpoint's answer holds no token an HTTP header can carry."""


class NotSent(ApiError):
    """The run stopped, or a wait would outlast the retry budget, before sending."""


_BY_STATUS: dict[int, type[ApiError]] = {
    400: InvalidRequest,
    401: AuthenticationFailed,
    403: PermissionDenied,
    404: NotFound,
    409: Conflict,
    412: PreconditionFailed,
    422: InvalidRequest,
    429: RateLimited,
}


def error_class_for(status: int) -> type[ApiError]:
    return _BY_STATUS.get(status) or (ServerError if 500 <= status <= 599 else UnexpectedResponse)
