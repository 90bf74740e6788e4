"""End to end: a gateway that refuses answers, not requests (issue 55, the attack's HIGH 1
and 2). The real CLI, an in-process sandbox that counts the e-mails it sends, and a small
proxy in front of it (``support.answer_phase_proxy``) that forwards a write, lets the
platform carry it out, then answers its own 403.

A 403 that is not the platform's is a block only when a read sent right after it is
refused too; here the read gets through, so the write may have been carried out: a
re-send is never made again (one e-mail), its outcome `re-send unknown`, never "failed";
a PATCH is read back, found written, and its re-send made once.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from support.answer_phase_proxy import AnswerPhaseProxy
from support.cli import run_cli
from support.helpers import audit_outcomes, clean_env, sandbox_env
from support.invites import ACME, desired_entry, write_invites

from reconciler.sandbox import Sandbox

pytestmark = pytest.mark.e2e

LIST_FORM = ["email", "primaryContact"]
IDS = ("inv_0", "inv_1", "inv_2")


def _estate(start_sandbox: Callable[..., Sandbox], tmp_path: Path) -> Sandbox:
    state = [
        dict(ACME, id=i, name=f"Acme {n} Ltd", email=f"old{n}@acme.example")
        for n, i in enumerate(IDS)
    ]
    server = start_sandbox(state)
    entries = [
        desired_entry(s, email=f"new{n}@acme.example", resendOnChange=LIST_FORM)
        for n, s in enumerate(state)
    ]
    write_invites(tmp_path / "invites", entries)
    return server


@pytest.mark.parametrize("body", ["html", "empty", "json"])
def test_a_re_send_answered_with_a_403_after_the_platform_sent_it_is_unknown_sent_once(
    start_sandbox: Callable[..., Sandbox], tmp_path: Path, body: str
) -> None:
    server = _estate(start_sandbox, tmp_path)
    with AnswerPhaseProxy(server.url, {"POST resend"}, body) as proxy:
        env = clean_env(**{**server.client_env(), "RECONCILER_BASE_URL": proxy.url})
        args = ("apply", "--auto-approve", "--audit-log", "audit.jsonl", "invites")
        applied = run_cli(*args, cwd=tmp_path, env=env)

    assert dict(server.store.resends) == dict.fromkeys(IDS, 1)  # each e-mail once
    assert len(proxy.refused) == 3
    out = applied.stdout + applied.stderr
    assert applied.returncode == 1, out
    for invite_id in IDS:
        assert f"re-send unknown  {invite_id}: " in applied.stdout
    assert "check with the platform or the invitee before sending again" in applied.stdout
    assert "3 invitations with unknown re-send outcome" in applied.stdout
    # Nothing says it failed, nothing advises sending it again.
    assert "reconcile resend" not in out and "not re-sent" not in out and "failed  " not in out
    assert "Traceback" not in out
    assert sorted(audit_outcomes(tmp_path / "audit.jsonl")) == sorted(
        [("update", i, "ok") for i in IDS] + [("resend", i, "unknown") for i in IDS]
    )


def test_a_patch_answered_with_a_403_after_the_platform_wrote_it_is_read_back_and_re_sent(
    start_sandbox: Callable[..., Sandbox], tmp_path: Path
) -> None:
    server = _estate(start_sandbox, tmp_path)
    with AnswerPhaseProxy(server.url, {"PATCH"}) as proxy:
        env = clean_env(**{**server.client_env(), "RECONCILER_BASE_URL": proxy.url})
        args = ("apply", "--auto-approve", "--audit-log", "audit.jsonl", "invites")
        applied = run_cli(*args, cwd=tmp_path, env=env)

    out = applied.stdout + applied.stderr
    assert applied.returncode == 0, out
    assert len(proxy.refused) == 3  # each PATCH once: never sent again on the 403's word
    assert dict(server.store.resends) == dict.fromkeys(IDS, 1)  # the e-mail to the new address
    for n, invite_id in enumerate(IDS):
        assert server.store.get(invite_id)["email"] == f"new{n}@acme.example"
        assert f"updated      {invite_id}  " in applied.stdout
    assert "Apply: 3 updated, 0 failed." in applied.stdout
    assert "failed  " not in out and "not sent" not in out and "Traceback" not in out
    assert sorted(audit_outcomes(tmp_path / "audit.jsonl")) == sorted(
        [("update", i, "ok") for i in IDS] + [("resend", i, "ok") for i in IDS]
    )

    again = run_cli("plan", "--detailed-exitcode", "invites", cwd=tmp_path, env=sandbox_env(server))
    assert again.returncode == 0, again.stdout + again.stderr  # nothing left to do
