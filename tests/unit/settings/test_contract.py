"""Settings hold the platform contract as one Contract, set by the same names as before."""

from __future__ import annotations

from pathlib import Path

from reconciler.settings.config import Settings, load_settings
from reconciler.settings.contract import Contract


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


def test_the_default_contract_is_the_published_one() -> None:
    assert Settings().contract == Contract()
    assert Settings().contract.wire_name("phone") == "phone"
