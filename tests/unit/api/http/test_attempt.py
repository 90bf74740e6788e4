"""Attempts: one HTTP exchange on the wire, its answer read whole, failures named."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
import requests
import requests_mock

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
