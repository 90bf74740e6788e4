"""max_rate (issue 55): requests per second at most, from `--max-rate`,
RECONCILER_MAX_RATE or reconciler.yaml, one conversion for all three; the run's pacers
never go above it."""

from __future__ import annotations

from pathlib import Path

import pytest

from reconciler.api.capacity import MIN_RATE, capacity_for
from reconciler.errors import ConfigError
from reconciler.settings.config import MIN_MAX_RATE, Settings, load_settings


@pytest.fixture(autouse=True)
def _empty_cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    work = tmp_path / "cwd"
    work.mkdir()
    monkeypatch.chdir(work)


def test_a_max_rate_below_the_pacers_least_in_the_file_is_refused_at_its_line(tmp_path) -> None:
    # A pull request can edit reconciler.yaml: a CI job must not crawl silently.
    config = tmp_path / "reconciler.yaml"
    config.write_text("timeout: 30\nmax_rate: 0.0001\n", encoding="utf-8")
    with pytest.raises(ConfigError) as caught:
        load_settings(str(config), env={})
    assert str(caught.value) == (
        f"{config}:2:1: max_rate: 0.0001 must be at least 0.2 and at most 100000"
    )
    assert MIN_MAX_RATE == MIN_RATE  # the least the pacer paces at


def test_the_runs_pacer_never_goes_above_max_rate() -> None:
    pacer = capacity_for(Settings(max_rate=12.5)).pacer

    assert pacer._control.rate <= 12.5 and pacer._control._cap == 12.5
