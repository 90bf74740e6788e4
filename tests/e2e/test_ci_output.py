"""What `reconcile` prints for a CI job: annotations, step summary, help, selection, export.

In-process (support.cli.run_cli) against an in-process sandbox over HTTP on 127.0.0.1.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from support.cli import run_cli
from support.helpers import clean_env, sandbox_env
from support.invites import ACME, desired_entry, write_invites

from reconciler.sandbox import Sandbox


@pytest.fixture
def reconcile(tmp_path: Path) -> Callable[..., tuple[int, str, str]]:
    """Run `reconcile ARGS` in tmp_path with exactly the RECONCILER_/CI variables given."""
    ours = ("RECONCILER_", "GITHUB_", "NO_COLOR", "TERM")
    machine = {k: v for k, v in clean_env().items() if not k.startswith(ours)}

    def run(*args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
        given = {k: v for k, v in (env or {}).items() if k.startswith(ours)}
        result = run_cli(*args, cwd=tmp_path, env=machine | given)
        return result.returncode, result.stdout, result.stderr

    return run


def two_invites(start_sandbox: Callable[..., Sandbox], tmp_path: Path) -> Sandbox:
    other = dict(ACME, id="inv_other", name="Other Ltd")
    server = start_sandbox([ACME, other])
    write_invites(
        tmp_path / "invites",
        [desired_entry(ACME, email="new@acme.example"), desired_entry(other, groups=["apac"])],
    )
    return server


def test_reconcile_alone_prints_help_and_succeeds(reconcile: Any) -> None:
    code, out, err = reconcile()
    assert code == 0, err
    assert "Usage: reconcile" in out and "plan" in out and "validate" in out


@pytest.mark.parametrize(
    ("command", "names"),
    [
        (
            "plan",
            [
                "RECONCILER_BASE_URL",
                "RECONCILER_CLIENT_SECRET_FILE",
                "RECONCILER_PARALLELISM",
                "NO_COLOR",
                "GITHUB_STEP_SUMMARY",
                "reconciler.yaml",
                "max_changes",
                "paths",
            ],
        ),
        ("apply", ["RECONCILER_CLIENT_SECRET", "RECONCILER_AUDIT_LOG", "audit_log", "max_changes"]),
        ("export", ["RECONCILER_BASE_URL", "schema_ref", "reconciler.yaml"]),
        ("validate", ["GITHUB_ACTIONS", "reconciler.yaml", "paths"]),
        ("resend", ["RECONCILER_CLIENT_ID", "audit_log"]),
    ],
)
def test_each_commands_help_names_what_it_reads(
    reconcile: Any, command: str, names: list[str]
) -> None:
    code, out, _ = reconcile(command, "--help")
    assert code == 0
    flat = " ".join(out.split())
    for name in names:
        assert name in flat, f"{command} --help does not mention {name}"


def test_parallelism_from_the_environment_is_checked_like_the_option(
    reconcile: Any, sandbox: Sandbox
) -> None:
    code, _, err = reconcile("plan", "--sandbox", env={"RECONCILER_PARALLELISM": "1000"})
    assert code == 1
    assert "RECONCILER_PARALLELISM" in err and "at most 256" in err
    code, _, err = reconcile("plan", "--sandbox", "--parallelism", "1000")
    assert code == 1 and "at most 256" in err


def test_exclude_leaves_an_invite_out_and_an_unknown_id_is_named(
    reconcile: Any, start_sandbox: Callable[..., Sandbox], tmp_path: Path
) -> None:
    server = two_invites(start_sandbox, tmp_path)
    code, out, err = reconcile("plan", "--exclude", "inv_other", env=sandbox_env(server))
    assert code == 0, err
    assert "Plan: 1 to update" in out and "inv_other" not in out
    assert [r.path.rsplit("/", 1)[1] for r in server.stats.calls("GET")] == ["inv_acme"]
    code, _, err = reconcile("plan", "--exclude", "inv_typo", env=sandbox_env(server))
    assert code == 1 and "--exclude inv_typo" in err


def test_colour_always_and_never(
    reconcile: Any, start_sandbox: Callable[..., Sandbox], tmp_path: Path
) -> None:
    env = sandbox_env(two_invites(start_sandbox, tmp_path))
    assert "\x1b[" in reconcile("plan", "--color", "always", env=env)[1]
    assert "\x1b[" not in reconcile("plan", "--color", "never", env=env)[1]
    assert "\x1b[" not in reconcile("plan", env=env)[1]  # auto, and stdout is no terminal


# --- GitHub Actions ----------------------------------------------------------------------


def test_validate_under_github_actions_annotates_each_problem(
    reconcile: Any, tmp_path: Path
) -> None:
    write_invites(tmp_path / "invites", [{"id": "inv_a", "email": 42}, {"id": "inv_a"}])
    code, _, err = reconcile("validate", env={"GITHUB_ACTIONS": "true"})
    assert code == 1
    annotations = [line for line in err.splitlines() if line.startswith("::error ")]
    assert len(annotations) == 2
    assert all(a.startswith("::error file=invites/invites.yaml,line=") for a in annotations)
    assert any(",col=" in a and "inv_a" in a for a in annotations)
    # The plain error text follows, as without GitHub.
    assert "invites/invites.yaml:" in err and err.rstrip().endswith("Found 2 problems.")


def test_no_annotations_outside_github(reconcile: Any, tmp_path: Path) -> None:
    write_invites(tmp_path / "invites", [{"id": "inv_a", "email": 42}])
    code, _, err = reconcile("validate")
    assert code == 1 and "::error" not in err


def test_plan_under_github_annotates_invite_errors_and_writes_the_step_summary(
    reconcile: Any, start_sandbox: Callable[..., Sandbox], tmp_path: Path
) -> None:
    server = two_invites(start_sandbox, tmp_path)
    write_invites(tmp_path / "invites", [{"id": "inv_gone", "name": "Nobody"}], name="z.yaml")
    summary = tmp_path / "summary.md"
    summary.write_text("earlier step\n", encoding="utf-8")
    env = sandbox_env(server, GITHUB_ACTIONS="true", GITHUB_STEP_SUMMARY=str(summary))
    code, out, err = reconcile("plan", "--format", "json", env=env)
    assert code == 1
    assert json.loads(out)["summary"]["error"] == 1  # stdout stays the product
    (annotation,) = [line for line in err.splitlines() if line.startswith("::error")]
    # At the entry, as input errors are, so it shows on the pull request's line.
    assert annotation.startswith("::error file=invites/z.yaml,line=2,title=inv_gone::")
    assert "404" in annotation
    text = summary.read_text(encoding="utf-8")
    assert text.startswith("earlier step\n### Invite plan: 2 to update")


def test_a_run_fatal_error_is_annotated_and_is_the_last_line(
    reconcile: Any, sandbox: Sandbox, tmp_path: Path
) -> None:
    write_invites(tmp_path / "invites", [{"id": "inv_8f2k1"}, {"id": "inv_3m9q7"}])
    env = sandbox_env(sandbox, RECONCILER_SCOPE="kyb:everything", GITHUB_ACTIONS="true")
    code, _, err = reconcile("plan", env=env)
    lines = err.strip().splitlines()
    assert code == 1
    assert lines[-1].startswith("error:") and "unknown scope" in lines[-1]
    assert any(line.startswith("::error title=invite-reconciler::") for line in lines)
    assert not any(line.startswith("Reading invites: 2 of 2") for line in lines)


def test_validate_writes_a_code_quality_report(reconcile: Any, tmp_path: Path) -> None:
    write_invites(tmp_path / "invites", [{"id": "inv_a", "email": 42}])
    code, _, _ = reconcile("validate", "--codequality", "cq.json")
    assert code == 1
    (entry,) = json.loads((tmp_path / "cq.json").read_text(encoding="utf-8"))
    assert entry["location"]["path"] == "invites/invites.yaml"
    assert entry["location"]["lines"]["begin"] >= 2
    assert entry["severity"] == "major" and entry["fingerprint"] and entry["check_name"]
    write_invites(tmp_path / "invites", [{"id": "inv_a"}])
    assert reconcile("validate", "--codequality", "cq.json")[0] == 0
    assert json.loads((tmp_path / "cq.json").read_text(encoding="utf-8")) == []


# --- export ------------------------------------------------------------------------------


def test_export_refuses_an_id_already_in_the_invite_files(
    reconcile: Any, sandbox: Sandbox, tmp_path: Path
) -> None:
    # Only into a file, which would define the id twice; to stdout it is the advised fix.
    write_invites(tmp_path / "invites", [{"id": "inv_8f2k1", "name": "Acme"}])
    args = ("export", "inv_8f2k1", "inv_3m9q7", "--out", "more.yaml")
    code, out, err = reconcile(*args, env=sandbox_env(sandbox))
    assert code == 1 and out == ""
    assert "inv_8f2k1 (at invites/invites.yaml:2)" in err
    assert sandbox.stats.calls("GET") == []
    assert not (tmp_path / "more.yaml").exists()


def test_export_writes_a_schema_line_that_resolves_or_says_how(
    reconcile: Any, sandbox: Sandbox, tmp_path: Path
) -> None:
    env = sandbox_env(sandbox)
    (tmp_path / "team").mkdir()
    code, _, err = reconcile("export", "inv_3m9q7", "--out", "team/new.yaml", env=env)
    assert code == 0, err
    first = (tmp_path / "team" / "new.yaml").read_text(encoding="utf-8").splitlines()[0]
    assert first == "# yaml-language-server: $schema=../schemas/invites.schema.json"
    assert "reconcile schema > schemas/invites.schema.json" in err
    (tmp_path / "schemas").mkdir()
    assert reconcile("schema")[0] == 0
    (tmp_path / "schemas" / "invites.schema.json").write_text(reconcile("schema")[1])
    (tmp_path / "x" / "y").mkdir(parents=True)
    code, _, err = reconcile("export", "inv_3m9q7", "--out", "x/y/z.yaml", env=env)
    first = (tmp_path / "x" / "y" / "z.yaml").read_text(encoding="utf-8").splitlines()[0]
    assert first.endswith("$schema=../../schemas/invites.schema.json")
    assert (tmp_path / "x" / "y" / "../../schemas/invites.schema.json").exists()
    assert "does not exist" not in err


def test_apply_under_github_annotates_each_write_that_failed(
    reconcile: Any,
    start_sandbox: Callable[..., Sandbox],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    server = two_invites(start_sandbox, tmp_path)
    update = server.store.update

    def accepted_just_before_the_write(
        invite_id: str, changes: dict[str, Any], if_match: str | None = None
    ) -> Any:
        if invite_id == "inv_other":  # the invitee accepts between the read and the write
            server.store.put(dict(server.store.get(invite_id), status="accepted"))
        return update(invite_id, changes, if_match)

    monkeypatch.setattr(server.store, "update", accepted_just_before_the_write)
    env = sandbox_env(server, GITHUB_ACTIONS="true")
    code, out, err = reconcile("apply", "--auto-approve", env=env)
    assert code == 1
    annotations = [line for line in err.splitlines() if line.startswith("::error")]
    assert len(annotations) == 1, out + err
    assert annotations[0].startswith("::error file=invites/invites.yaml,line=17,title=inv_other::")
    assert "409" in annotations[0]
    assert "1 updated, 1 failed" in out
