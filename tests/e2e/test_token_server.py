"""End to end: the real CLI against a token server built on oauthlib (RFC 6749's
client credentials grant as ``BackendApplicationServer`` implements it), which
answers as standard token servers do: bare token bodies, ``{"error": ...}`` bodies,
HTTP Basic client authentication, token types other than Bearer.

Every run is checked for the client secret and every token issued, in all it printed.
"""

from __future__ import annotations

import base64
from pathlib import Path
from urllib.parse import quote, quote_plus

import pytest
from support.cli import last_error, run_cli
from support.helpers import clean_env
from support.inprocess import CliResult
from support.oauth_server import CLIENT_ID, SECRET, OAuthServer, TokenPolicy

pytestmark = pytest.mark.e2e

INVITE = {
    "id": "inv_acme",
    "status": "pending",
    "name": "Acme Holdings Ltd",
    "email": "old@acme.example",
    "groups": ["emea"],
}
DESIRED = """\
invites:
  - id: inv_acme
    name: Acme Holdings Ltd
    email: compliance@acme.example
    groups: [emea]
"""


def plan(
    server: OAuthServer, tmp_path: Path, config: str = "max_attempts: 2\n", **env: str
) -> CliResult:
    (tmp_path / "invites.yaml").write_text(DESIRED, encoding="utf-8")
    (tmp_path / "reconciler.yaml").write_text(config + "retry_max_seconds: 3\n")
    settings = {
        "RECONCILER_BASE_URL": server.url,
        "RECONCILER_CLIENT_ID": CLIENT_ID,
        "RECONCILER_CLIENT_SECRET": SECRET,
    }
    result = run_cli("plan", "invites.yaml", cwd=tmp_path, env=clean_env(**{**settings, **env}))
    said = result.stdout + result.stderr
    for secret in (SECRET, quote_plus(SECRET), *server.issued):
        assert secret not in said
    assert "Traceback" not in said
    return result


# -- row 1: RFC 6749 §5.2 error bodies, with advice per code -----------------------


@pytest.mark.parametrize(
    ("policy", "env", "said"),
    [
        (
            TokenPolicy(methods=("client_secret_post",)),
            {"RECONCILER_CLIENT_SECRET": "wrong-secret-123"},
            "HTTP 401: the token request (POST /oauth/token) was refused: invalid_client; check "
            "RECONCILER_CLIENT_ID and RECONCILER_CLIENT_SECRET; they were sent with "
            "token_auth_method client_secret_post: the id and secret in the form (a server that "
            "takes only the other way needs token_auth_method: client_secret_basic, or "
            "RECONCILER_TOKEN_AUTH_METHOD=client_secret_basic)",
        ),
        (
            TokenPolicy(scopes=("kyb:invites:read",)),
            {},
            "HTTP 400: the token request (POST /oauth/token) was refused: invalid_scope; the "
            "scope asked for ('kyb:invites:read kyb:invites:write', set with RECONCILER_SCOPE) "
            "is unknown to the server or more than client id 'oauth-ci' was granted; ask for "
            "the scopes this client holds",
        ),
        (
            TokenPolicy(grant_allowed=False),
            {},
            "HTTP 400: the token request (POST /oauth/token) was refused: unauthorized_client; "
            "client id 'oauth-ci' may not use the client_credentials grant; the platform must "
            "allow that grant for this client",
        ),
    ],
    ids=["invalid_client", "invalid_scope", "unauthorized_client"],
)
def test_an_rfc_6749_refusal_shows_its_code_with_advice_and_is_not_retried(
    tmp_path: Path, policy: TokenPolicy, env: dict[str, str], said: str
) -> None:
    with OAuthServer(policy) as server:
        result = plan(server, tmp_path, **env)
    assert result.returncode == 1
    assert last_error(result) == f"error: stopped reading invites: {said}"
    assert len(server.token_requests()) == 1  # a refusal is not retried


# -- row 2: client_secret_basic -------------------------------------------------------


def test_a_server_taking_only_http_basic_is_reached_with_client_secret_basic(
    tmp_path: Path,
) -> None:
    policy = TokenPolicy(methods=("client_secret_basic",), invites={"inv_acme": dict(INVITE)})
    with OAuthServer(policy) as server:
        refused = plan(server, tmp_path)
        result = plan(server, tmp_path, RECONCILER_TOKEN_AUTH_METHOD="client_secret_basic")
    assert refused.returncode == 1 and "invalid_client" in refused.stderr
    assert result.returncode == 0, result.stderr
    assert "inv_acme" in result.stdout
    sent = server.token_requests()[-1]
    # RFC 6749 §2.3.1: id and secret encoded (a space as %20, which oauthlib's
    # unquote_plus reads as a space too), then Base64; nothing secret in the form.
    encoded = sent.headers["Authorization"].removeprefix("Basic ")
    pair = f"{quote(CLIENT_ID, safe='')}:{quote(SECRET, safe='')}"
    assert base64.b64decode(encoded).decode() == pair and "%20" in pair
    assert "client_secret" not in sent.body and quote_plus(SECRET) not in sent.body


def test_client_secret_basic_from_the_config_file(tmp_path: Path) -> None:
    policy = TokenPolicy(methods=("client_secret_basic",), invites={"inv_acme": dict(INVITE)})
    with OAuthServer(policy) as server:
        result = plan(server, tmp_path, config="token_auth_method: client_secret_basic\n")
    assert result.returncode == 0, result.stderr


# -- row 3: token types -----------------------------------------------------------------


@pytest.mark.parametrize("kind", ["DPoP", "mac", "bearer", "BEARER"])
def test_a_token_of_another_type_is_never_sent_as_a_bearer_token(tmp_path: Path, kind: str) -> None:
    policy = TokenPolicy(token_type=kind, invites={"inv_acme": dict(INVITE)})
    with OAuthServer(policy) as server:
        result = plan(server, tmp_path)
    if kind.lower() == "bearer":  # Bearer in any case is a bearer token
        assert result.returncode == 0, result.stderr
        return
    assert result.returncode == 1
    assert f"the token endpoint issued a token of type '{kind}', not Bearer" in result.stderr
    assert [s.path for s in server.seen] == ["/oauth/token"]  # no invite request at all


# -- rows 5 and 6: lifetimes a server may announce ---------------------------------------


@pytest.mark.parametrize("expires_in", [0.001, 0, 10**400, -1])
def test_any_announced_lifetime_gives_one_token_and_a_clean_run(
    tmp_path: Path, expires_in: object
) -> None:
    invites = {f"inv_{n:03d}": {**INVITE, "id": f"inv_{n:03d}"} for n in range(40)}
    desired = "invites:\n" + "".join(
        f"  - id: {i}\n    email: compliance@acme.example\n" for i in invites
    )
    with OAuthServer(TokenPolicy(expires_in=expires_in, invites=invites)) as server:
        (tmp_path / "invites.yaml").write_text(desired)
        result = run_cli(
            "plan",
            "invites.yaml",
            cwd=tmp_path,
            env=clean_env(
                RECONCILER_BASE_URL=server.url,
                RECONCILER_CLIENT_ID=CLIENT_ID,
                RECONCILER_CLIENT_SECRET=SECRET,
            ),
        )
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    # At least ten seconds are used: not a token per request.
    assert len(server.token_requests()) == 1
