"""E-mails to businesses: each one meant, labelled, counted, limited, and never sent twice.

A re-send is the one thing the tool does that cannot be undone. These runs use the
real CLI against a sandbox (or a hostile server) on 127.0.0.1 and count what the
server received: how many e-mails went out is the assertion, not a log line.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from support.cli import run_cli, run_cli_process, run_shell
from support.helpers import clean_env, sandbox_env
from support.hostile_server import HostileServer, Hostility
from support.invites import ACME, desired_entry, write_invites
from support.local_http import envelope
from support.nginx import Gateway, Nginx

from reconciler.sandbox import Sandbox

pytestmark = pytest.mark.e2e

LIST_FORM = ["email", "primaryContact"]


def invites(count: int) -> list[dict[str, Any]]:
    return [dict(ACME, id=f"inv_{i}", email=f"old{i}@acme.example") for i in range(count)]


def audit_outcomes(path: Path) -> list[tuple[str, str, str]]:
    """(operation, invite id, outcome) of each outcome line; a torn line is skipped."""
    records = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            records.append(json.loads(line))
        except ValueError:
            continue
    return [
        (r["operation"], r["invite_id"], r["outcome"]) for r in records if r["record"] == "outcome"
    ]


# -- resendOnChange's list form ---------------------------------------------------


def test_the_list_form_re_sends_for_an_email_change_and_not_for_groups(
    start_sandbox: Callable[..., Sandbox], tmp_path: Path
) -> None:
    server = start_sandbox([ACME])
    env = sandbox_env(server)
    folder = tmp_path / "invites"
    # An internal change: the business hears nothing of it.
    write_invites(folder, [desired_entry(ACME, groups=["emea"], resendOnChange=LIST_FORM)])
    plan = run_cli("plan", cwd=tmp_path, env=env)
    assert plan.returncode == 0, plan.stderr
    assert "e-mails the invitation" not in plan.stdout
    assert "Plan: 1 to update, 0 unchanged, 0 errors." in plan.stdout
    applied = run_cli("apply", "--auto-approve", cwd=tmp_path, env=env)
    assert applied.returncode == 0, applied.stderr
    assert "re-sent" not in applied.stdout
    assert sum(server.store.resends.values()) == 0

    # The address corrected: one e-mail, to the new address, said before it is sent.
    entry = desired_entry(ACME, groups=["emea"], email="new@acme.example")
    write_invites(folder, [dict(entry, resendOnChange=LIST_FORM)])
    plan = run_cli("plan", cwd=tmp_path, env=env)
    assert "e-mails the invitation again to new@acme.example" in plan.stdout
    assert "Plan: 1 to update (1 invitation e-mailed again), 0 unchanged" in plan.stdout
    applied = run_cli("apply", "--auto-approve", cwd=tmp_path, env=env)
    assert applied.returncode == 0, applied.stderr
    assert "re-sent      inv_acme" in applied.stdout
    assert server.store.resends["inv_acme"] == 1


def test_validate_refuses_a_field_the_list_form_does_not_know(write_yaml) -> None:
    path = write_yaml("invites/a.yaml", "invites:\n  - id: inv_1\n    resendOnChange: [emial]\n")
    result = run_cli("validate", str(path))
    assert result.returncode == 1
    assert (
        "a.yaml:3:22: an item of `resendOnChange`: 'emial' is not a field of an invite; "
        "did you mean `email`?" in result.stderr
    )


# -- --max-resends ------------------------------------------------------------------


def test_max_resends_fails_the_plan_and_apply_writes_nothing(
    start_sandbox: Callable[..., Sandbox], tmp_path: Path
) -> None:
    state = invites(3)
    server = start_sandbox(state)
    entries = [desired_entry(s, email=f"new{i}@acme.example") for i, s in enumerate(state)]
    entries = [dict(e, resendOnChange=LIST_FORM) for e in entries]
    entries[2] = dict(entries[2], resendOnChange=False)  # a change that e-mails nobody
    write_invites(tmp_path / "invites", entries)
    env = sandbox_env(server)

    plan = run_cli("plan", "--max-resends", "1", cwd=tmp_path, env=env)
    assert plan.returncode == 1
    assert "Plan: 3 to update (2 invitations e-mailed again)" in plan.stdout
    reason = "the plan e-mails 2 invitations again, more than max_resends (1)"
    assert f"error: apply will refuse this plan: {reason}" in plan.stderr

    applied = run_cli(
        "apply", "--auto-approve", cwd=tmp_path, env=dict(env, **{"RECONCILER_MAX_RESENDS": "1"})
    )
    assert applied.returncode == 1
    assert f"refusing to apply, nothing was changed: {reason}" in applied.stderr
    assert server.stats.calls("PATCH") == [] and sum(server.store.resends.values()) == 0

    # Within the limit (field changes do not count): the two e-mails go out.
    applied = run_cli("apply", "--auto-approve", "--max-resends", "2", cwd=tmp_path, env=env)
    assert applied.returncode == 0, applied.stderr
    assert sum(server.store.resends.values()) == 2


# -- a re-send whose outcome cannot be known ----------------------------------------

HOSTILE_SECRET = "hostile-secret"
UNKNOWN_ADVICE = "re-send unknown: check with the platform or the invitee before sending again"


def hostile_env(server: HostileServer, **extra: str) -> dict[str, str]:
    return sandbox_env(server, RECONCILER_MAX_RESPONSE_BYTES="65536", **extra)


GATEWAYS = {
    "nginx 504 after the platform sent it": Hostility(resend_gateway_status=504),
    "a gateway's 502 HTML page": Hostility(resend_gateway_status=502),
    "a 200 over max_response_bytes": Hostility(resend_huge_body=1024 * 1024),
}


@pytest.mark.parametrize("hostility", GATEWAYS.values(), ids=GATEWAYS.keys())
def test_a_re_send_the_platform_may_have_made_is_unknown_never_failed(
    tmp_path: Path, hostility: Hostility
) -> None:
    entry = desired_entry(ACME, email="new@acme.example", resendOnChange=LIST_FORM)
    write_invites(tmp_path / "invites", [entry])
    with HostileServer([ACME], hostility, secret=HOSTILE_SECRET) as server:
        env = hostile_env(server)
        args = ("apply", "--auto-approve", "--audit-log", "audit.jsonl", "invites")
        applied = run_cli(*args, cwd=tmp_path, env=env)
        assert server.resends["inv_acme"] == 1  # the e-mail went out, once: never retried

        by_hand = run_cli(
            "resend", "inv_acme", "--auto-approve", "--audit-log", "manual.jsonl",
            cwd=tmp_path, env=env,
        )  # fmt: skip
        assert server.resends["inv_acme"] == 2

    assert applied.returncode == 1
    out = applied.stdout + applied.stderr
    assert "re-send unknown  inv_acme: " in applied.stdout
    assert "check with the platform or the invitee before sending again" in applied.stdout
    assert applied.stderr.splitlines()[-1].endswith(UNKNOWN_ADVICE)
    assert "1 invitation with unknown re-send outcome" in applied.stdout
    # Nothing says it failed, nothing advises sending it again.
    assert "reconcile resend" not in out and "not re-sent" not in out
    assert "try again" not in out and "Traceback" not in out
    assert audit_outcomes(tmp_path / "audit.jsonl") == [
        ("update", "inv_acme", "ok"),
        ("resend", "inv_acme", "unknown"),
    ]

    assert by_hand.returncode == 1
    assert "re-send unknown  inv_acme: " in by_hand.stdout
    assert "Resend: 0 re-sent, 0 failed, 1 unknown." in by_hand.stdout
    assert by_hand.stderr.splitlines()[-1].endswith(UNKNOWN_ADVICE)
    assert "reconcile resend" not in by_hand.stdout + by_hand.stderr
    assert audit_outcomes(tmp_path / "manual.jsonl") == [("resend", "inv_acme", "unknown")]


# -- re-running a saved plan ------------------------------------------------------------


def saved_plan(start_sandbox: Callable[..., Sandbox], tmp_path: Path) -> tuple[Sandbox, dict]:
    """A sandbox and a saved plan of three changes, two of which e-mail the business."""
    state = invites(3)
    server = start_sandbox(state)
    entries = [desired_entry(s, email=f"new{i}@acme.example") for i, s in enumerate(state)]
    entries[0]["resendOnChange"] = entries[1]["resendOnChange"] = LIST_FORM
    write_invites(tmp_path / "invites", entries)
    env = sandbox_env(server)
    planned = run_cli("plan", "--out", "plan.json", cwd=tmp_path, env=env)
    assert planned.returncode == 0, planned.stderr
    return server, env


def test_re_running_a_successful_apply_of_a_saved_plan_sends_nothing(
    start_sandbox: Callable[..., Sandbox], tmp_path: Path
) -> None:
    server, env = saved_plan(start_sandbox, tmp_path)
    first = run_cli("apply", "--plan", "plan.json", cwd=tmp_path, env=env)
    assert first.returncode == 0, first.stderr
    assert sum(server.store.resends.values()) == 2

    again = run_cli("apply", "--plan", "plan.json", cwd=tmp_path, env=env)  # a CI job re-run
    assert again.returncode == 0, again.stderr
    assert len(server.stats.calls("PATCH")) == 3 and sum(server.store.resends.values()) == 2
    assert "already applied  inv_0  (invites/invites.yaml:" in again.stdout
    assert "nothing sent, its invitation not e-mailed again" in again.stdout
    assert "Apply: 0 updated, 0 failed, 3 already applied." in again.stdout
    assert "refusing" not in again.stderr


def test_re_running_a_partly_failed_apply_finishes_it_and_a_mixed_change_is_stale(
    start_sandbox: Callable[..., Sandbox], tmp_path: Path
) -> None:
    server, env = saved_plan(start_sandbox, tmp_path)
    # The first run made inv_0 (and its e-mail) only: inv_1 and inv_2 still hold `before`.
    store = server.store
    store.put(dict(store.get("inv_0"), email="new0@acme.example"))
    store.resends["inv_0"] += 1
    finished = run_cli("apply", "--plan", "plan.json", cwd=tmp_path, env=env)
    assert finished.returncode == 0, finished.stderr
    assert "already applied  inv_0" in finished.stdout
    assert "Apply: 2 updated, 0 failed, 1 already applied." in finished.stdout, finished.stdout
    assert sorted(p.path.rsplit("/", 1)[-1] for p in server.stats.calls("PATCH")) == [
        "inv_1",
        "inv_2",
    ]
    assert dict(store.resends) == {"inv_0": 1, "inv_1": 1}

    # A change whose invite holds neither `before` nor `after`: the whole plan is refused.
    server2, env2 = saved_plan(start_sandbox, tmp_path / "again")
    server2.store.put(dict(server2.store.get("inv_0"), email="somebody@else.example"))
    server2.store.put(dict(server2.store.get("inv_1"), email="new1@acme.example"))
    refused = run_cli("apply", "--plan", "plan.json", cwd=tmp_path / "again", env=env2)
    assert refused.returncode == 1
    assert "refusing the whole plan, nothing was changed" in refused.stderr
    assert "inv_0 (invites/invites.yaml:" in refused.stderr
    assert '`email` was "old0@acme.example" when planned, is now "somebody@else.example"' in (
        refused.stderr
    )
    assert server2.stats.calls("PATCH") == [] and sum(server2.store.resends.values()) == 0


# -- nothing done goes unreported --------------------------------------------------------


@pytest.mark.parametrize("redirect", [">&-", ">/dev/full"], ids=["closed", "full device"])
@pytest.mark.parametrize("command", ["apply --auto-approve invites", "resend --auto-approve inv_0"])
def test_with_stdout_closed_or_full_nothing_is_written_and_the_run_fails(
    start_sandbox: Callable[..., Sandbox], tmp_path: Path, redirect: str, command: str
) -> None:
    if redirect == ">/dev/full" and not Path("/dev/full").exists():
        pytest.skip("no /dev/full here")
    state = invites(2)
    server = start_sandbox(state)
    entries = [desired_entry(s, email=f"new{i}@acme.example") for i, s in enumerate(state)]
    write_invites(tmp_path / "invites", [dict(e, resendOnChange=LIST_FORM) for e in entries])
    result = run_shell(f"reconcile {command} {redirect}", tmp_path, sandbox_env(server))
    assert result.returncode == 1
    # Nobody would have heard of them: no write is made, and stderr says why.
    assert server.stats.calls("PATCH") == [] and sum(server.store.resends.values()) == 0
    last = result.stderr.splitlines()[-1]
    assert last.startswith("error: cannot write the output: ")
    assert "Traceback" not in result.stderr


def mount_tmpfs(directory: Path, size: str) -> None:
    """A small tmpfs at ``directory``, or the test is skipped saying why it cannot be."""
    mount = shutil.which("mount")
    if mount is None or os.geteuid() != 0:
        pytest.skip("a full disk needs a small tmpfs: mounting one needs root and mount(8)")
    directory.mkdir()
    done = subprocess.run(
        [mount, "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(directory)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({done.stderr.strip() or done.returncode})")


def fill(directory: Path) -> None:
    """Take every free page of the file system at ``directory``."""
    with (directory / "filler").open("wb", buffering=0) as filler:
        try:
            while True:
                filler.write(b"\0" * 4096)
        except OSError as exc:
            assert exc.errno == errno.ENOSPC


def test_a_disk_full_between_attempt_and_outcome_still_reports_the_write_and_the_owed_e_mail(
    start_sandbox: Callable[..., Sandbox], tmp_path: Path
) -> None:
    disk = tmp_path / "disk"
    mount_tmpfs(disk, "64k")
    try:
        state = invites(2)
        entries = [desired_entry(s, email=f"new{i}@acme.example") for i, s in enumerate(state)]
        write_invites(tmp_path / "invites", [dict(e, resendOnChange=LIST_FORM) for e in entries])
        args = ("apply", "--auto-approve", "--parallelism", "1", "--audit-log")

        # A run on a roomy disk measures the first update's two lines.
        rehearsal = start_sandbox(invites(2))
        done = run_cli(*args, "rehearsal.jsonl", "invites", cwd=tmp_path,
                       env=sandbox_env(rehearsal))  # fmt: skip
        assert done.returncode == 0, done.stderr
        attempt, outcome = (tmp_path / "rehearsal.jsonl").read_bytes().splitlines(True)[:2]

        # The log's last page has room for the attempt line and half the outcome line;
        # the disk has no other page free.
        room = len(attempt) + len(outcome) // 2
        earlier = b'{"record": "note", "from": "an earlier run"}\n'
        log = disk / "audit.jsonl"
        log.write_bytes(earlier + b" " * (4096 - room - len(earlier) - 1) + b"\n")
        fill(disk)

        server = start_sandbox(state)
        result = run_cli(*args, str(log), "invites", cwd=tmp_path,
                         env=sandbox_env(server))  # fmt: skip
    finally:
        subprocess.run(["umount", str(disk)], check=False)

    # The server has the first PATCH; the log could not say so. The output does.
    assert [p.path.rsplit("/", 1)[-1] for p in server.stats.calls("PATCH")] == ["inv_0"]
    assert sum(server.store.resends.values()) == 0  # no e-mail without its attempt line
    out = result.stdout
    assert "updated      inv_0  (invites/invites.yaml:" in out
    assert (
        "re-send owed  inv_0: due after the update and never attempted "
        "(not sent: the audit log could not be written" in out
    )
    assert "not started  inv_1" in out
    assert "Stopped: the audit log could not be written; no new writes were started." in out
    assert "Apply: 1 updated, 0 failed, 1 not started, 1 re-send owed." in out
    assert "Not re-sent although updated: inv_0. Send it with: reconcile resend inv_0" in out
    assert result.returncode == 1
    last = result.stderr.splitlines()[-1]
    assert (
        last.startswith("error: ")
        and "cannot write the audit log (No space left on device)" in last
    )
    assert "Traceback" not in result.stderr


def test_a_2xx_whose_success_is_not_a_boolean_leaves_the_re_send_unknown(tmp_path: Path) -> None:
    # `"success": "true"` is not the platform saying it failed: nobody can check it.
    entry = desired_entry(ACME, email="new@acme.example", resendOnChange=LIST_FORM)
    write_invites(tmp_path / "invites", [entry])
    with HostileServer([ACME], Hostility(), secret=HOSTILE_SECRET) as server:
        answer = server.invite

        def odd_success(method: str, invite_id: str, body: Any, auth: str) -> tuple[int, bytes]:
            if method == "RESEND":
                server.resends[invite_id] += 1
                return 200, json.dumps({"status": 200, "success": "true"}).encode()
            return answer(method, invite_id, body, auth)

        server.invite = odd_success  # type: ignore[method-assign]
        args = ("apply", "--auto-approve", "--audit-log", "audit.jsonl", "invites")
        applied = run_cli(*args, cwd=tmp_path, env=hostile_env(server))
    assert server.resends["inv_acme"] == 1
    assert "re-send unknown  inv_acme: HTTP 200: the envelope says success" in applied.stdout
    assert "reconcile resend" not in applied.stdout + applied.stderr
    assert audit_outcomes(tmp_path / "audit.jsonl")[-1] == ("resend", "inv_acme", "unknown")


@pytest.mark.real
def test_a_real_nginx_504_on_a_re_send_the_platform_made_is_unknown(
    tmp_path: Path,
    start_sandbox: Callable[..., Sandbox],
    start_nginx: Callable[..., Nginx],
) -> None:
    # nginx gives the platform 1 s for a re-send; the platform takes 1.5 s, then sends
    # the e-mail all the same. The tool must not call that a failure, nor advise again.
    sandbox = start_sandbox([ACME], latency=1.5)
    nginx = start_nginx(sandbox, Gateway(resend_read_timeout=1))
    entry = desired_entry(ACME, email="new@acme.example", resendOnChange=LIST_FORM)
    write_invites(tmp_path / "invites", [entry])
    env = clean_env(**nginx.client_env(sandbox))
    args = ("apply", "--auto-approve", "--audit-log", "audit.jsonl", "invites")
    applied = run_cli_process(*args, cwd=tmp_path, env=env)
    time.sleep(0.8)  # the platform finishes the re-send nginx stopped waiting for
    assert sandbox.store.snapshot()["inv_acme"].get("lastSentAt")  # the e-mail went out
    resends = [r for r in sandbox.stats.calls("POST") if r.path.endswith("/resend")]
    assert len(resends) == 1  # once: never retried

    out = applied.stdout + applied.stderr
    assert applied.returncode == 1, out
    assert "re-send unknown  inv_acme: HTTP 504" in applied.stdout, out
    assert applied.stderr.splitlines()[-1].endswith(UNKNOWN_ADVICE)
    assert "reconcile resend" not in out and "not re-sent" not in out
    assert "0 failed, 1 invitation with unknown re-send outcome" in applied.stdout
    assert audit_outcomes(tmp_path / "audit.jsonl") == [
        ("update", "inv_acme", "ok"),
        ("resend", "inv_acme", "unknown"),
    ]


def test_a_refusal_with_the_apis_requestid_is_not_blamed_on_a_proxy(tmp_path: Path) -> None:
    # A 500 in the platform's envelope (requestId and all): certainly not sent, and the
    # advice is support with the requestId. It was "check the network path to the API
    # (proxy, gateway)", the advice for an answer with no requestId, as the error line
    # was made without the one the message quoted.
    refusal = envelope(500, None, "internal error")
    hostility = Hostility(resend_raw=[(500, {}, refusal, False)])
    with HostileServer([ACME], hostility, secret=HOSTILE_SECRET) as server:
        result = run_cli(
            "resend", "inv_acme", "--auto-approve", cwd=tmp_path, env=hostile_env(server)
        )
    assert result.returncode == 1
    last = result.stderr.splitlines()[-1]
    assert last.startswith("error: inv_acme: HTTP 500: internal error (requestId ")
    assert last.endswith("contact support with the requestId"), last
