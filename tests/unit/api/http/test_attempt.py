"""Attempts: one HTTP exchange on the wire, its answer read whole, failures named."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
import requests
import requests_mock
from hypothesis import given, settings
from hypothesis import strategies as st

from reconciler.api.exceptions import TransportError
from reconciler.api.http.attempt import Attempts
from reconciler.api.http.urls import parse_base_url
from reconciler.settings.config import Settings

BASE = "https://api.example.com/base"


@pytest.fixture
def attempts() -> Iterator[Attempts]:
    made = Attempts(Settings(base_url=BASE), parse_base_url(BASE), time.monotonic)
    yield made
    made.close()


def test_an_answer_is_read_whole_under_the_base_path(
    attempts: Attempts, requests_mock: requests_mock.Mocker
) -> None:
    requests_mock.get(
        BASE + "/things/1",
        json={"data": {"id": "1"}, "metadata": {"requestId": "r-1"}},
        headers={"Content-Type": "application/json"},
    )

    answer = attempts.attempt("GET", "/things/1", None)

    assert (answer.status, answer.data, answer.request_id) == (200, {"id": "1"}, "r-1")


def test_a_redirect_is_answered_not_followed(
    attempts: Attempts, requests_mock: requests_mock.Mocker
) -> None:
    requests_mock.get(
        BASE + "/things/1", status_code=302, headers={"Location": "https://x.example/"}
    )

    answer = attempts.attempt("GET", "/things/1", None)

    assert answer.status == 302 and requests_mock.call_count == 1


def test_a_connection_that_fails_names_the_host(
    attempts: Attempts, requests_mock: requests_mock.Mocker
) -> None:
    requests_mock.get(BASE + "/things/1", exc=requests.ConnectionError("refused"))

    with pytest.raises(TransportError) as failed:
        attempts.attempt("GET", "/things/1", None)

    assert "api.example.com" in failed.value.message


_PATH_CHARACTERS = "abcXYZ019._~-/%é ?#:@!$&'()*+,;="
_MADE: dict[str, Attempts] = {}


class _Auth(requests.auth.AuthBase):
    """Sets a header and a hook, as the bearer token does."""

    def __call__(self, request: requests.PreparedRequest) -> requests.PreparedRequest:
        request.headers["Authorization"] = "Bearer t"
        request.register_hook("response", print)
        return request


@pytest.mark.parametrize(
    "base",
    [BASE, "http://127.0.0.1:8080", "https://API.example.com/a/./b/", "https://bücher.example/x"],
)
@settings(max_examples=100, deadline=None)
@given(
    path=st.text(_PATH_CHARACTERS, max_size=30).map(lambda p: "/" + p),
    method=st.sampled_from(["GET", "PATCH", "POST"]),
    body=st.sampled_from([None, {"email": "é@example.com", "groups": ["a"]}, {}]),
    form=st.sampled_from([None, {"grant_type": "client_credentials", "scope": "a b"}]),
)
def test_a_request_is_prepared_as_requests_prepares_it(
    base: str, path: str, method: str, body: Any, form: dict[str, str] | None
) -> None:
    """The headers copied from a template and the URL prepared only for a path that
    needs it make the same request as PreparedRequest.prepare from scratch."""
    if base not in _MADE:
        _MADE[base] = Attempts(Settings(base_url=base), parse_base_url(base), time.monotonic)
    attempts = _MADE[base]
    auth = _Auth()
    whole = requests.PreparedRequest()
    whole.prepare(
        method=method,
        url=attempts._base_url + path,
        headers=dict(attempts._session.headers),
        json=body,
        data=form,
        auth=auth,
    )

    made = attempts._prepare(method, path, auth, body, form)

    assert (made.method, made.url, made.body) == (whole.method, whole.url, whole.body)
    assert made.path_url == whole.path_url
    assert list(made.headers.items()) == list(whole.headers.items())
    copied = made.headers.copy()  # as urllib3 copies them: equal, and apart
    copied["authorization"] = "other"
    assert copied["Authorization"] == "other" != made.headers["Authorization"]
    assert made.hooks == whole.hooks
