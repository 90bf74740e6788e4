"""End to end: the real CLI against a token server built on Authlib's AuthorizationServer.

Authlib reads ``client_secret_basic`` with ``unquote`` (a ``+`` stays a plus) and grants
a client the scope it is allowed, narrower than asked, saying so in the token answer
(RFC 6749 §3.3); its resource side refuses a token without the scope with 403 and RFC
6750's ``insufficient_scope``. A hostile variant lies about the scope and words its
refusal with control characters, a workflow command and the client secret.
"""

from __future__ import annotations

import base64
from pathlib import Path
from urllib.parse import quote, quote_plus

import pytest
from support.authlib_server import (
    CLIENT_ID,
    READ,
    SECRET,
    WRITE,
    AuthlibPolicy,
    AuthlibServer,
)
from support.cli import run_cli
from support.helpers import clean_env
from support.inprocess import CliResult

pytestmark = pytest.mark.e2e

INVITE = {"id": "inv_acme", "status": "pending", "name": "Acme Old Ltd"}
DESIRED = "invites:\n  - id: inv_acme\n    name: Acme Holdings Ltd\n"


def run(server: AuthlibServer, tmp_path: Path, *args: str, **env: str) -> CliResult:
    (tmp_path / "invites.yaml").write_text(DESIRED, encoding="utf-8")
    (tmp_path / "reconciler.yaml").write_text("max_attempts: 2\nretry_max_seconds: 3\n")
    settings = {
        "RECONCILER_BASE_URL": server.url,
        "RECONCILER_CLIENT_ID": CLIENT_ID,
        "RECONCILER_CLIENT_SECRET": SECRET,
        "RECONCILER_TOKEN_AUTH_METHOD": "client_secret_basic",
        "GITHUB_ACTIONS": "true",
    }
    result = run_cli(*args, "invites.yaml", cwd=tmp_path, env=clean_env(**settings | env))
    said = result.stdout + result.stderr
    for secret in (SECRET, quote_plus(SECRET), quote(SECRET, safe=""), *server.granted):
        assert secret not in said
    assert "Traceback" not in said and "\x1b" not in said
    # Under GitHub Actions no line starts with what a server said: only the tool's own
    # commands start with "::".
    # commands start with "::" (the runner reads them as one command each), and no other
    # line carries the older form, `##[`, whole.
    for line in said.splitlines():
        if not line.startswith("::error "):
            assert not line.lstrip().startswith("::") and "##[" not in line, line
    return result


def policy(**knobs: object) -> AuthlibPolicy:
    return AuthlibPolicy(invites={"inv_acme": dict(INVITE)}, **knobs)  # type: ignore[arg-type]


# -- row 4: client_secret_basic, a space as %20 ---------------------------------------------


def test_client_secret_basic_with_a_space_and_a_plus_is_accepted_by_authlib(
    tmp_path: Path,
) -> None:
    with AuthlibServer(policy(methods=("client_secret_basic",))) as server:
        result = run(server, tmp_path, "plan")
    assert result.returncode == 0, result.stderr
    (token_request,) = [h for m, p, h in server.seen if p == "/oauth/token"]
    pair = base64.b64decode(token_request["Authorization"].removeprefix("Basic ")).decode()
    assert pair.endswith(":" + quote(SECRET, safe="")) and "%20" in pair and "+" not in pair


# -- row 3: the granted scope is read ----------------------------------------------------


def test_a_read_only_grant_is_noted_by_plan_and_refused_by_apply_before_any_write(
    tmp_path: Path,
) -> None:
    with AuthlibServer(policy(allowed=(READ,))) as server:
        planned = run(server, tmp_path, "plan")
        applied = run(server, tmp_path, "apply", "--auto-approve")
    assert planned.returncode == 0, planned.stderr
    assert f"the token was granted '{READ}' (so the token answer said), not {WRITE}" in (
        planned.stderr
    )
    assert "read-only client" in planned.stderr and "warning" not in planned.stderr
    assert applied.returncode == 1
    assert f"without {WRITE}, which writing needs" in applied.stderr
    assert "nothing was written" in applied.stderr
    assert server.requests("PATCH") == []


def test_a_read_only_grant_is_refused_by_resend_before_any_email(tmp_path: Path) -> None:
    # `resend` writes too (an e-mail to a person): it went ahead with a read-only grant.
    settings = {
        "RECONCILER_BASE_URL": "",
        "RECONCILER_CLIENT_ID": CLIENT_ID,
        "RECONCILER_CLIENT_SECRET": SECRET,
        "RECONCILER_TOKEN_AUTH_METHOD": "client_secret_basic",
    }
    with AuthlibServer(policy(allowed=(READ,))) as server:
        settings["RECONCILER_BASE_URL"] = server.url
        result = run_cli(
            "resend", "inv_acme", "--auto-approve", cwd=tmp_path, env=clean_env(**settings)
        )
    assert result.returncode == 1, result.stdout + result.stderr
    assert f"without {WRITE}, which writing needs" in result.stderr
    assert [p for p in server.requests("POST") if "resend" in p] == []


def test_a_read_only_client_asking_for_read_only_is_told_nothing(tmp_path: Path) -> None:
    with AuthlibServer(policy(allowed=(READ,))) as server:
        result = run(server, tmp_path, "plan", RECONCILER_SCOPE=READ)
    assert result.returncode == 0, result.stderr
    assert "granted" not in result.stderr


def test_a_grant_missing_the_read_scope_fails_the_plan_naming_the_grant(tmp_path: Path) -> None:
    with AuthlibServer(policy(allowed=(WRITE,))) as server:
        result = run(server, tmp_path, "plan")
    assert result.returncode == 1  # the read is refused: 403, and the run stops
    assert f"granted: '{WRITE}' (so the token answer said)" in result.stderr
    assert "insufficient_scope" in result.stderr


def test_a_403_names_the_grant_and_the_servers_rfc_6750_error(tmp_path: Path) -> None:
    # The server says it granted both, and gives only read: the PATCH is refused.
    with AuthlibServer(policy(allowed=(READ,), said_scope=f"{READ} {WRITE}")) as server:
        result = run(server, tmp_path, "apply", "--auto-approve")
    assert result.returncode == 1
    assert server.requests("PATCH") == ["/public-api/v1/kyb/invites/inv_acme"]
    assert "insufficient_scope (The request requires higher privileges" in result.stderr
    assert f"granted: '{READ} {WRITE}' (so the token answer said)" in result.stderr
    assert "not the API's JSON envelope" not in result.stderr


@pytest.mark.parametrize(
    "said",
    [
        "kyb:invites:read\x1b[2J",
        "kyb:invites:read\n::error::injected",
        SECRET,
        ["kyb:invites:read"],
        "kyb:invites:read " * 2000,
    ],
    ids=["escape", "newline", "secret", "list", "huge"],
)
def test_a_scope_answer_that_is_no_scope_is_never_shown_nor_trusted(
    tmp_path: Path, said: object
) -> None:
    with AuthlibServer(policy(said_scope=said)) as server:
        result = run(server, tmp_path, "plan")
    # Not read: as if the answer named no scope (RFC 6749 §5.1: the scope asked for).
    assert result.returncode == 0, result.stderr
    assert "granted" not in result.stderr


def test_a_hostile_403_description_is_escaped_and_redacted(tmp_path: Path) -> None:
    hostile = f"\x1b[31mdenied\r\n::error::pwned {SECRET} ##[group]x"
    knobs = {"allowed": (READ,), "said_scope": None, "forbidden_description": hostile}
    with AuthlibServer(policy(**knobs)) as server:
        result = run(server, tmp_path, "apply", "--auto-approve")
    assert result.returncode == 1
    assert "insufficient_scope (" in result.stderr
    assert "[redacted]" in result.stderr
    assert "\\x1b[31mdenied\\r\\n::error::pwned" in result.stderr  # shown, escaped
