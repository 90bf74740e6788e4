"""The sandbox speaks the platform contract, checked with plain HTTP (not our client)."""

from __future__ import annotations

import base64
import http.client
import json
import re
import shutil
import socket
import subprocess
import time

import pytest
import requests
from support.cli import run_cli, serving_sandbox

from reconciler.sandbox import SANDBOX_CLIENT_ID, SANDBOX_CLIENT_SECRET

INVITE = "/public-api/v1/kyb/invites/"
TIMESTAMP = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")


def token(
    base: str, scope: str | None = None, secret: str = SANDBOX_CLIENT_SECRET
) -> requests.Response:
    form = {
        "grant_type": "client_credentials",
        "client_id": SANDBOX_CLIENT_ID,
        "client_secret": secret,
    }
    if scope is not None:
        form["scope"] = scope
    return requests.post(base + "/oauth/token", data=form, timeout=5)


def bearer(base: str, scope: str | None = None) -> dict[str, str]:
    return {"Authorization": "Bearer " + token(base, scope).json()["data"]["access_token"]}


def assert_envelope(response: requests.Response, status: int) -> dict:
    assert response.status_code == status
    body = response.json()
    assert body["status"] == status
    assert body["success"] is (status < 400)
    assert isinstance(body["message"], str) and body["message"]
    assert body["metadata"]["requestId"].isdigit()
    assert TIMESTAMP.match(body["metadata"]["timestamp"])
    assert isinstance(body["details"]["hint"], str)
    return body


def test_token_is_a_signed_jwt_in_the_201_envelope(sandbox):
    body = assert_envelope(token(sandbox.url, "kyb:invites:read kyb:invites:write"), 201)
    data = body["data"]
    assert data["token_type"] == "Bearer"
    assert data["expires_in"] == 86400
    _header, claims, signature = data["access_token"].split(".")
    decoded = json.loads(base64.urlsafe_b64decode(claims + "=" * (-len(claims) % 4)))
    assert decoded["scope"] == "kyb:invites:read kyb:invites:write"
    assert signature
    assert "created" in body["details"]["hint"]


def test_wrong_credentials_and_bad_token_requests(sandbox):
    assert_envelope(token(sandbox.url, secret="wrong"), 401)
    json_body = requests.post(sandbox.url + "/oauth/token", json={"grant_type": "x"}, timeout=5)
    assert_envelope(json_body, 400)
    assert_envelope(token(sandbox.url, scope="kyb:everything"), 400)


def test_read_update_and_resend_an_invite(sandbox):
    headers = bearer(sandbox.url)
    read = assert_envelope(
        requests.get(sandbox.url + INVITE + "inv_8f2k1", headers=headers, timeout=5), 200
    )
    assert read["data"]["id"] == "inv_8f2k1" and read["data"]["status"] == "pending"
    patch = requests.patch(
        sandbox.url + INVITE + "inv_8f2k1",
        json={"email": "x@acme.example"},
        headers=headers,
        timeout=5,
    )
    updated = assert_envelope(patch, 200)["data"]
    assert updated["email"] == "x@acme.example"
    assert updated["name"] == read["data"]["name"]  # omitted fields keep their values
    resend = requests.post(
        sandbox.url + INVITE + "inv_8f2k1/resend", json={}, headers=headers, timeout=5
    )
    assert_envelope(resend, 200)
    assert sandbox.store.resends["inv_8f2k1"] == 1


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"emial": "x@y.example"}, "emial"),
        ({"name": 42}, "name"),
        ({"groups": "emea"}, "groups"),
        ({"email": "not-an-email"}, "email"),
        ({"status": "accepted"}, "status"),
    ],
)
def test_invalid_update_bodies_get_400_with_per_field_problems(sandbox, body, field):
    response = requests.patch(
        sandbox.url + INVITE + "inv_8f2k1", json=body, headers=bearer(sandbox.url), timeout=5
    )
    problems = assert_envelope(response, 400)["data"]
    assert any(field in key or field in message for key, message in problems.items())


def test_missing_forged_and_expired_tokens_get_401(start_sandbox):
    server = start_sandbox(token_ttl=0.2)
    url = server.url + INVITE + "inv_8f2k1"
    assert_envelope(requests.get(url, timeout=5), 401)
    good = bearer(server.url)["Authorization"]
    forged = good[:-4] + ("AAAA" if not good.endswith("AAAA") else "BBBB")
    assert_envelope(requests.get(url, headers={"Authorization": forged}, timeout=5), 401)
    time.sleep(0.3)
    expired = assert_envelope(requests.get(url, headers={"Authorization": good}, timeout=5), 401)
    assert "expired" in expired["message"]


def test_scope_404_and_409(sandbox):
    read_only = bearer(sandbox.url, "kyb:invites:read")
    patch = requests.patch(
        sandbox.url + INVITE + "inv_8f2k1", json={"name": "X"}, headers=read_only, timeout=5
    )
    assert_envelope(patch, 403)
    headers = bearer(sandbox.url)
    assert_envelope(
        requests.get(sandbox.url + INVITE + "inv_nope", headers=headers, timeout=5), 404
    )
    accepted = requests.patch(
        sandbox.url + INVITE + "inv_0z9y8", json={"name": "X"}, headers=headers, timeout=5
    )
    assert_envelope(accepted, 409)
    resend = requests.post(
        sandbox.url + INVITE + "inv_0z9y8/resend", json={}, headers=headers, timeout=5
    )
    assert_envelope(resend, 409)


def test_percent_encoded_ids_and_keep_alive(start_sandbox):
    server = start_sandbox([{"id": "inv.a-b_c", "status": "pending", "name": "Dots"}])
    headers = bearer(server.url)
    connection = http.client.HTTPConnection("127.0.0.1", int(server.url.rsplit(":", 1)[1]))
    local_ports = set()
    for _ in range(3):
        connection.request("GET", INVITE + "inv%2Ea-b_c", headers=headers)
        response = connection.getresponse()
        body = json.loads(response.read())
        assert response.status == 200 and body["data"]["name"] == "Dots"
        local_ports.add(connection.sock.getsockname()[1])
    connection.close()
    assert len(local_ports) == 1  # one kept-alive connection served every request


def test_rate_limit_answers_429_with_retry_after(start_sandbox):
    # One request per 10 s: the answers below are 429s however slow this machine is.
    server = start_sandbox(rate_limit=0.1)
    statuses = [token(server.url).status_code for _ in range(3)]
    assert 429 in statuses
    limited = token(server.url)
    assert limited.status_code == 429
    assert int(limited.headers["Retry-After"]) >= 1


@pytest.mark.parametrize(("status", "retry_after"), [(429, False), (503, False), (429, True)])
def test_gateway_mode_refuses_as_nginx_limit_req_does(start_sandbox, status, retry_after):
    # One request per 10 s, no burst: the first goes through, the next are refused
    # with a gateway's own page, not the API's envelope.
    server = start_sandbox(gateway_rate=0.1, gateway_status=status, gateway_retry_after=retry_after)
    first, second, third = (token(server.url) for _ in range(3))
    assert first.status_code == 201
    for refused in (second, third):
        assert refused.status_code == status
        assert refused.headers["Content-Type"] == "text/html"
        assert ("Retry-After" in refused.headers) == retry_after
    assert server.stats.statuses[status] == 2  # refusals are counted, and do not move the limit


def test_routes_answer_404_or_405_with_an_envelope(sandbox):
    headers = bearer(sandbox.url)
    assert_envelope(requests.get(sandbox.url + "/oauth/token", timeout=5), 405)
    for method, path in [
        ("DELETE", INVITE + "inv_8f2k1"),
        ("GET", INVITE + "inv_8f2k1/resend"),
        ("POST", INVITE + "inv_8f2k1/forget"),
        ("POST", "/public-api/v1/accounts"),
        ("GET", "/public-api/v2/anything"),
    ]:
        answer = requests.request(method, sandbox.url + path, headers=headers, timeout=5)
        assert "no endpoint" in assert_envelope(answer, 404)["message"]
    accounts = requests.get(sandbox.url + "/public-api/v1/accounts", headers=headers, timeout=5)
    assert assert_envelope(accounts, 200)["data"] == [{"id": "acc_sandbox"}]
    assert_envelope(requests.get(sandbox.url + "/public-api/v1/accounts", timeout=5), 401)


def test_a_length_with_spaces_around_it_is_read(sandbox):
    host, port = sandbox.url.removeprefix("http://").rsplit(":", 1)
    form = f"grant_type=client_credentials&client_id={SANDBOX_CLIENT_ID}"
    form += f"&client_secret={SANDBOX_CLIENT_SECRET}"
    with socket.create_connection((host, int(port)), timeout=5) as conn:
        conn.sendall(
            f"POST /oauth/token HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n"
            "Content-Type: application/x-www-form-urlencoded\r\n"
            f"Content-Length:\t{len(form)} \r\n\r\n{form}".encode()
        )
        answer = b""
        while chunk := conn.recv(65536):
            answer += chunk
    assert answer.startswith(b"HTTP/1.1 20"), answer[:200]


@pytest.mark.parametrize(
    ("length", "status"),
    [("5000000", 413), ("9" * 5000, 413), ("-5", 400), ("+5", 400), ("abc", 400), ("\u0663", 400)],
)
def test_an_oversized_or_unreadable_length_gets_an_answer_and_one_connection_close(
    sandbox, length, status
):
    host, port = sandbox.url.removeprefix("http://").rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=5) as conn:
        conn.sendall(
            f"PATCH {INVITE}inv_8f2k1 HTTP/1.1\r\nHost: {host}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {length}\r\n\r\n".encode()
        )
        answer = b""
        while chunk := conn.recv(65536):  # the server closes the connection
            answer += chunk
    head = answer.decode("latin-1").split("\r\n\r\n", 1)[0].split("\r\n")
    assert head[0].startswith(f"HTTP/1.1 {status}")
    assert [h.lower() for h in head[1:]].count("connection: close") == 1
    assert "content-length: 0" in [h.lower() for h in head[1:]]


@pytest.mark.skipif(shutil.which("curl") is None, reason="curl is not installed")
def test_reconcile_sandbox_command_serves_curl():
    def curl(*args: str) -> dict:
        out = subprocess.run(["curl", "-s", *args], capture_output=True, text=True, timeout=10)
        return json.loads(out.stdout)

    with serving_sandbox() as banner:
        base = banner[3].strip().split("=", 1)[1]
        form = f"client_id={SANDBOX_CLIENT_ID}&client_secret={SANDBOX_CLIENT_SECRET}"
        scope = "scope=kyb:invites:read+kyb:invites:write"
        issued = curl("-d", f"grant_type=client_credentials&{form}&{scope}", f"{base}/oauth/token")
        auth = "Authorization: Bearer " + issued["data"]["access_token"]
        acme = base + INVITE + "inv_8f2k1"
        assert curl("-H", auth, acme)["data"]["name"] == "Acme Holdings Ltd"
        body = '{"phone": "+442079460999"}'
        json_type = "Content-Type: application/json"
        patched = curl("-X", "PATCH", "-H", auth, "-H", json_type, "-d", body, acme)
        assert patched["data"]["phone"] == "+442079460999"
        assert curl("-X", "POST", "-H", auth, "-d", "{}", acme + "/resend")["success"]
    assert f"listening on {base} " in banner[0]
    assert f"RECONCILER_CLIENT_ID={SANDBOX_CLIENT_ID}" in "\n".join(banner)


def test_a_busy_port_is_a_plain_error(sandbox):
    port = sandbox.url.rsplit(":", 1)[1]
    result = run_cli("sandbox", "--port", port)
    assert result.returncode == 1
    assert f"cannot listen on 127.0.0.1:{port}" in result.stderr and "--port" in result.stderr
    assert "Traceback" not in result.stderr
