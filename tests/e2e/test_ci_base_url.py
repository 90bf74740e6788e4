"""Under CI a file in the repository never decides where the client secret goes
(cli.md, "Where the secret may go"): a pull request that sets `base_url:` in
reconciler.yaml makes no request at all to the host it names, and none anywhere else.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from support.cli import run_cli
from support.git import commit_repository, git
from support.helpers import clean_env, sandbox_env
from support.hostile_server import HostileServer

from reconciler.sandbox import SANDBOX_CLIENT_ID, SANDBOX_CLIENT_SECRET, Sandbox
from reconciler.settings.config import CI_MARKERS

pytestmark = pytest.mark.e2e

DESIRED = "invites:\n  - id: inv_8f2k1\n    name: Acme Holdings Ltd\n"


def repo(tmp_path: Path, base_url: str) -> Path:
    """A real repository whose last commit, a pull request's, points base_url elsewhere."""
    commit_repository(tmp_path, {"invites/a.yaml": DESIRED})
    (tmp_path / "reconciler.yaml").write_text(f"base_url: {base_url}\n", encoding="utf-8")
    git(tmp_path, "add", ".")
    git(tmp_path, "commit", "-qm", "a pull request: base_url")
    return tmp_path


def without_ci(env: dict[str, str]) -> dict[str, str]:
    """``env`` with no variable that says CI, whatever runs this suite."""
    markers = {"CI", *(name for names in CI_MARKERS.values() for name in names)}
    return {name: value for name, value in env.items() if name not in markers}


@pytest.fixture(scope="module")
def refused_repo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, HostileServer]]:
    """One repository and one recorder for all the refusals: each run is refused before it
    reads, writes or sends anything, which each test asserts of its own run."""
    with HostileServer(secret=SANDBOX_CLIENT_SECRET) as recorder:
        yield repo(tmp_path_factory.mktemp("refused"), recorder.url), recorder


@pytest.mark.parametrize(
    "ci",
    [
        "CI=true",
        "CI=woodpecker",  # Woodpecker: CI is its name, not `true`
        "GITHUB_ACTIONS=true",
        "TF_BUILD=True",  # Azure Pipelines: no CI variable
        "JENKINS_URL=https://jenkins.example/",  # Jenkins: no CI variable
        "CODEBUILD_BUILD_ID=invites:0b8c5b9e",  # AWS CodeBuild: no CI variable
    ],
)
@pytest.mark.parametrize("command", ["plan", "apply", "adopt", "export"])
def test_a_base_url_from_the_file_is_refused_before_any_request(
    refused_repo: tuple[Path, HostileServer], ci: str, command: str
) -> None:
    work, recorder = refused_repo
    recorder.seen.clear()
    before = {p: p.read_bytes() for p in work.rglob("*") if p.is_file() and ".git" not in p.parts}
    name, _, value = ci.partition("=")
    env = without_ci(
        clean_env(
            RECONCILER_CLIENT_ID=SANDBOX_CLIENT_ID,
            RECONCILER_CLIENT_SECRET=SANDBOX_CLIENT_SECRET,
        )
    )
    env[name] = value
    args = {"apply": ["apply", "--auto-approve"], "export": ["export", "inv_8f2k1"]}
    result = run_cli(*args.get(command, [command]), cwd=work, env=env)
    after = {p: p.read_bytes() for p in work.rglob("*") if p.is_file() and ".git" not in p.parts}
    assert after == before  # nothing written: the next test finds the repository as it was
    assert result.returncode == 1
    assert recorder.seen == []  # not even the token request
    assert "reconciler.yaml sets base_url, which under CI" in result.stderr
    assert name in result.stderr and "Set RECONCILER_BASE_URL" in result.stderr
    assert name == "CI" or value not in result.stderr  # a marker is named, not shown
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
    env = without_ci(
        clean_env(
            RECONCILER_CLIENT_ID=SANDBOX_CLIENT_ID, RECONCILER_CLIENT_SECRET=SANDBOX_CLIENT_SECRET
        )
    )
    result = run_cli("plan", cwd=work, env=env)
    assert result.returncode == 0, result.stderr
