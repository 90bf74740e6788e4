"""The ``api`` fixture of ApiClient's tests: clients of a requests-mocked platform, in fake
time, what they sent (token requests apart), and the checks that no secret got out."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from typing import Any, TypeVar
from urllib.parse import urlsplit

import pytest
from support.api_answers import BASE, INVITE, TOKEN, envelope, token_response
from support.limits import FakeTime

from reconciler.api.client import ApiClient
from reconciler.settings.config import Settings

CLIENT_ID = "reconciler-ci"
SECRET = "cs_live_Zq9xSECRETvalue"
TOKEN2 = "eyJhbGciOiJSUzI1NiJ9.tokSECONDpayload.sig2"
TOKEN_URL = BASE + "/oauth/token"
SECRETS = (SECRET, TOKEN, TOKEN2)
E = TypeVar("E", bound=BaseException)


def failure(status: int, message: str, request_id: str = "7781", **extra: Any) -> dict[str, Any]:
    """A requests-mock answer: the envelope of a failure with ``status``."""
    body = envelope(None, status=status, message=message, request_id=request_id)
    return {"status_code": status, "json": body, **extra}


def ok_invite(invite: dict[str, Any] | None = None, request_id: str = "2002") -> dict[str, Any]:
    return {"status_code": 200, "json": envelope(invite or INVITE, request_id=request_id)}


def fails(error: type[E] | tuple[type[E], ...], call: Callable[..., object], *args, **kw) -> E:
    """The ``error`` that ``call(*args, **kw)`` raises."""
    with pytest.raises(error) as caught:
        call(*args, **kw)
    return caught.value


def assert_no_secrets(*texts: str) -> None:
    for text in texts:
        for secret in SECRETS:
            assert secret not in text


class Api:
    """Clients of the mocked platform (``mock``) in fake time (``time``), closed at the end."""

    def __init__(self, mock: Any, time: FakeTime, caplog: pytest.LogCaptureFixture) -> None:
        self.mock, self.time, self.caplog = mock, time, caplog
        self.clients: list[ApiClient] = []

    def client(
        self, token: bool = False, kw: dict[str, Any] | None = None, **values: Any
    ) -> ApiClient:
        """A client of BASE with CLIENT_ID and SECRET (settings ``values`` over them, ApiClient
        arguments ``kw``); with ``token``, the token endpoint answers one token."""
        if token:
            self.token()
        values = {"base_url": BASE, "client_id": CLIENT_ID, "client_secret": SECRET, **values}
        settings = Settings().with_values(values)
        made = ApiClient(settings, clock=self.time.clock, sleep=self.time.sleep, **(kw or {}))
        self.clients.append(made)
        return made

    def token(self, *answers: dict[str, Any]) -> Any:
        """The token endpoint, answering ``answers`` in turn (one token when none)."""
        return self.mock.post(TOKEN_URL, list(answers) or [token_response()])

    assert_no_secrets = staticmethod(assert_no_secrets)

    def debug(self) -> pytest.LogCaptureFixture:
        """The client's log, at DEBUG (as --verbose has it)."""
        self.caplog.set_level(logging.DEBUG, logger="reconciler")
        return self.caplog

    @property
    def calls(self) -> list[Any]:
        """The requests sent, token requests left out."""
        return [r for r in self.mock.request_history if r.url != TOKEN_URL]

    @property
    def tokens(self) -> list[Any]:
        return [r for r in self.mock.request_history if r.url == TOKEN_URL]

    def assert_secrets_kept(self, error: BaseException, client: ApiClient) -> None:
        """No secret in the error, the client, the log, or any URL sent (nor a query)."""
        log = self.caplog
        assert_no_secrets(str(error), repr(error), repr(client), repr(client.settings), log.text)
        assert_no_secrets(*(record.getMessage() for record in log.records))
        for request in self.mock.request_history:
            assert_no_secrets(request.url)
            assert not urlsplit(request.url).query


@pytest.fixture
def api(requests_mock: Any, caplog: pytest.LogCaptureFixture) -> Iterator[Api]:
    harness = Api(requests_mock, FakeTime(1000.0), caplog)
    yield harness
    for client in harness.clients:
        client.close()
