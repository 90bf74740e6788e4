"""Fixtures of the in-process tests against the mocked platform (support/fake_platform.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from support.fake_platform import FakePlatform, serve


@pytest.fixture
def platform(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[FakePlatform]:
    """The mocked platform with three invites, for one in-process `reconcile` run."""
    with serve(monkeypatch, tmp_path) as fake:
        yield fake
