"""`reconcile adopt`: what changed on the platform becomes a reviewable diff of the files.

Run in a real git repository against the real sandbox: the diff adopt leaves is
what a pull request would show.
"""

from __future__ import annotations

import shutil
import unicodedata
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from support.cli import run_cli
from support.git import commit_repository, git
from support.helpers import sandbox_env

from reconciler.sandbox import SANDBOX_CLIENT_SECRET, Sandbox

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")

FILE = """\
# yaml-language-server: $schema=../schemas/invites.schema.json
# EMEA invites. Keep ids sorted.
invites:
  # Acme: the group's holding company.
  - id: inv_acme
    name: Acme Holdings Ltd      # legal name, as registered
    email: compliance@acme.example
    phone: "+442079460000"
    primaryContact:
      name: Jane Doe
      email: jane@acme.example
    groups: [emea, enterprise]

  - id: inv_beta
    name: 'Bêta Société SA'
    email: ops@beta.example
    attachments:
      - proof-of-address     # scanned
      - certificate-of-incorporation


  - id: inv_gamma   # untouched
    name: Gamma GmbH
    email: kyb@gamma.example
    groups:   [emea]
"""

# The platform holds what the file says: a test changes what it holds (server_with).
SERVER: list[dict[str, Any]] = [
    {"status": "pending", **invite} for invite in yaml.safe_load(FILE)["invites"]
]


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return commit_repository(tmp_path, {"invites/emea.yaml": FILE})


def server_with(**changes: dict[str, Any]) -> list[dict[str, Any]]:
    """The server's invites, with ``changes`` by invite id."""
    return [{**invite, **changes.get(invite["id"], {})} for invite in SERVER]


def diff_lines(repo: Path) -> list[str]:
    """The lines `git diff` shows removed and added, as a reviewer reads them."""
    diff = git(repo, "diff", "--no-color", "-U0")
    return [
        line
        for line in diff.splitlines()
        if line[:1] in "+-" and not line.startswith(("+++", "---"))
    ]


def test_adopt_edits_only_the_values_that_differ_and_a_plan_is_then_clean(
    repo: Path, start_sandbox: Callable[..., Sandbox]
) -> None:
    server = start_sandbox(
        server_with(
            inv_acme={
                "email": "onboarding@acme.example",
                "primaryContact": {"name": "Jane Roe", "email": "jane@acme.example"},
                "groups": ["emea", "enterprise", "priority"],
            },
            inv_beta={"name": "Bêta Société S.A.", "attachments": ["proof-of-address"]},
        )
    )
    env = sandbox_env(server)
    result = run_cli("adopt", cwd=repo, env=env)
    assert result.returncode == 0, result.stderr
    path = "invites/emea.yaml"
    assert result.stdout.splitlines() == [
        f'{path}:7: inv_acme email: "compliance@acme.example" -> "onboarding@acme.example"',
        f'{path}:10: inv_acme primaryContact.name: "Jane Doe" -> "Jane Roe"',
        f'{path}:12: inv_acme groups: ["emea", "enterprise"] -> ["emea", "enterprise", "priority"]',
        f'{path}:15: inv_beta name: "Bêta Société SA" -> "Bêta Société S.A."',
        f'{path}:18: inv_beta attachments: ["proof-of-address", '
        '"certificate-of-incorporation"] -> ["proof-of-address"]',
    ]
    assert "Adopted 5 values in 1 file." in result.stderr
    # Each value in its own style; comments, blank lines, gamma: byte for byte.
    assert diff_lines(repo) == [
        "-    email: compliance@acme.example",
        "+    email: onboarding@acme.example",
        "-      name: Jane Doe",
        "+      name: Jane Roe",
        "-    groups: [emea, enterprise]",
        "+    groups: [emea, enterprise, priority]",
        "-    name: 'Bêta Société SA'",
        "+    name: 'Bêta Société S.A.'",
        "-      - certificate-of-incorporation",
    ]
    text = (repo / path).read_text(encoding="utf-8")
    assert text.endswith(FILE[FILE.index("\n\n\n") :])  # gamma and the blank lines before it
    # Nothing but reads and the token: adopt never writes to the API.
    assert server.stats.calls("PATCH") == []
    assert all(r.path.endswith("/token") for r in server.stats.calls("POST"))
    plan = run_cli("plan", "--detailed-exitcode", cwd=repo, env=env)
    assert plan.returncode == 0, plan.stdout + plan.stderr
    assert "Plan: 0 to update, 3 unchanged, 0 errors." in plan.stdout


def test_nothing_to_adopt_leaves_the_files_alone(
    repo: Path, start_sandbox: Callable[..., Sandbox]
) -> None:
    server = start_sandbox(SERVER)
    result = run_cli("adopt", cwd=repo, env=sandbox_env(server))
    assert result.returncode == 0, result.stderr
    assert result.stdout == ""
    assert "Nothing to adopt" in result.stderr
    assert git(repo, "status", "--porcelain") == ""


ALIASED = """\
invites:
  - id: inv_acme
    name: Acme Holdings Ltd
    email: compliance@acme.example
    groups: &eu [emea, enterprise]
  - id: inv_gamma
    name: Gamma GmbH
    email: kyb@gamma.example
    groups: *eu
"""


def test_an_aliased_value_is_listed_and_left_alone_and_the_run_fails(
    repo: Path, start_sandbox: Callable[..., Sandbox]
) -> None:
    (repo / "invites" / "emea.yaml").write_text(ALIASED, encoding="utf-8")
    git(repo, "commit", "-qam", "aliased groups")
    server = start_sandbox(
        server_with(
            inv_acme={"groups": ["emea", "enterprise"]},
            inv_gamma={"groups": ["emea"], "name": "Gamma AG"},
        )
    )
    result = run_cli("adopt", cwd=repo, env=sandbox_env(server))
    assert result.returncode == 1
    assert (
        'invites/emea.yaml:9: inv_gamma groups: not edited to ["emea"]: it comes through an '
        "anchor, alias or merge" in result.stderr
    )
    assert result.stderr.rstrip().splitlines()[-1].startswith("error: 1 value could not be")
    # The other value is adopted; the shared one is as it was.
    assert result.stdout == 'invites/emea.yaml:7: inv_gamma name: "Gamma GmbH" -> "Gamma AG"\n'
    assert diff_lines(repo) == ["-    name: Gamma GmbH", "+    name: Gamma AG"]


@pytest.mark.parametrize("prune", [True, False])
def test_prune_not_pending_removes_the_entries_of_accepted_invites(
    repo: Path, start_sandbox: Callable[..., Sandbox], prune: bool
) -> None:
    server = start_sandbox(server_with(inv_beta={"status": "accepted"}))
    args = ["adopt", "--prune-not-pending"] if prune else ["adopt"]
    result = run_cli(*args, cwd=repo, env=sandbox_env(server))
    assert result.returncode == 0, result.stderr
    text = (repo / "invites" / "emea.yaml").read_text(encoding="utf-8")
    if not prune:
        assert text == FILE
        return
    assert result.stdout == (
        "invites/emea.yaml:14: inv_beta: entry removed (accepted, no longer pending)\n"
    )
    beta = FILE[FILE.index("  - id: inv_beta") : FILE.index("  - id: inv_gamma")]
    assert text == FILE.replace(beta, "")
    assert "Removed 1 entry in 1 file." in result.stderr


@pytest.mark.parametrize("ending", ["\n", "\r\n"], ids=["lf", "crlf"])
@pytest.mark.parametrize(
    "gone",
    [["inv_beta", "inv_gamma"], ["inv_acme", "inv_beta", "inv_gamma"]],
    ids=["all-but-the-first", "all"],
)
def test_prune_removes_the_last_entries_with_blank_lines_between_them(
    repo: Path, start_sandbox: Callable[..., Sandbox], gone: list[str], ending: str
) -> None:
    # Blank lines between the entries, as people write them: the last two went with a
    # cut each, the two cuts took the same blank lines and adopt refused the file (issue 40).
    path = repo / "invites" / "emea.yaml"
    path.write_bytes(FILE.replace("\n", ending).encode("utf-8"))
    git(repo, "commit", "-q", "--allow-empty", "-am", f"{ending!r} line breaks")
    status = {"inv_acme": "expired", "inv_beta": "accepted", "inv_gamma": "expired"}
    server = start_sandbox(server_with(**{i: {"status": status[i]} for i in gone}))
    result = run_cli("adopt", "--prune-not-pending", cwd=repo, env=sandbox_env(server))
    assert result.returncode == 0, result.stderr
    line = {"inv_acme": 5, "inv_beta": 14, "inv_gamma": 22}
    assert result.stdout.splitlines() == [
        f"invites/emea.yaml:{line[i]}: {i}: entry removed ({status[i]}, no longer pending)"
        for i in gone
    ]
    assert f"Removed {len(gone)} entries in 1 file." in result.stderr
    if "inv_acme" in gone:  # its comment above it names a key (`Acme:`): not the list's
        kept = FILE[: FILE.index("invites:")] + "invites: []\n"
    else:  # acme, without the blank line that was between it and beta
        kept = FILE[: FILE.index("\n  - id: inv_beta")]
    assert path.read_bytes() == kept.replace("\n", ending).encode("utf-8")
    plan = run_cli("plan", "--detailed-exitcode", cwd=repo, env=sandbox_env(server))
    assert plan.returncode == 0, plan.stdout + plan.stderr


def test_target_adopts_one_invite_and_reads_no_other(
    repo: Path, start_sandbox: Callable[..., Sandbox]
) -> None:
    server = start_sandbox(
        server_with(inv_acme={"name": "Acme Group"}, inv_beta={"name": "Beta AG"})
    )
    result = run_cli("adopt", "--target", "inv_beta", cwd=repo, env=sandbox_env(server))
    assert result.returncode == 0, result.stderr
    assert [r.path.rsplit("/", 1)[1] for r in server.stats.calls("GET")] == ["inv_beta"]
    assert diff_lines(repo) == ["-    name: 'Bêta Société SA'", "+    name: 'Beta AG'"]


def test_an_invalid_file_is_refused_before_anything_is_read(
    repo: Path, start_sandbox: Callable[..., Sandbox]
) -> None:
    (repo / "invites" / "bad.yaml").write_text("invites:\n  - name: No Id\n", encoding="utf-8")
    server = start_sandbox(server_with(inv_acme={"name": "Acme Group"}))
    result = run_cli("adopt", cwd=repo, env=sandbox_env(server))
    assert result.returncode == 1
    assert "invites/bad.yaml:2" in result.stderr and "Traceback" not in result.stderr
    assert server.stats.calls("GET") == []
    assert git(repo, "status", "--porcelain", "--", "invites/emea.yaml") == ""


def test_an_invite_the_platform_does_not_know_fails_the_run_and_the_others_are_adopted(
    repo: Path, start_sandbox: Callable[..., Sandbox]
) -> None:
    known = server_with(inv_acme={"name": "Acme Group"})
    server = start_sandbox([i for i in known if i["id"] != "inv_beta"])
    result = run_cli("adopt", cwd=repo, env=sandbox_env(server))
    assert result.returncode == 1
    assert "error: inv_beta:" in result.stderr
    assert diff_lines(repo) == [
        "-    name: Acme Holdings Ltd      # legal name, as registered",
        "+    name: Acme Group      # legal name, as registered",
    ]


def test_a_value_from_the_platform_is_escaped_on_the_terminal(
    repo: Path, start_sandbox: Callable[..., Sandbox]
) -> None:
    server = start_sandbox(server_with(inv_gamma={"name": "Gamma\x1b[31m GmbH"}))
    result = run_cli("adopt", cwd=repo, env=sandbox_env(server))
    assert "\x1b" not in result.stdout + result.stderr


def test_a_value_echoing_the_secret_is_not_adopted_neither_raw_nor_redacted(
    repo: Path, start_sandbox: Callable[..., Sandbox]
) -> None:
    # Written as "[redacted]", the value would be sent as the name by the next apply.
    server = start_sandbox(
        server_with(
            inv_gamma={"name": f"Gamma {SANDBOX_CLIENT_SECRET}"},
            inv_acme={"name": "Acme Group"},
        )
    )
    result = run_cli("adopt", cwd=repo, env=sandbox_env(server))
    assert result.returncode == 1
    assert "inv_gamma" in result.stderr and "holds the client secret or a token" in result.stderr
    text = (repo / "invites" / "emea.yaml").read_text(encoding="utf-8")
    assert SANDBOX_CLIENT_SECRET not in text + result.stdout + result.stderr
    assert "[redacted]" not in text
    assert diff_lines(repo) == [  # the other invite is adopted all the same
        "-    name: Acme Holdings Ltd      # legal name, as registered",
        "+    name: Acme Group      # legal name, as registered",
    ]


def test_text_the_platform_holds_decomposed_is_written_in_nfc(
    repo: Path, start_sandbox: Callable[..., Sandbox]
) -> None:
    decomposed = unicodedata.normalize("NFD", "Gamma Café GmbH")
    server = start_sandbox(server_with(inv_gamma={"name": decomposed}))
    assert run_cli("adopt", cwd=repo, env=sandbox_env(server)).returncode == 0
    assert diff_lines(repo) == ["-    name: Gamma GmbH", "+    name: Gamma Café GmbH"]
    # Compared in NFC too: a second adopt finds nothing to do, a plan no change.
    again = run_cli("adopt", cwd=repo, env=sandbox_env(server))
    assert again.returncode == 0 and git(repo, "diff", "--stat").count("changed") == 1
    plan = run_cli("plan", "--detailed-exitcode", cwd=repo, env=sandbox_env(server))
    assert plan.returncode == 0, plan.stdout + plan.stderr


def test_changed_since_leaves_a_change_not_applied_yet_alone_and_lists_it_apart(
    repo: Path, start_sandbox: Callable[..., Sandbox], tmp_path: Path
) -> None:
    # Merged, not applied yet: acme's name in git. Drift: beta's name on the platform.
    # Both sides: gamma's e-mail changed in git and, differently, on the platform.
    applied = git(repo, "rev-parse", "HEAD")
    path = repo / "invites" / "emea.yaml"
    text = path.read_text(encoding="utf-8")
    text = text.replace("name: Acme Holdings Ltd ", "name: Acme Renamed plc ")
    text = text.replace("kyb@gamma.example", "new@gamma.example")
    path.write_text(text, encoding="utf-8")
    git(repo, "commit", "-q", "-am", "merged, not applied")
    server = start_sandbox(
        server_with(
            inv_beta={"name": "Bêta Société S.A."},
            inv_gamma={"email": "platform@gamma.example"},
        )
    )
    summary = tmp_path / "summary.md"
    result = run_cli(
        "adopt", "--changed-since", applied, "--summary", str(summary),
        cwd=repo, env=sandbox_env(server),
    )  # fmt: skip
    assert result.returncode == 1, result.stderr  # the conflict needs a decision
    out = result.stdout.splitlines()
    assert out[0] == 'invites/emea.yaml:15: inv_beta name: "Bêta Société SA" -> "Bêta Société S.A."'
    assert out[1] == (
        f"invites/emea.yaml:5: inv_acme name: not applied yet: changed in git since {applied} "
        '(on the platform: "Acme Holdings Ltd", in the files: "Acme Renamed plc")'
    )
    assert out[2].startswith("invites/emea.yaml:22: inv_gamma email: conflict")
    assert '"kyb@gamma.example"' in out[2] and '"platform@gamma.example"' in out[2]
    # Only the drift was written into the files.
    assert diff_lines(repo) == [
        "-    name: 'Bêta Société SA'",
        "+    name: 'Bêta Société S.A.'",
    ]
    body = summary.read_text(encoding="utf-8")
    adopted, rest = body.split("### Pending apply (1)")
    pending, conflicts = rest.split("### Conflicts (1)")
    assert "### Adopted from the platform (1)" in adopted and "inv&#95;beta" in adopted
    assert "inv&#95;acme" in pending and "Acme Renamed plc" in pending
    assert "inv&#95;gamma" in conflicts and "platform&#64;gamma.example" in conflicts
    assert "inv&#95;acme" not in adopted + conflicts


def test_changed_since_with_nothing_but_pending_changes_adopts_nothing(
    repo: Path, start_sandbox: Callable[..., Sandbox]
) -> None:
    applied = git(repo, "rev-parse", "HEAD")
    path = repo / "invites" / "emea.yaml"
    path.write_text(path.read_text(encoding="utf-8").replace("Gamma GmbH", "Gamma AG"), "utf-8")
    git(repo, "commit", "-q", "-am", "merged, not applied")
    server = start_sandbox(server_with())
    result = run_cli("adopt", "--changed-since", applied, cwd=repo, env=sandbox_env(server))
    assert result.returncode == 0, result.stderr
    assert "not applied yet" in result.stdout
    assert diff_lines(repo) == []
    # Without the ref, the same run would put the platform's old name back.
    assert run_cli("adopt", cwd=repo, env=sandbox_env(server)).returncode == 0
    assert diff_lines(repo) == ["-    name: Gamma AG", "+    name: Gamma GmbH"]


def test_a_value_no_file_can_hold_is_left_out_and_the_rest_of_the_file_adopted(
    repo: Path, start_sandbox: Callable[..., Sandbox], tmp_path: Path
) -> None:
    # Row 10 of issue 51: one no-break space on the platform made adopt refuse the whole
    # file, and the drift job proposed nothing at all.
    server = start_sandbox(
        server_with(
            inv_acme={"email": "onboarding@acme.example"},
            inv_beta={"name": "Bêta\u00a0Société SA", "email": "kyb@beta.example"},
            inv_gamma={"name": "Gamma AG"},
        )
    )
    summary = tmp_path / "summary.md"
    result = run_cli("adopt", "--summary", str(summary), cwd=repo, env=sandbox_env(server))
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr
    # Both other invites' edits, and beta's other field, are written; beta's name is not.
    assert diff_lines(repo) == [
        "-    email: compliance@acme.example",
        "+    email: onboarding@acme.example",
        "-    email: ops@beta.example",
        "+    email: kyb@beta.example",
        "-    name: Gamma GmbH",
        "+    name: Gamma AG",
    ]
    said = [line for line in result.stderr.splitlines() if "inv_beta name" in line]
    assert len(said) == 1, result.stderr
    assert said[0].startswith('invites/emea.yaml:15: inv_beta name: not edited to "Bêta\\xa0')
    assert "U+00A0 NO-BREAK SPACE" in said[0]
    assert "error: 1 value could not be adopted" in result.stderr
    body = summary.read_text(encoding="utf-8")
    assert "### Adopted from the platform (3)" in body
    left_out = body.split("### Not adopted (1)", 1)[1]
    assert "inv&#95;beta" in left_out and "U+00A0 NO-BREAK SPACE" in left_out
    # The file is still valid: a plan reads it.
    plan = run_cli("plan", cwd=repo, env=sandbox_env(server))
    assert "Plan: 1 to update, 2 unchanged, 0 errors." in plan.stdout, plan.stdout + plan.stderr
