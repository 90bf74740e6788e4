"""The platform mocked with requests-mock (``support.fake_platform``), and the settings
of a run against it, read as the commands read them."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from support.fake_platform import FakePlatform, serve, write_invites

from reconciler.desired.state import DesiredState
from reconciler.service.offline import read_desired
from reconciler.settings.config import Settings, load_settings


@pytest.fixture
def platform(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[FakePlatform]:
    with serve(monkeypatch, tmp_path) as fake:
        yield fake


@pytest.fixture
def settings(platform: FakePlatform) -> Settings:
    return load_settings(None)


@pytest.fixture
def state(settings: Settings, tmp_path: Path) -> DesiredState:
    """The three invites of ``support.fake_platform``, each with a new e-mail."""
    return read_desired(settings, (str(write_invites(tmp_path / "invites")),))
