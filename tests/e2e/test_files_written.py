"""Files the tool writes (issue 37): never over an input, never over an edit, never wider.

One test (or a few) per row of the issue, each against the real sandbox over HTTP,
asserting the files' bytes and modes before and after, and counting the requests
the sandbox saw where the run is refused before reading.
"""

from __future__ import annotations

import os
import shutil
import stat
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from support.cli import run_cli
from support.git import commit_repository
from support.helpers import sandbox_env

import reconciler.files
from reconciler.errors import ReconcilerError
from reconciler.sandbox import Sandbox

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")

A = """\
# EMEA invites.
invites:
  - id: inv_a
    name: Acme Holdings Ltd   # legal name
    email: compliance@acme.example
"""
B = """\
invites:
  - id: inv_b
    name: Beta SA
    attachments:
      - proof-of-address   # scanned
"""
# The platform holds what the files say.
SERVER: list[dict[str, Any]] = [
    {"status": "pending", **invite} for text in (A, B) for invite in yaml.safe_load(text)["invites"]
]


def server_with(**changes: dict[str, Any]) -> list[dict[str, Any]]:
    return [{**invite, **changes.get(invite["id"], {})} for invite in SERVER]


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    files = {"invites/a.yaml": A, "invites/b.yaml": B, "reconciler.yaml": "paths: [invites]\n"}
    return commit_repository(tmp_path, files)


def state(root: Path) -> dict[str, tuple[bytes, int]]:
    """Every file under ``root`` (git's own aside): its bytes and its mode."""
    return {
        str(p.relative_to(root)): (p.read_bytes(), stat.S_IMODE(p.lstat().st_mode))
        for p in sorted(root.rglob("*"))
        if ".git" not in p.parts and p.is_file()
    }


def requests_seen(server: Sandbox) -> int:
    return sum(server.stats.started.values())


# -- row 1: export --force never replaces a file it could not parse ------------------------------


@pytest.mark.parametrize(
    "text",
    [
        A.replace("    name: Acme", "<<<<<<< HEAD\n    name: Acme") + "=======\n>>>>>>> theirs\n",
        "invites:\n  - id: inv_a\n    name: Soci\xe9t\xe9\n",  # Latin-1 bytes below
        "invites:\n  - id: inv_a\n\tname: Tabbed\n",
    ],
    ids=["conflict-markers", "latin-1", "tab"],
)
def test_export_force_never_replaces_a_file_it_cannot_parse(
    repo: Path, start_sandbox: Callable[..., Sandbox], text: str
) -> None:
    target = repo / "invites" / "a.yaml"
    target.write_bytes(text.encode("latin-1") if "\xe9" in text else text.encode("utf-8"))
    os.chmod(target, 0o640)
    before = state(repo)
    server = start_sandbox(SERVER)
    result = run_cli(
        "export", "inv_a", "--out", "invites/a.yaml", "--force", cwd=repo, env=sandbox_env(server)
    )
    assert result.returncode == 1
    assert "invites/a.yaml:" in result.stderr and "cannot be read as invites" in result.stderr
    assert "never replaces a file it cannot parse" in result.stderr
    assert state(repo) == before
    assert requests_seen(server) == 0


def test_export_force_over_a_valid_file_of_its_own_invite_keeps_its_mode(
    repo: Path, start_sandbox: Callable[..., Sandbox]
) -> None:
    target = repo / "invites" / "a.yaml"
    os.chmod(target, 0o600)
    server = start_sandbox(server_with(inv_a={"name": "Acme Group"}))
    result = run_cli(
        "export", "inv_a", "--out", "invites/a.yaml", "--force", cwd=repo, env=sandbox_env(server)
    )
    assert result.returncode == 0, result.stderr
    assert "name: Acme Group" in target.read_text(encoding="utf-8")
    assert stat.S_IMODE(target.stat().st_mode) == 0o600


# -- row 2: prune only on a known status that is not pending -------------------------------------


def test_prune_removes_only_entries_whose_status_is_known_and_not_pending(
    repo: Path, start_sandbox: Callable[..., Sandbox]
) -> None:
    invites = "".join(
        f"  - id: inv_{n}\n    name: Name {n}\n" for n in ("null", "upper", "accepted")
    )
    (repo / "invites" / "p.yaml").write_text("invites:\n" + invites, encoding="utf-8")
    server_state = [
        *SERVER,
        {"id": "inv_null", "status": None, "name": "Name null"},
        {"id": "inv_upper", "status": "PENDING", "name": "Name upper"},
        {"id": "inv_accepted", "status": "accepted", "name": "Name accepted"},
    ]
    # A status left out of the answer is read as null (api.client): the same None.
    server = start_sandbox(server_state)
    result = run_cli("adopt", "--prune-not-pending", cwd=repo, env=sandbox_env(server))
    assert result.returncode == 0, result.stderr
    assert result.stdout == (
        "invites/p.yaml:6: inv_accepted: entry removed (accepted, no longer pending)\n"
    )
    kept = (repo / "invites" / "p.yaml").read_text(encoding="utf-8")
    assert kept == "invites:\n" + invites[: invites.index("  - id: inv_accepted")]
    # And plan calls the three pending, as adopt now does.
    plan = run_cli("plan", cwd=repo, env=sandbox_env(server))
    assert plan.returncode == 0, plan.stderr
    assert "not pending" not in plan.stdout + plan.stderr


# -- row 3: an edit made while adopt reads the platform is never overwritten ----------------------


def edit_while_reading(server: Sandbox, path: Path, old: str, new: str) -> threading.Thread:
    """Edit ``path`` once the sandbox has a GET in hand (answered 0.4 s later)."""

    def edit() -> None:
        deadline = time.monotonic() + 30
        while server.stats.started["GET"] == 0 and time.monotonic() < deadline:
            time.sleep(0.005)
        path.write_text(path.read_text(encoding="utf-8").replace(old, new), encoding="utf-8")

    thread = threading.Thread(target=edit, daemon=True)
    thread.start()
    return thread


@pytest.mark.parametrize("which", ["the value adopted", "another entry"])
def test_an_edit_during_adopts_read_is_refused_naming_the_file_and_kept(
    repo: Path, start_sandbox: Callable[..., Sandbox], which: str
) -> None:
    server = start_sandbox(server_with(inv_a={"name": "Acme Group"}), latency=0.4)
    target = repo / "invites" / "a.yaml"
    old, new = (
        ("Acme Holdings Ltd", "Acme Hand Edit")
        if which == "the value adopted"
        else ("compliance@", "kyb@")
    )
    thread = edit_while_reading(server, target, old, new)
    result = run_cli("adopt", "--target", "inv_a", cwd=repo, env=sandbox_env(server))
    thread.join()
    assert result.returncode == 1
    assert "invites/a.yaml: not written (the invite file): it changed since it was read" in (
        result.stderr
    )
    assert "(no file was changed)" in result.stderr
    assert target.read_text(encoding="utf-8") == A.replace(old, new)  # the edit, whole
    assert result.stdout == ""  # no stale "old -> new" printed for a write that never was
    assert (repo / "invites" / "b.yaml").read_text(encoding="utf-8") == B


# -- row 4: comments, CRLF and plain scalars kept by adopt ------------------------------------


def test_adopt_keeps_crlf_comments_and_plain_style(
    repo: Path, start_sandbox: Callable[..., Sandbox]
) -> None:
    text = (
        "invites:\r\n  - id: inv_b\r\n    name: |-\r\n      Beta SA\r\n    attachments:\r\n"
        "      - proof-of-address   # scanned\r\n      - ubo   # who owns it\r\n"
        "    # after the list\r\n  - id: inv_a\r\n    name: Acme\r\n"
    )
    (repo / "invites" / "a.yaml").unlink()
    (repo / "invites" / "b.yaml").write_bytes(text.encode("utf-8"))
    server = start_sandbox(
        server_with(
            inv_a={"name": "Acme, Inc. [UK]"},
            inv_b={"name": "Beta S.A.", "attachments": ["proof-of-address"]},
        )
    )
    result = run_cli("adopt", cwd=repo, env=sandbox_env(server))
    assert result.returncode == 0, result.stderr
    assert (repo / "invites" / "b.yaml").read_bytes().decode("utf-8") == (
        text.replace("|-\r\n      Beta SA\r\n", '"Beta S.A."\r\n')
        .replace("      - ubo   # who owns it\r\n", "      # who owns it\r\n")
        .replace("name: Acme\r\n", "name: Acme, Inc. [UK]\r\n")
    )
    plan = run_cli("plan", "--detailed-exitcode", cwd=repo, env=sandbox_env(server))
    assert plan.returncode == 0, plan.stdout + plan.stderr


# -- row 5: modes kept; the audit log and saved plans are 0600 ------------------------------------


@pytest.mark.parametrize("mode", [0o600, 0o640, 0o664])
def test_adopt_keeps_the_mode_of_the_file_it_rewrites(
    repo: Path, start_sandbox: Callable[..., Sandbox], mode: int
) -> None:
    target = repo / "invites" / "a.yaml"
    os.chmod(target, mode)
    server = start_sandbox(server_with(inv_a={"name": "Acme Group"}))
    result = run_cli("adopt", cwd=repo, env=sandbox_env(server))
    assert result.returncode == 0, result.stderr
    assert target.read_text(encoding="utf-8") == A.replace("Acme Holdings Ltd", "Acme Group")
    assert stat.S_IMODE(target.stat().st_mode) == mode


def test_the_audit_log_and_a_saved_plan_are_created_readable_by_their_owner_only(
    repo: Path, start_sandbox: Callable[..., Sandbox]
) -> None:
    server = start_sandbox(server_with(inv_a={"name": "Acme Group"}))
    env = sandbox_env(server)
    previous = os.umask(0o022)
    try:
        plan = run_cli("plan", "--out", "../plan.json", cwd=repo, env=env)
        assert plan.returncode == 0, plan.stderr
        apply = run_cli(
            "apply", "--auto-approve", "--audit-log", "../audit.jsonl", cwd=repo, env=env
        )
        assert apply.returncode == 0, apply.stderr
    finally:
        os.umask(previous)
    for name in ("plan.json", "audit.jsonl"):
        assert stat.S_IMODE((repo.parent / name).stat().st_mode) == 0o600, name
    assert "Acme Group" in (repo.parent / "audit.jsonl").read_text(encoding="utf-8")


# -- row 6: the files already written are named when a later one fails --------------------------


def test_a_failed_write_names_the_files_already_written(
    repo: Path, start_sandbox: Callable[..., Sandbox], monkeypatch: pytest.MonkeyPatch
) -> None:
    real_write = reconciler.files.write_atomic

    def failing(target: str, *args: Any, **kwargs: Any) -> None:
        if target.endswith("b.yaml"):
            raise ReconcilerError(
                f"{target}: cannot write the invite file: No space left on device"
            )
        real_write(target, *args, **kwargs)

    monkeypatch.setattr(reconciler.files, "write_atomic", failing)
    server = start_sandbox(server_with(inv_a={"name": "Acme Group"}, inv_b={"name": "Beta AG"}))
    result = run_cli("adopt", cwd=repo, env=sandbox_env(server))
    assert result.returncode == 1
    assert "b.yaml: cannot write the invite file: No space left on device" in result.stderr
    assert "already written before this failure: invites/a.yaml" in result.stderr
    assert (repo / "invites" / "a.yaml").read_text(encoding="utf-8") == A.replace(
        "Acme Holdings Ltd", "Acme Group"
    )
    assert (repo / "invites" / "b.yaml").read_text(encoding="utf-8") == B


# -- row 7: never an output over an input -------------------------------------------------------


@pytest.mark.parametrize(
    "args",
    [
        ["plan", "--out", "invites/a.yaml"],
        ["plan", "--out", "reconciler.yaml"],
        ["plan", "--out", "./invites/../invites/b.yaml"],
        ["validate", "--codequality", "invites/a.yaml"],
        ["validate", "--codequality", "reconciler.yaml"],
        ["apply", "--auto-approve", "--audit-log", "invites/a.yaml"],
        ["adopt", "--summary", "invites/b.yaml"],
    ],
    ids=lambda a: " ".join(a[:3]),
)
def test_an_output_onto_a_file_the_run_reads_is_refused_before_any_request(
    repo: Path, start_sandbox: Callable[..., Sandbox], args: list[str]
) -> None:
    server = start_sandbox(server_with(inv_a={"name": "Acme Group"}))
    before = state(repo)
    result = run_cli(*args, cwd=repo, env=sandbox_env(server))
    assert result.returncode == 1
    assert "a file this run reads" in result.stderr or "cannot open the audit log" in result.stderr
    assert "Traceback" not in result.stderr
    assert state(repo) == before
    assert requests_seen(server) == 0


def test_codequality_onto_an_invite_file_is_refused_even_when_the_files_have_errors(
    repo: Path,
) -> None:
    (repo / "invites" / "a.yaml").write_text("invites:\n  - name: no id\n", encoding="utf-8")
    before = state(repo)
    result = run_cli("validate", "--codequality", "invites/a.yaml", cwd=repo)
    assert result.returncode == 1 and "a file this run reads" in result.stderr
    assert state(repo) == before


def test_an_output_through_a_symlink_to_an_input_is_refused(
    repo: Path, start_sandbox: Callable[..., Sandbox]
) -> None:
    (repo / "out.json").symlink_to(repo / "invites" / "a.yaml")
    server = start_sandbox(SERVER)
    before = state(repo)
    result = run_cli("plan", "--out", "out.json", cwd=repo, env=sandbox_env(server))
    assert result.returncode == 1 and "a file this run reads" in result.stderr
    assert state(repo) == before and requests_seen(server) == 0


# -- row 9: export into a directory not made yet --------------------------------------------------


@pytest.mark.parametrize("schema", [True, False])
def test_export_into_a_new_directory_makes_it_and_says_only_what_is_true(
    repo: Path, start_sandbox: Callable[..., Sandbox], schema: bool
) -> None:
    if schema:
        (repo / "schemas").mkdir()
        (repo / "schemas" / "invites.schema.json").write_text(
            run_cli("schema", cwd=repo).stdout, encoding="utf-8"
        )
    server = start_sandbox([*SERVER, {"id": "inv_c", "status": "pending", "name": "Cee"}])
    result = run_cli(
        "export", "inv_c", "--out", "new/deeper/x.yaml", cwd=repo, env=sandbox_env(server)
    )
    assert result.returncode == 0, result.stderr
    written = (repo / "new" / "deeper" / "x.yaml").read_text(encoding="utf-8")
    assert written.startswith("# yaml-language-server: $schema=../../schemas/invites.schema.json")
    assert "id: inv_c" in written
    assert "made the directory new/deeper" in result.stderr
    assert run_cli("validate", "new", cwd=repo).returncode == 0
    if schema:
        assert "does not exist" not in result.stderr
    else:
        assert f"points at {repo / 'schemas' / 'invites.schema.json'}, which does not exist" in (
            result.stderr
        )
