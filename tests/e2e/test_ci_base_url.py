"""Under CI a file in the repository never decides where the client secret goes
(cli.md, "Where the secret may go"): a pull request that sets `base_url:` in
reconciler.yaml makes no request at all to the host it names, and none anywhere else.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from support.cli import run_cli
from support.helpers import clean_env, sandbox_env
from support.hostile_server import HostileServer

from reconciler.sandbox import SANDBOX_CLIENT_ID, SANDBOX_CLIENT_SECRET, Sandbox

pytestmark = pytest.mark.e2e

DESIRED = "invites:\n  - id: inv_8f2k1\n    name: Acme Holdings Ltd\n"


def repo(tmp_path: Path, base_url: str) -> Path:
    (tmp_path / "invites").mkdir()
    (tmp_path / "invites" / "a.yaml").write_text(DESIRED, encoding="utf-8")
    (tmp_path / "reconciler.yaml").write_text(f"base_url: {base_url}\n", encoding="utf-8")
    return tmp_path


@pytest.mark.parametrize(
    "ci",
    [
        "CI=true",
        "GITHUB_ACTIONS=true",
        "GITLAB_CI=true",
        "CI=1",
        "TF_BUILD=True",  # Azure Pipelines
        "JENKINS_URL=https://jenkins.example/",  # Jenkins sets no CI=true
    ],
)
@pytest.mark.parametrize("command", ["plan", "apply", "adopt", "export"])
def test_a_base_url_from_the_file_is_refused_before_any_request(
    tmp_path: Path, ci: str, command: str
) -> None:
    with HostileServer(secret=SANDBOX_CLIENT_SECRET) as recorder:
        work = repo(tmp_path, recorder.url)
        name, _, value = ci.partition("=")
        env = clean_env(
            RECONCILER_CLIENT_ID=SANDBOX_CLIENT_ID,
            RECONCILER_CLIENT_SECRET=SANDBOX_CLIENT_SECRET,
            **{name: value},
        )
        for other in {"CI", "GITHUB_ACTIONS", "GITLAB_CI", "TF_BUILD", "JENKINS_URL"} - {name}:
            env.pop(other, None)
        args = {"apply": ["apply", "--auto-approve"], "export": ["export", "inv_8f2k1"]}
        result = run_cli(*args.get(command, [command]), cwd=work, env=env)
    assert result.returncode == 1
    assert recorder.seen == []  # not even the token request
    assert "reconciler.yaml sets base_url" in result.stderr
    assert "Set RECONCILER_BASE_URL" in result.stderr
    assert SANDBOX_CLIENT_SECRET not in result.stdout + result.stderr


def test_under_ci_the_variable_decides_and_the_files_host_hears_nothing(
    tmp_path: Path, start_sandbox: Callable[..., Sandbox]
) -> None:
    sandbox = start_sandbox()
    with HostileServer(secret=SANDBOX_CLIENT_SECRET) as recorder:
        work = repo(tmp_path, recorder.url)
        result = run_cli("plan", cwd=work, env=sandbox_env(sandbox, CI="true"))
    assert result.returncode == 0, result.stderr
    assert recorder.seen == [] and sandbox.stats.total > 0


def test_outside_ci_the_file_may_name_the_host(
    tmp_path: Path, start_sandbox: Callable[..., Sandbox]
) -> None:
    sandbox = start_sandbox()
    work = repo(tmp_path, sandbox.url)
    env = clean_env(
        RECONCILER_CLIENT_ID=SANDBOX_CLIENT_ID, RECONCILER_CLIENT_SECRET=SANDBOX_CLIENT_SECRET
    )
    for name in ("CI", "GITHUB_ACTIONS", "GITLAB_CI"):
        env.pop(name, None)
    result = run_cli("plan", cwd=work, env=env)
    assert result.returncode == 0, result.stderr
