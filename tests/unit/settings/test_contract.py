"""Settings hold the platform contract as one Contract, set by the same names as before."""

from __future__ import annotations

from pathlib import Path

import pytest

from reconciler.errors import ConfigError, InputError
from reconciler.safetext import quote_value
from reconciler.settings.config import Settings, load_settings
from reconciler.settings.contract import Contract, check_contract, path_problem


def test_the_file_and_the_environment_set_the_contracts_parts(tmp_path: Path) -> None:
    config = tmp_path / "reconciler.yaml"
    config.write_text("token_path: /auth/token\nfield_names: {phone: phoneNumber}\n")
    settings = load_settings(str(config), env={"RECONCILER_SCOPE": "custom:scope"})
    assert settings.contract == Contract(
        scope="custom:scope", token_path="/auth/token", field_names={"phone": "phoneNumber"}
    )


def test_overrides_by_part_name_change_only_that_part() -> None:
    settings = Settings().with_overrides(scope="a:b", timeout=5.0, base_url=None)
    assert settings.contract == Contract(scope="a:b")
    assert settings.timeout == 5.0 and settings.base_url is None
    assert Settings().contract == Contract()  # the published one


# -- path templates are paths (issue 51, row 5) ------------------------------------------

PATH_KEYS = ("get_invite_path", "update_invite_path", "resend_invite_path")


@pytest.mark.parametrize(
    ("template", "why"),
    [
        ("/public-api/v1/kyb/invites/{inviteId}/../inv_2", "has a `..` segment"),
        ("/public-api/v1/kyb/invites/./{inviteId}", "has a `.` segment"),
        ("/public-api/v1/kyb/invites/{inviteId}?x=", "holds a query (`?`)"),
        ("/public-api/v1/kyb/invites/inv_2?{inviteId}", "holds a query (`?`)"),
        ("/public-api/v1/kyb/invites/{inviteId}#", "holds a fragment (`#`)"),
        ("/public-api/v1/kyb/invites\\{inviteId}", "holds a backslash"),
        ("public-api/v1/kyb/invites/{inviteId}", "must start with `/`"),
        ("//evil.example/{inviteId}", "has an empty segment"),
        ("/public-api/v1/kyb/invites/{inviteId}/", "has an empty segment"),
        ("/public-api/v1/kyb/invites", "must hold `{inviteId}` once"),
        ("/invites/{inviteId}/{inviteId}", "must hold `{inviteId}` once"),
        ("/invites/{inviteId}:resend", "must hold `{inviteId}` as a whole segment"),
        ("/invites/x{inviteId}", "must hold `{inviteId}` as a whole segment"),
        ("/invites/%2e%2E/inv_2/{inviteId}", "percent-encodes `%2e`"),
        ("/invites/inv_2%2F{inviteId}/x", "must hold `{inviteId}` as a whole segment"),
        ("/invites/inv_2%2Fx/{inviteId}", "percent-encodes `%2F`"),
        ("/invites/inv_2%5cx/{inviteId}", "percent-encodes `%5c`"),
        ("/invites/%252e%252e/{inviteId}", "percent-encodes `%25`"),
        ("/invites/%00/{inviteId}", "percent-encodes `%00`"),
        ("/invites/%c0%ae%c0%ae/{inviteId}", "percent-encodes `%c0`"),  # an overlong dot
        # A query, a fragment once a gateway decodes the path: the re-send at inv_2.
        ("/invites/inv_2/resend%3Fx=/{inviteId}", "percent-encodes `%3F`"),
        ("/invites/inv_2/resend%3f/{inviteId}", "percent-encodes `%3f`"),
        ("/invites/inv_2/resend%23/{inviteId}", "percent-encodes `%23`"),
        ("/invites/{inviteId}/..;x/inv_2", "has a `..;x` segment"),  # Tomcat's `..`
        ("/invites/{inviteId}/;/inv_2", "has a `;` segment"),
        ("/invites/{inviteId}/.../inv_2", "has a `...` segment"),
        ("/invites/%zz/{inviteId}", "holds '%'"),
        ("/invites/a b/{inviteId}", "holds ' '"),
        ("/invites/\u2024\u2024/{inviteId}", "holds '\u2024'"),  # ONE DOT LEADER
        ("/invites/{id}/{inviteId}", "holds '{'"),
    ],
)
@pytest.mark.parametrize("key", PATH_KEYS)
def test_a_template_that_is_not_a_plain_path_is_refused_at_load_naming_line_key_and_value(
    tmp_path: Path, key: str, template: str, why: str
) -> None:
    config = tmp_path / "reconciler.yaml"
    config.write_text(f"max_attempts: 2\n{key}: '{template}'\n", encoding="utf-8")
    with pytest.raises(InputError) as refused:
        load_settings(str(config), env={})
    said = str(refused.value)
    assert said.startswith(f"{config}:2:{len(key) + 3}: `{key}`: {quote_value(template)} {why}")


@pytest.mark.parametrize(
    "template",
    [
        "/public-api/v1/kyb/invites/{inviteId}",
        "/public-api/v1/kyb/invites/{inviteId}/resend",
        "/kyb/v2/invites/{inviteId}/actions/resend",  # a renamed prefix
        "/gw/~team/kyb;v=2/invites/{inviteId}",
        "/kyb/%41pi/{inviteId}",  # an encoded letter is a letter
        "/kyb/v2;api=1/invites/{inviteId}",  # a segment with a parameter
        "/kyb/.well-known/{inviteId}",
    ],
)
@pytest.mark.parametrize("key", PATH_KEYS)
def test_a_plain_path_with_inviteid_as_a_segment_is_accepted(
    tmp_path: Path, key: str, template: str
) -> None:
    config = tmp_path / "reconciler.yaml"
    config.write_text(f"{key}: '{template}'\n", encoding="utf-8")
    assert getattr(load_settings(str(config), env={}).contract, key) == template


def test_what_a_refusal_quotes_of_the_template_is_escaped() -> None:
    said = path_problem("get_invite_path", "/x/..;\x1b]0;owned\x07/{inviteId}") or ""
    assert "has a `..;" in said and "\x1b" not in said and "\x07" not in said


def test_the_defaults_are_plain_paths() -> None:
    check_contract(Contract())  # raises if not
    assert all(path_problem(key, getattr(Contract(), key)) is None for key in PATH_KEYS)


@pytest.mark.parametrize(
    ("template", "why"),
    [
        ("/oauth/token?grant=x", "holds a query"),
        ("/oauth/../token", "has a `..` segment"),
        ("/oauth/{inviteId}", "must not hold `{inviteId}`"),
    ],
)
def test_the_token_path_is_a_plain_path_too(template: str, why: str) -> None:
    assert path_problem("token_path", "/auth/v2/token") is None
    assert why in (path_problem("token_path", template) or "")


@pytest.mark.parametrize(
    ("contract", "said"),
    [
        (Contract(resend_invite_path="/invites/{inviteId}/../inv_2/resend"),
         r"`resend_invite_path`: .* has a `\.\.` segment"),
        (Contract(field_names={"phone": "email"}), "already the wire name of `email`"),
    ],
)  # fmt: skip
def test_a_contract_made_in_code_is_held_to_the_same_rules_before_any_request(
    contract: Contract, said: str
) -> None:
    settings = Settings(
        base_url="https://api.example", client_id="ci", client_secret="cs_live_Zq9x"
    )
    with pytest.raises(ConfigError, match=said):
        settings.with_contract(contract).credentials()


@pytest.mark.parametrize("scope", ["kyb:invites:read\x1b[31m", 'a"b', "a\\b", "é", "a\x00b"])
def test_a_scope_that_is_not_rfc_6749_scope_tokens_is_refused_before_any_request(
    scope: str,
) -> None:
    # Sent in the token request's form as written: a terminal escape, a quote or a double
    # space is never meant, and a platform's refusal of it would not say why.
    check_contract(Contract(scope="custom:scope other.scope/x"))  # raises if not
    env = {"RECONCILER_BASE_URL": "https://api.example", "RECONCILER_CLIENT_ID": "ci"}
    env |= {"RECONCILER_CLIENT_SECRET": "cs_live_Zq9x", "RECONCILER_SCOPE": scope}
    with pytest.raises(ConfigError) as caught:
        load_settings(None, env=env).credentials()
    assert "is not scopes separated by spaces" in str(caught.value)
    assert "\x1b" not in str(caught.value)


@pytest.mark.parametrize(
    "scope", ["a:r  b:w", " a:r b:w ", "a:r\tb:w", "a:r b:w\n", "", " ", "api://" + "x" * 300]
)
def test_a_scope_laid_out_with_whitespace_is_taken(scope: str) -> None:
    check_contract(Contract(scope=scope))  # raises if not
