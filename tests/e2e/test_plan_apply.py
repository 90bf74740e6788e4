"""plan and apply end to end: the installed CLI against the sandbox over HTTP."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from support.cli import run_cli
from support.helpers import EXAMPLES, REPO, clean_env, sandbox_env
from support.invites import ACME, desired_entry, write_invites
from support.terminal import run_at_terminal

COLOUR = re.compile(r"\x1b\[[0-9;]*m")  # SGR sequences; the progress bar also hides the cursor


def test_quick_start_plans_the_examples_against_the_bundled_sandbox():
    result = run_cli("plan", "--sandbox", "examples/invites", cwd=REPO)
    assert result.returncode == 0, result.stderr
    assert (
        "Plan: 3 to update (1 invitation e-mailed again), 7 unchanged, 0 errors." in result.stdout
    )
    assert "e-mails the invitation again to compliance@acme.example" in result.stdout
    assert "Traceback" not in result.stderr


def test_no_op_plan_and_apply_send_no_patch(start_sandbox, tmp_path):
    server = start_sandbox([ACME])
    # Reordered set items are no change.
    entry = desired_entry(ACME, groups=["enterprise", "emea"])
    write_invites(tmp_path / "invites", [entry])
    env = sandbox_env(server)
    plan = run_cli("plan", "--detailed-exitcode", cwd=tmp_path, env=env)
    assert plan.returncode == 0, plan.stderr
    assert "No changes." in plan.stdout
    assert "Plan: 0 to update, 1 unchanged, 0 errors." in plan.stdout
    apply = run_cli("apply", "--auto-approve", cwd=tmp_path, env=env)
    assert apply.returncode == 0, apply.stderr
    assert server.stats.calls("PATCH") == []


@pytest.mark.parametrize(
    ("change", "shown"),
    [
        ({"email": "new@acme.example"}, 'email: "old@acme.example" -> "new@acme.example"'),
        # A set: the items added and removed shown, the whole set sent.
        ({"groups": ["emea", "vip"]}, 'groups: + "vip", - "enterprise"'),
    ],
    ids=["email", "groups"],
)
def test_one_field_change_sends_exactly_that_field(start_sandbox, tmp_path, change, shown):
    server = start_sandbox([ACME])
    write_invites(tmp_path / "invites", [desired_entry(ACME, **change)])
    env = sandbox_env(server)
    plan = run_cli("plan", "--detailed-exitcode", cwd=tmp_path, env=env)
    assert plan.returncode == 2
    assert shown in plan.stdout
    assert "Plan: 1 to update, 0 unchanged, 0 errors." in plan.stdout
    apply = run_cli("apply", "--auto-approve", cwd=tmp_path, env=env)
    assert apply.returncode == 0, apply.stderr
    assert "Apply: 1 updated, 0 failed." in apply.stdout
    assert [p.body for p in server.stats.calls("PATCH")] == [change]
    stored = server.store.get("inv_acme")
    assert {name: stored[name] for name in change} == change


def test_unmanaged_fields_are_never_compared_or_sent(start_sandbox, tmp_path):
    server = start_sandbox([ACME])
    # Only id, email and a partial contact are managed; the contact's phone is not.
    entry = {
        "id": "inv_acme",
        "email": "new@acme.example",
        "primaryContact": {"name": "Janet Doe", "email": "jane@acme.example"},
    }
    write_invites(tmp_path / "invites", [entry])
    result = run_cli("apply", "--auto-approve", cwd=tmp_path, env=sandbox_env(server))
    assert result.returncode == 0, result.stderr
    (patch,) = server.stats.calls("PATCH")
    assert set(patch.body) == {"email", "primaryContact"}
    # The object is sent whole, keeping the server's unmanaged sub-field.
    assert patch.body["primaryContact"] == {
        "name": "Janet Doe",
        "email": "jane@acme.example",
        "phone": "+442079460001",
    }
    after = server.store.get("inv_acme")
    for field in ("name", "phone", "groups", "addOns", "attachments"):
        assert after[field] == ACME[field]


def test_unknown_invites_fail_by_id_accepted_ones_are_set_apart_and_the_rest_applied(
    start_sandbox, tmp_path
):
    accepted = dict(ACME, id="inv_done", status="accepted")
    other = dict(ACME, id="inv_other")
    server = start_sandbox([ACME, accepted, other])
    entries = [
        desired_entry(ACME, email="a@acme.example"),
        {"id": "inv_gone", "name": "Nobody Ltd"},
        desired_entry(accepted, email="b@acme.example"),
        desired_entry(other, email="c@acme.example"),
    ]
    write_invites(tmp_path / "invites", entries)
    env = sandbox_env(server)

    plan = run_cli("plan", "--detailed-exitcode", cwd=tmp_path, env=env)
    assert plan.returncode == 1  # the unknown invite; the accepted one is not a failure
    assert "inv_gone" in plan.stdout and "HTTP 404" in plan.stdout
    assert "not found" in plan.stdout and "requestId" in plan.stdout
    assert "No longer updatable: accepted\n\n! inv_done" in plan.stdout
    assert "accepted, not pending" in plan.stdout
    assert 'email: "old@acme.example" -> "b@acme.example"' in plan.stdout
    assert "Plan: 2 to update, 0 unchanged, 1 error, 1 no longer updatable." in plan.stdout

    apply = run_cli("apply", "--auto-approve", cwd=tmp_path, env=env)
    assert apply.returncode == 1
    assert "Apply: 2 updated, 0 failed." in apply.stdout
    patched = {p.path.rsplit("/", 1)[-1] for p in server.stats.calls("PATCH")}
    assert patched == {"inv_acme", "inv_other"}  # never a PATCH for the accepted invite
    assert server.store.get("inv_other")["email"] == "c@acme.example"
    assert server.store.get("inv_done")["email"] == ACME["email"]


def test_second_plan_after_apply_is_clean_and_unicode_survives(start_sandbox, tmp_path):
    names = ["Müller & Söhne GmbH", "株式会社サクラ商事", "서울 핀테크 주식회사", "Ørsted Vind ApS"]
    state = [dict(ACME, id=f"inv_{i}", name="Placeholder") for i in range(len(names))]
    server = start_sandbox(state)
    entries = [desired_entry(s, name=n) for s, n in zip(state, names, strict=True)]
    write_invites(tmp_path / "invites", entries)
    env = sandbox_env(server)
    apply = run_cli("apply", "--auto-approve", cwd=tmp_path, env=env)
    assert apply.returncode == 0, apply.stderr
    assert [server.store.get(f"inv_{i}")["name"] for i in range(len(names))] == names
    again = run_cli("plan", "--detailed-exitcode", cwd=tmp_path, env=env)
    assert again.returncode == 0, again.stdout
    assert "No changes." in again.stdout


def test_resend_on_change_re_sends_once_after_a_successful_update_only(start_sandbox, tmp_path):
    same = dict(ACME, id="inv_same")
    server = start_sandbox([ACME, same])
    entries = [
        desired_entry(ACME, email="new@acme.example", resendOnChange=True),
        desired_entry(same, resendOnChange=True),
    ]
    write_invites(tmp_path / "invites", entries)
    apply = run_cli("apply", "--auto-approve", cwd=tmp_path, env=sandbox_env(server))
    assert apply.returncode == 0, apply.stderr
    assert "re-sent" in apply.stdout
    assert dict(server.store.resends) == {"inv_acme": 1}
    # resendOnChange is the reconciler's option: never sent to the API.
    assert all("resendOnChange" not in (p.body or {}) for p in server.stats.calls("PATCH"))


def test_target_restricts_the_run(start_sandbox, tmp_path):
    other = dict(ACME, id="inv_other")
    server = start_sandbox([ACME, other])
    entries = [desired_entry(ACME, email="a@x.example"), desired_entry(other, email="b@x.example")]
    write_invites(tmp_path / "invites", entries)
    env = sandbox_env(server)
    result = run_cli("apply", "--auto-approve", "--target", "inv_other", cwd=tmp_path, env=env)
    assert result.returncode == 0, result.stderr
    assert [p.path.rsplit("/", 1)[-1] for p in server.stats.calls("PATCH")] == ["inv_other"]
    # Read to plan, then again right before its PATCH.
    gets = [g.path.rsplit("/", 1)[-1] for g in server.stats.calls("GET")]
    assert gets == ["inv_other", "inv_other"]
    unknown = run_cli("plan", "--target", "inv_nope", cwd=tmp_path, env=env)
    assert unknown.returncode == 1
    assert "inv_nope" in unknown.stderr


def _run_on_terminal(
    args: list[str], cwd: Path, env: dict[str, str], answer: str
) -> tuple[int, str]:
    seen = run_at_terminal(args, cwd, env, answer)
    return seen.code, seen.terminal


def test_apply_asks_on_a_terminal_and_only_yes_applies(start_sandbox, tmp_path):
    server = start_sandbox([ACME])
    write_invites(tmp_path / "invites", [desired_entry(ACME, email="new@acme.example")])
    env = sandbox_env(server, NO_COLOR="1")
    code, output = _run_on_terminal(["apply"], tmp_path, env, "n")
    assert "Apply these changes? [y/N]" in output
    assert code == 1
    assert server.stats.calls("PATCH") == []
    code, output = _run_on_terminal(["apply"], tmp_path, env, "y")
    assert code == 0, output
    assert "Apply: 1 updated, 0 failed." in output
    assert not COLOUR.search(output)  # NO_COLOR
    assert len(server.stats.calls("PATCH")) == 1


def test_colour_only_on_a_terminal(start_sandbox, tmp_path):
    server = start_sandbox([ACME])
    write_invites(tmp_path / "invites", [desired_entry(ACME, email="new@acme.example")])
    piped = run_cli("plan", cwd=tmp_path, env=sandbox_env(server))  # stdout not a terminal
    assert piped.returncode == 0 and not COLOUR.search(piped.stdout)
    code, output = _run_on_terminal(["plan"], tmp_path, sandbox_env(server), "")
    assert code == 0
    assert COLOUR.search(output)


def test_missing_credentials_and_usage_errors_exit_1_without_traceback(tmp_path):
    write_invites(tmp_path / "invites", [{"id": "inv_a", "name": "A"}])
    missing = run_cli("plan", cwd=tmp_path, env=clean_env())
    assert missing.returncode == 1
    assert "RECONCILER_BASE_URL" in missing.stderr and "--sandbox" in missing.stderr
    usage = run_cli("plan", "--no-such-option", cwd=tmp_path)
    assert usage.returncode == 1
    bad_format = run_cli("plan", "--format", "xml", cwd=tmp_path)
    assert bad_format.returncode == 1
    for result in (missing, usage, bad_format):
        assert "Traceback" not in result.stderr


def test_invalid_files_stop_the_run_before_any_request(start_sandbox, tmp_path):
    server = start_sandbox([ACME])
    (tmp_path / "invites").mkdir()
    (tmp_path / "invites" / "a.yaml").write_text(
        "invites:\n  - id: inv_acme\n    phone: +442079460000\n", encoding="utf-8"
    )
    result = run_cli("apply", "--auto-approve", cwd=tmp_path, env=sandbox_env(server))
    assert result.returncode == 1
    assert "invites/a.yaml:3:12:" in result.stderr
    assert "quotes" in result.stderr
    assert server.stats.total == 0


def test_sandbox_runs_speak_the_contract_whatever_the_config_renames(tmp_path):
    # A team's reconciler.yaml for its real deployment must not break --sandbox.
    (tmp_path / "reconciler.yaml").write_text(
        "field_names: {phone: phoneNumber}\nscope: custom:scope\nget_invite_path: /v9/{inviteId}\n",
        encoding="utf-8",
    )
    result = run_cli(
        "apply", "--sandbox", "--auto-approve", str(EXAMPLES), cwd=tmp_path, env=clean_env()
    )
    assert result.returncode == 0, result.stderr
    assert "Apply: 3 updated, 0 failed." in result.stdout


def test_a_plan_saved_against_the_in_process_sandbox_says_which_sandbox_can_apply_it(tmp_path):
    # `apply --plan` with --sandbox starts another sandbox on another port, which the plan
    # (made against this run's) is refused for: the way that works is said instead.
    result = run_cli(
        "plan", "--sandbox", "--out", "p.json", str(EXAMPLES), cwd=tmp_path, env=clean_env()
    )
    assert result.returncode == 0, result.stderr
    assert _last_line(result.stderr) == (
        "Saved the plan to p.json; the in-process sandbox ends with this run, so no apply can "
        "use it. A saved plan needs a sandbox that outlives the run: start `reconcile "
        "sandbox` in another terminal, export the three lines it prints (RECONCILER_BASE_URL "
        "and its client), then plan --out and apply --plan without --sandbox"
    )
    assert "reconcile apply --plan" not in result.stderr


# From test_new_user_review.py: What a new user's review found: errors last on stderr, local checks
# before the network.
def _last_line(text: str) -> str:
    return text.rstrip("\n").splitlines()[-1]


def test_plan_ends_stderr_with_an_error_per_invite_not_found(start_sandbox, tmp_path):
    server = start_sandbox([ACME])
    ghost = desired_entry(ACME, id="inv_ghost", email="ghost@acme.example")
    write_invites(tmp_path / "invites", [desired_entry(ACME), ghost])
    result = run_cli("plan", cwd=tmp_path, env=sandbox_env(server))
    assert result.returncode == 1
    assert "inv_ghost" in result.stdout  # the plan itself is unchanged
    last = _last_line(result.stderr)
    assert last.startswith("error: inv_ghost: HTTP 404")
    assert "requestId" in last
    assert "check the id; reconcile only manages invites that already exist" in last
    assert "(it never creates, deletes or revokes one): create the invite on the platform" in last
    assert "or remove the entry at invites/invites.yaml:" in last
    assert "which only stops managing it" in last


def test_removing_an_entry_stops_managing_the_invite_and_deletes_nothing(start_sandbox, tmp_path):
    # What the 404 advice and the README promise: no entry, no request; the invite stays.
    other = dict(ACME, id="inv_other")
    server = start_sandbox([ACME, other])
    write_invites(tmp_path / "invites", [desired_entry(ACME)])  # inv_other's entry removed
    apply = run_cli("apply", "--auto-approve", cwd=tmp_path, env=sandbox_env(server))
    assert apply.returncode == 0, apply.stderr
    assert server.stats.calls("GET", "/public-api/v1/kyb/invites/inv_other") == []
    assert server.stats.calls("PATCH") == [] and server.stats.calls("DELETE") == []
    assert server.store.get("inv_other")["status"] == "pending"


def test_plan_bounds_the_error_lines(start_sandbox, tmp_path):
    server = start_sandbox([ACME])
    ghosts = [desired_entry(ACME, id=f"inv_ghost_{n:02}") for n in range(13)]
    write_invites(tmp_path / "invites", ghosts)
    result = run_cli("plan", cwd=tmp_path, env=sandbox_env(server))
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 11
    assert _last_line(result.stderr) == "error: and 3 more failed invites (listed above)"


def test_apply_and_resend_end_stderr_with_the_failures(start_sandbox, tmp_path):
    server = start_sandbox([ACME])
    ghost = desired_entry(ACME, id="inv_ghost")
    write_invites(tmp_path / "invites", [desired_entry(ACME, email="new@acme.example"), ghost])
    env = sandbox_env(server)
    apply = run_cli("apply", "--auto-approve", cwd=tmp_path, env=env)
    assert apply.returncode == 1
    assert "Apply: 1 updated, 0 failed." in apply.stdout
    assert _last_line(apply.stderr).startswith("error: inv_ghost: HTTP 404")
    # Every invite is read before the first e-mail: one that cannot be sent refuses them all.
    resend = run_cli("resend", "--auto-approve", "inv_acme", "inv_ghost", cwd=tmp_path, env=env)
    assert resend.returncode == 1
    last_two = resend.stderr.splitlines()[-2:]
    assert last_two[0] == "error: refusing to re-send, nothing was sent:"
    assert last_two[1].startswith("  inv_ghost: HTTP 404: invite inv_ghost not found")
    assert sum(server.store.resends.values()) == 0


EMPTY = "an empty file name (is a variable unset?)"
NO_DIRECTORY = "No such file or directory (no directory"
BAD_ID = "not a valid invite id (1 to 128 letters"


@pytest.mark.parametrize(
    ("args", "said"),
    [
        # `apply --plan "$PLAN"` with PLAN unset must not apply the files instead.
        (("plan", "--out", ""), EMPTY),
        (("apply", "--auto-approve", "--plan", ""), EMPTY),
        (("apply", "--auto-approve", "--audit-log", ""), EMPTY),
        (("plan", "--config", ""), EMPTY),
        (("validate", "--codequality", ""), EMPTY),
        (("show", ""), EMPTY),
        (("export", "inv_acme", "--out", ""), EMPTY),
        # An output that cannot be written, named.
        (("apply", "--auto-approve", "--audit-log", "nowhere/dir/a.jsonl"), NO_DIRECTORY),
        (("plan", "--out", "nowhere/p.json"), NO_DIRECTORY),
        # An id no invite can have.
        (("export", "inv_acme", "../etc"), BAD_ID),
        (("resend", "--auto-approve", "inv acme"), BAD_ID),
        (("plan", "--target", ".."), BAD_ID),
        (("plan", "--exclude", "inv_acme\n"), BAD_ID),
    ],
)
def test_a_command_line_that_cannot_be_honoured_is_refused_before_any_request(
    start_sandbox, tmp_path, args, said
):
    server = start_sandbox([ACME])
    write_invites(tmp_path / "invites", [desired_entry(ACME, email="new@acme.example")])
    result = run_cli(*args, cwd=tmp_path, env=sandbox_env(server))
    assert result.returncode == 1
    assert said in result.stderr
    if said == NO_DIRECTORY:
        assert "nowhere" in _last_line(result.stderr)
    assert server.stats.total == 0
    assert "Plan:" not in result.stdout


def test_the_not_updatable_advice_works(start_sandbox, tmp_path):
    server = start_sandbox([{**ACME, "status": "accepted"}])
    write_invites(tmp_path / "invites", [desired_entry(ACME, email="new@acme.example")])
    env = sandbox_env(server)
    plan = run_cli("plan", cwd=tmp_path, env=env)
    assert "bring the file in line with `reconcile export inv_acme`" in plan.stdout
    exported = run_cli("export", "inv_acme", cwd=tmp_path, env=env)
    assert exported.returncode == 0, exported.stderr
    assert "email: old@acme.example" in exported.stdout
    assert "note: inv_acme is already defined at invites/invites.yaml:" in exported.stderr
    assert "with this" in exported.stderr
    (tmp_path / "invites" / "invites.yaml").write_text(exported.stdout, encoding="utf-8")
    replanned = run_cli("plan", "--detailed-exitcode", cwd=tmp_path, env=env)
    assert replanned.returncode == 0, replanned.stdout
    assert "No changes." in replanned.stdout


def test_export_to_a_file_still_refuses_an_id_defined_in_git(start_sandbox, tmp_path):
    server = start_sandbox([ACME])
    write_invites(tmp_path / "invites", [desired_entry(ACME)])
    result = run_cli(
        "export", "inv_acme", "--out", "more.yaml", cwd=tmp_path, env=sandbox_env(server)
    )
    assert result.returncode == 1
    assert (
        "already defined in your invite files: inv_acme (at invites/invites.yaml:" in result.stderr
    )
    assert not (tmp_path / "more.yaml").exists()


def test_a_saved_plans_limit_is_named_when_it_refuses(start_sandbox, tmp_path):
    beta = {**ACME, "id": "inv_beta", "name": "Beta GmbH"}
    server = start_sandbox([ACME, beta])
    entries = [desired_entry(i, email="new@x.example") for i in (ACME, beta)]
    write_invites(tmp_path / "invites", entries)
    env = sandbox_env(server)
    plan = run_cli("plan", "--max-changes", "1", "--out", "p.json", cwd=tmp_path, env=env)
    assert plan.returncode == 1
    assert "Split the change or raise the limit" in plan.stderr  # the run's own limit
    apply = run_cli("apply", "--plan", "p.json", "--max-changes", "5", cwd=tmp_path, env=env)
    assert apply.returncode == 1
    assert _last_line(apply.stderr).endswith(
        "more than max_changes (1). This plan was made with --max-changes 1; "
        "make a new plan with a higher limit."
    )
    assert server.stats.calls("PATCH") == []
