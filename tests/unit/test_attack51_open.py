"""What the attack on issue 51's change found and left open: each test states the behaviour
wanted and is expected to fail (strict xfail) until it is fixed; a fix turns it into a
failure that says to drop the marker. See the attack's report for severity and fix."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.git import git

from reconciler.errors import ConfigError, InputError
from reconciler.settings.config import load_settings

SECRET = "cs_live_attack51_Zq9xW"


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q")
    monkeypatch.chdir(root)
    return root


@pytest.mark.xfail(strict=True, reason="open: a format no check exists for passes everything")
def test_a_policy_format_that_cannot_be_checked_is_a_problem_at_its_place(repo: Path) -> None:
    # Only date, email, idn-email, idn-hostname, ipv4, ipv6, regex, time and uuid are
    # checked here (rfc3987, rfc3339-validator... are not installed): `format: uri` or
    # `date-time` says yes to anything, so the organisation's rule is silently skipped.
    (repo / "reconciler.yaml").write_text(
        "policies:\n  - name: p\n    message: m\n    schema:\n"
        "      properties:\n        name: {format: date-time}\n"
    )
    with pytest.raises((InputError, ConfigError)):
        load_settings("reconciler.yaml", env={"RECONCILER_CLIENT_SECRET": SECRET})
