"""run_cli in this process gives what the installed script gives, and leaves no trace."""

from __future__ import annotations

import logging
import os
from pathlib import Path

from support.cli import run_cli, run_cli_process
from support.helpers import EXAMPLES, clean_env

from reconciler import safetext


def test_same_streams_and_exit_codes_as_the_installed_script(tmp_path: Path) -> None:
    for args in (["--version"], ["validate", str(EXAMPLES)], ["plan", "--no-such-option"]):
        inside = run_cli(*args, cwd=tmp_path)
        outside = run_cli_process(*args, cwd=tmp_path)
        assert (inside.returncode, inside.stdout, inside.stderr) == (
            outside.returncode,
            outside.stdout,
            outside.stderr,
        ), args


def test_a_run_leaves_environment_directory_logging_and_secrets_as_they_were(
    tmp_path: Path,
) -> None:
    logger = logging.getLogger("reconciler")
    before = (dict(os.environ), os.getcwd(), list(logger.handlers), logger.level)
    # Other tests may have registered secrets in this process: only this run's must go.
    secrets_before = safetext._REDACTOR._secrets
    env = clean_env(RECONCILER_CLIENT_SECRET="a-secret-of-this-run")
    result = run_cli("plan", "-v", "--sandbox", str(EXAMPLES), cwd=tmp_path, env=env)
    assert result.returncode in (0, 2), result.stderr
    assert (dict(os.environ), os.getcwd(), list(logger.handlers), logger.level) == before
    assert safetext._REDACTOR._secrets == secrets_before


def test_secrets_registered_outside_a_run_do_not_hide_what_it_prints(tmp_path: Path) -> None:
    safetext.register_secret("Acme Holdings Ltd")  # as an earlier test's client might
    try:
        shown = run_cli("plan", "--sandbox", str(EXAMPLES), cwd=tmp_path)
    finally:
        safetext._REDACTOR._secrets = tuple(
            s for s in safetext._REDACTOR._secrets if s != "Acme Holdings Ltd"
        )
    assert "~ inv_8f2k1  Acme Holdings Ltd" in shown.stdout
    assert "[redacted]" not in shown.stdout + shown.stderr
