"""Files a pull request can plant: FIFOs and devices, symbolic links out of the repository,
paths its reconciler.yaml names out of it, an audit log that is a link or a committed file.
Each is refused at once, with a message that says so, and nothing behind it is read,
quoted or written.

The real `reconcile` in a child process (a regression that blocks fails on the timeout
rather than hanging the suite), against the sandbox over HTTP.
"""

from __future__ import annotations

import os
import shutil
import stat
from collections.abc import Callable
from pathlib import Path

import pytest
from support.cli import run_cli, run_cli_process
from support.git import commit_repository, git
from support.helpers import sandbox_env
from support.invites import ACME, desired_entry, write_invites

from reconciler.sandbox import Sandbox

pytestmark = pytest.mark.e2e

BLOCKS = 20  # seconds: any of these runs takes well under one; blocking fails here


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A git repository holding one invite file, with ACME's email to change."""
    root = commit_repository(tmp_path / "repo", {})
    write_invites(root / "invites", [desired_entry(ACME, email="new@acme.example")])
    git(root, "add", ".")
    git(root, "commit", "-q", "-m", "invites")
    return root


@pytest.fixture
def fifo(tmp_path: Path) -> Path:
    path = tmp_path / "pipe"
    os.mkfifo(path)  # nobody writes to it: opened the ordinary way, a read blocks for ever
    return path


# -- FIFOs and devices: refused at once -------------------------------------------------


@pytest.mark.parametrize(
    ("args", "env_extra", "expected"),
    [
        (["validate", "--config", "{fifo}", "invites"], {}, "cannot read config file"),
        (["show", "{fifo}"], {}, "cannot read a plan file"),
        (["apply", "--plan", "{fifo}"], {}, "cannot read a plan file"),
        (
            ["plan", "invites"],
            {"RECONCILER_CLIENT_SECRET": "", "RECONCILER_CLIENT_SECRET_FILE": "{fifo}"},
            "RECONCILER_CLIENT_SECRET_FILE=",
        ),
        (["validate", "{fifo}"], {}, "not read: it is a FIFO"),
    ],
    ids=["config", "show", "apply-plan", "secret-file", "invite-file"],
)
def test_a_fifo_is_refused_at_once(
    sandbox: Sandbox,
    repo: Path,
    fifo: Path,
    args: list[str],
    env_extra: dict[str, str],
    expected: str,
) -> None:
    env = sandbox_env(sandbox)
    env.update({name: value.format(fifo=fifo) for name, value in env_extra.items()})
    env = {name: value for name, value in env.items() if value}
    argv = [a.format(fifo=fifo) for a in args]

    result = run_cli_process(*argv, cwd=repo, env=env, timeout=BLOCKS)

    assert result.returncode == 1
    assert expected in result.stderr
    assert "FIFO (named pipe), not a regular file" in result.stderr
    assert "Traceback" not in result.stderr
    assert sandbox.stats.total == 0  # nothing was asked of the API


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["plan", "--out", "{fifo}"], "{fifo}: cannot write plan file: it is a FIFO"),
        (
            ["export", "inv_8f2k1", "--out", "{fifo}", "--force"],
            "{fifo}: cannot write the export: it is a FIFO",
        ),
        (
            ["validate", "--codequality", "{fifo}", "invites"],
            "cannot write the Code Quality report: it is a FIFO (named pipe)",
        ),
    ],
    ids=["plan-out", "export-out", "codequality"],
)
def test_an_output_onto_a_fifo_is_refused_at_once(
    sandbox: Sandbox, repo: Path, fifo: Path, args: list[str], said: str
) -> None:
    argv = [a.format(fifo=fifo) for a in args]
    result = run_cli_process(*argv, cwd=repo, env=sandbox_env(sandbox), timeout=BLOCKS)
    assert result.returncode == 1
    assert said.format(fifo=fifo) in result.stderr
    assert "OK:" not in result.stdout  # the files were not even validated
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert sandbox.stats.total == 0


def test_a_device_as_config_is_refused_not_read_to_its_end(repo: Path) -> None:
    result = run_cli_process("validate", "--config", "/dev/zero", "invites", cwd=repo)
    assert result.returncode == 1
    assert "/dev/zero: cannot read config file: it is a device, not a regular file" in (
        result.stderr
    )


# -- invite files: never a link out of the repository -----------------------------------


def test_an_invite_file_linked_out_of_the_repository_is_not_read_or_quoted(
    repo: Path, tmp_path: Path
) -> None:
    secret = tmp_path / "elsewhere" / "database.yaml"
    secret.parent.mkdir()
    secret.write_text("db_password: hunter2-do-not-show\n", encoding="utf-8")
    (repo / "invites" / "linked.yaml").symlink_to(secret)

    result = run_cli("validate", cwd=repo)

    assert result.returncode == 1
    assert (
        f"invites/linked.yaml: not read: it leads to {secret.resolve()}, outside the "
        f"repository ({repo.resolve()}); invite files never follow a link out of it"
    ) in result.stderr
    assert "db_password" not in result.stderr + result.stdout
    assert "hunter2" not in result.stderr + result.stdout


def test_a_link_inside_the_repository_is_read(repo: Path) -> None:
    shared = repo / "shared" / "team.yaml"
    write_invites(shared.parent, [desired_entry(dict(ACME, id="inv_team"))], name="team.yaml")
    (repo / "invites" / "team.yaml").symlink_to(shared)

    result = run_cli("validate", cwd=repo)

    assert result.returncode == 0, result.stderr
    assert "OK: 2 invites in 2 files checked." in result.stdout


def test_outside_git_the_directory_given_is_the_boundary(tmp_path: Path) -> None:
    invites = tmp_path / "plain" / "invites"
    write_invites(invites, [desired_entry(ACME)])
    outside = tmp_path / "plain" / "other.yaml"
    outside.write_text("password: x\n", encoding="utf-8")
    (invites / "other.yaml").symlink_to(outside)

    result = run_cli("validate", str(invites), cwd=tmp_path / "plain")

    assert result.returncode == 1
    assert (
        f"leads to {outside.resolve()}, outside the directory {invites.resolve()} "
        "(not in a git repository)"
    ) in result.stderr
    assert "password" not in result.stderr


# -- issue 51: one rule for every path a repository file names ----------------------------


def audit_log_out(repo: Path, outside: Path) -> tuple[Path, str]:
    """Row 1: `audit_log:` in reconciler.yaml names a file of the job's machine."""
    bashrc = outside / "home" / ".bashrc"
    bashrc.parent.mkdir(parents=True)
    bashrc.write_text("# the job's shell start-up\n", encoding="utf-8")
    (repo / "reconciler.yaml").write_text("audit_log: ../outside/home/.bashrc\n", "utf-8")
    return bashrc, "reconciler.yaml:1:12: `audit_log`: ../outside/home/.bashrc"


def invites_linked_out(repo: Path, outside: Path) -> tuple[Path, str]:
    """Row 3: `invites/` itself a link to a directory out of the repository."""
    planted = write_invites(outside, [desired_entry(ACME, name="Outside Secret Ltd")])
    shutil.rmtree(repo / "invites")
    (repo / "invites").symlink_to(outside)
    return planted, "invites: not read: it"


def config_linked_out(repo: Path, outside: Path) -> tuple[Path, str]:
    """Row 11: reconciler.yaml itself a link out of the repository."""
    outside.mkdir()
    planted = outside / "credentials.yaml"
    planted.write_text("db_password_outside: hunter2\n", encoding="utf-8")
    (repo / "reconciler.yaml").symlink_to(planted)
    return planted, "reconciler.yaml: not read: it"


@pytest.mark.parametrize(
    "plant",
    [audit_log_out, invites_linked_out, config_linked_out],
    ids=["row1-audit-log", "row3-invites-dir", "row11-config-file"],
)
def test_a_path_the_repository_names_out_of_it_is_refused_unread_and_unwritten(
    start_sandbox: Callable[..., Sandbox],
    repo: Path,
    tmp_path: Path,
    plant: Callable[[Path, Path], tuple[Path, str]],
) -> None:
    server = start_sandbox([ACME])
    planted, as_written = plant(repo, tmp_path / "outside")
    before = planted.read_bytes()
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "a pull request's files")
    target = os.path.realpath(planted if plant is not invites_linked_out else planted.parent)

    result = run_cli("apply", "--auto-approve", cwd=repo, env=sandbox_env(server))

    assert result.returncode == 1
    leads = f"{as_written} leads to {target}, outside the repository ({repo.resolve()})"
    assert leads in result.stderr
    assert planted.read_bytes() == before  # not written
    shown = result.stdout + result.stderr
    assert "Outside Secret" not in shown and "db_password" not in shown  # not read
    assert server.stats.total == 0  # refused before any request


# -- the audit log: never through a link, never a committed file -------------------------


def apply_with_log(sandbox: Sandbox, repo: Path, log: str) -> tuple[int, str]:
    result = run_cli(
        "apply", "--auto-approve", "--audit-log", log, cwd=repo, env=sandbox_env(sandbox)
    )
    return result.returncode, result.stderr


def test_an_audit_log_that_is_a_symlink_is_refused_and_its_target_untouched(
    start_sandbox: Callable[..., Sandbox], repo: Path, tmp_path: Path
) -> None:
    server = start_sandbox([ACME])
    target = tmp_path / "bashrc"
    target.write_text("# the job's shell start-up\n", encoding="utf-8")
    (repo / "audit.jsonl").symlink_to(target)

    code, err = apply_with_log(server, repo, "audit.jsonl")

    assert code == 1
    assert "audit.jsonl: cannot open the audit log: it is a symbolic link" in err
    assert "never written through a link" in err
    assert target.read_text(encoding="utf-8") == "# the job's shell start-up\n"
    assert server.stats.calls("PATCH") == []  # no write without its record


def test_an_audit_log_committed_in_the_repository_is_refused(
    start_sandbox: Callable[..., Sandbox], repo: Path
) -> None:
    server = start_sandbox([ACME])
    forged = '{"record": "outcome", "outcome": "ok", "invite_id": "inv_acme"}\n'
    (repo / "audit.jsonl").write_text(forged, encoding="utf-8")
    git(repo, "add", "audit.jsonl")
    git(repo, "commit", "-q", "-m", "a log written by a pull request")

    code, err = apply_with_log(server, repo, "audit.jsonl")

    assert code == 1
    assert "audit.jsonl: cannot open the audit log: it is a file committed in the repository" in (
        err
    )
    assert (repo / "audit.jsonl").read_text(encoding="utf-8") == forged
    assert server.stats.calls("PATCH") == []


def test_an_audit_log_in_a_directory_linked_out_of_the_repository_is_refused(
    start_sandbox: Callable[..., Sandbox], repo: Path, tmp_path: Path
) -> None:
    server = start_sandbox([ACME])
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (repo / "logs").symlink_to(elsewhere)

    code, err = apply_with_log(server, repo, "logs/audit.jsonl")

    assert code == 1
    assert (
        f"logs/audit.jsonl: cannot open the audit log: it leads to {elsewhere.resolve()}"
        f"/audit.jsonl, outside the repository ({repo.resolve()}); the audit log never "
        "follows a link out of it"
    ) in err
    assert not (elsewhere / "audit.jsonl").exists()
    assert server.stats.calls("PATCH") == []


def test_an_untracked_audit_log_in_the_checkout_is_written(
    start_sandbox: Callable[..., Sandbox], repo: Path
) -> None:
    server = start_sandbox([ACME])
    code, err = apply_with_log(server, repo, "audit.jsonl")
    assert code == 0, err
    assert '"outcome": "ok"' in (repo / "audit.jsonl").read_text(encoding="utf-8")


def test_an_audit_log_fifo_is_refused_at_once(
    start_sandbox: Callable[..., Sandbox], repo: Path, fifo: Path
) -> None:
    server = start_sandbox([ACME])
    args = ("apply", "--auto-approve", "--audit-log", str(fifo))
    result = run_cli_process(*args, cwd=repo, env=sandbox_env(server), timeout=BLOCKS)
    assert result.returncode == 1
    assert "cannot open the audit log: it is a FIFO (named pipe), not a regular file" in (
        result.stderr
    )
    assert server.stats.calls("PATCH") == []
