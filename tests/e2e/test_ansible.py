"""End to end: the kyb.invites collection run by the real `ansible-playbook` against a
sandbox (or a hostile server) on 127.0.0.1 (issue 41). What the server received is the
assertion: PATCHes and re-sends are counted there, never read from a log line.

Without ansible-core (the `ansible` extra) these tests skip, except under CI=true.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from support.ansible import (
    Played,
    ansible_env,
    patches,
    play_text,
    playbook,
    require_ansible,
    resends,
)
from support.helpers import EXAMPLES, RECONCILE, clean_env, sandbox_env
from support.hostile_server import CLIENT_ID, HostileServer, Hostility
from support.invites import ACME, desired_entry, write_invites

from reconciler.sandbox import Sandbox

pytestmark = [pytest.mark.e2e, pytest.mark.real]

SECRET = "s3cr3t/DO+NOT&LEAK=xyz"  # changes when form-encoded
JWT = re.compile(r"eyJ[\w-]+\.[\w-]+\.[\w-]+")


@pytest.fixture(autouse=True)
def _ansible_installed() -> None:
    require_ansible()


Play = Callable[..., Played]


@pytest.fixture
def play(tmp_path: Path) -> Iterator[Play]:
    """Run ansible-playbook in tmp_path/play, as an operator would, against ``env``'s API."""
    folder = tmp_path / "play"
    folder.mkdir()

    def run(text: str, *args: str, env: dict[str, str]) -> Played:
        (folder / "play.yml").write_text(text, encoding="utf-8")
        local = ("-i", "localhost,", "-c", "local", "play.yml")
        return playbook(folder, *local, *args, env=ansible_env(env, tmp_path))

    yield run


def examples_in(tmp_path: Path) -> Path:
    folder = tmp_path / "play" / "invites"
    folder.mkdir(parents=True)
    for file in EXAMPLES.glob("*.yaml"):
        (folder / file.name).write_text(file.read_text(encoding="utf-8"), encoding="utf-8")
    return folder


# -- Done when (1): changed, then ok, and check mode after the apply is ok ----------


def test_a_run_changes_a_second_is_ok_with_no_write_and_check_mode_then_is_ok(
    sandbox: Sandbox, play: Play, tmp_path: Path
) -> None:
    examples_in(tmp_path)
    env = sandbox_env(sandbox)
    first = play(play_text("src: invites/"), env=env)
    assert first.code == 0, first.output
    assert first.recap(changed=1, failed=0)
    assert first.result["changed"] is True
    assert sorted(first.result["updated"]) == sorted(first.result["planned"])
    assert patches(sandbox) == 3
    second = play(play_text("src: invites/"), env=env)
    assert second.code == 0, second.output
    assert second.recap(changed=0, failed=0)
    assert second.result["changed"] is False and second.result["updated"] == []
    assert patches(sandbox) == 3  # zero new PATCHes
    checked = play(play_text("src: invites/"), "--check", "--diff", env=env)
    assert checked.code == 0 and checked.recap(changed=0, failed=0), checked.output
    assert checked.result["planned"] == [] and "--- before" not in checked.stdout
    assert patches(sandbox) == 3


# -- Done when (2): check mode is the plan, and writes nothing ----------------------


def test_check_mode_with_diff_writes_nothing_and_plans_what_reconcile_plan_plans(
    sandbox: Sandbox, play: Play, tmp_path: Path
) -> None:
    folder = examples_in(tmp_path)
    env = sandbox_env(sandbox)
    checked = play(play_text("src: invites/"), "--check", "--diff", env=env)
    assert checked.code == 0, checked.output
    assert patches(sandbox) == 0 and resends(sandbox) == 0
    plan = subprocess.run(
        [*RECONCILE, "plan", "--format", "json", str(folder)],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    expected = json.loads(plan.stdout)
    result = checked.result
    assert result["changed"] is True  # in check mode: it would change
    assert result["planned"] == [change["id"] for change in expected["changes"]]
    assert result["summary"]["resend"] == expected["summary"]["resend"] == 1
    assert result["resend_planned"] == [c["id"] for c in expected["changes"] if c["resend"]]
    assert result["updated"] == [] and result["resent"] == []
    # The diff: the plan's before and after per invite, headed with the re-send label.
    assert "+++ after: inv_8f2k1 (invites/emea.yaml:4): e-mails the invitation again to " in (
        checked.stdout
    )
    assert '-email: "onboarding@acme.example"\n+email: "compliance@acme.example"' in (
        checked.stdout
    )
    assert checked.stdout.count("--- before: ") == len(expected["changes"])


# -- Done when (3): neither the secret nor a token, anywhere --------------------------


def test_a_server_echoing_the_secret_and_its_token_leaks_neither_with_vvv_diff_check(
    play: Play, tmp_path: Path
) -> None:
    server_state = [dict(ACME, primaryContact={"name": "Jane Doe", "email": "j@acme.example"})]
    acme = desired_entry(ACME, email="new@acme.example", resendOnChange=True)
    acme["primaryContact"] = {"name": "Jane Doe", "email": "jane@acme.example"}
    folder = tmp_path / "play" / "invites"
    write_invites(folder, [acme], "acme.yaml")
    write_invites(folder, [{"id": "inv_unknown", "name": "Not On The Platform Ltd"}], "x.yaml")
    hostility = Hostility(echo_secrets=True)
    with HostileServer(server_state, hostility, secret=SECRET) as server:
        env = clean_env(RECONCILER_BASE_URL=server.url, RECONCILER_CLIENT_ID=CLIENT_ID)
        env["HOSTILE_SECRET"] = SECRET  # given to the task as an option: a no-log value
        secret_option = "client_secret: \"{{ lookup('env', 'HOSTILE_SECRET') }}\""
        runs = [
            # the diff shown: the server's name, and a contact sub-field it keeps, redacted
            ("kyb.invites.invites", "src: invites/acme.yaml", '"Acme Holdings Ltd [redacted]'),
            # a 404 quoting both, as the task's failure message
            ("kyb.invites.invites", "src: invites/", "not found (asked by [redacted] with"),
            # what export would write leaves such a value out, saying why
            ("kyb.invites.invite_info", "ids: [inv_acme]", "holds the client secret or an"),
        ]
        for module, option, shown in runs:
            text = play_text(f"{option}\n{secret_option}", module=module)
            played = play(text, "-vvv", "--diff", "--check", env=env)
            assert server.tokens, played.output  # the server did issue tokens...
            leaked = [t for t in server.tokens if t.lower() in played.output.lower()]
            assert not leaked  # ...and none of them shows
            for form in (SECRET, "s3cr3t%2FDO%2BNOT%26LEAK%3Dxyz", "s3cr3t/DO+NOT&amp;LEAK"):
                assert form.lower() not in played.output.lower()
            assert not JWT.search(played.output)
            assert shown in played.output  # the server's words were there, kept out
        assert server.calls("PATCH") == [] and not server.resends


# -- Done when (4): the re-send ---------------------------------------------------------


def test_one_resend_in_the_real_run_none_in_check_mode_none_in_a_second_run(
    start_sandbox: Callable[..., Sandbox], play: Play, tmp_path: Path
) -> None:
    server = start_sandbox([ACME])
    env = sandbox_env(server)
    write_invites(
        tmp_path / "play" / "invites",
        [desired_entry(ACME, email="new@acme.example", resendOnChange=["email"])],
    )
    checked = play(play_text("src: invites/"), "--check", env=env)
    assert checked.code == 0, checked.output
    assert "[WARNING]: check mode: a real run e-mails 1 invitation again: inv_acme" in (
        checked.output
    )
    assert checked.result["resend_planned"] == ["inv_acme"] and checked.result["resent"] == []
    assert resends(server) == 0 and patches(server) == 0
    limited = play(play_text("src: invites/\nmax_resends: 0"), "--check", env=env)
    assert limited.result["failed"] is True and limited.result["changed"] is False
    assert "more than max_resends (0)" in limited.result["msg"]
    assert resends(server) == 0 and patches(server) == 0
    applied = play(play_text("src: invites/"), env=env)
    assert applied.code == 0 and applied.recap(changed=1), applied.output
    assert applied.result["resent"] == ["inv_acme"] and resends(server) == 1
    again = play(play_text("src: invites/"), env=env)
    assert again.recap(changed=0, failed=0) and again.result["resent"] == []
    assert resends(server) == 1 and patches(server) == 1


@pytest.mark.parametrize(
    ("hostility", "listed", "sent", "says"),
    [
        # the e-mail went, the answer did not: never retried, never advised again
        (Hostility(resend_gateway_status=504), "resend_unknown", 1, "never re-run to retry"),
        # the platform said no: certainly not sent, `reconcile resend` makes it
        (Hostility(envelope_failure=("RESEND",)), "resend_not_made", 0, "reconcile resend ID"),
    ],
)
def test_a_resend_not_made_or_unknown_fails_the_task_as_changed_with_the_id(
    play: Play, tmp_path: Path, hostility: Hostility, listed: str, sent: int, says: str
) -> None:
    write_invites(
        tmp_path / "play" / "invites",
        [desired_entry(ACME, email="new@acme.example", resendOnChange=True)],
    )
    with HostileServer([ACME], hostility, secret=SECRET) as server:
        env = sandbox_env(server)
        played = play(play_text("src: invites/"), env=env)
        assert server.resends["inv_acme"] == sent
        assert len(server.calls("PATCH")) == 1
    result = played.result
    assert result["failed"] is True and result["changed"] is True
    assert result["updated"] == ["inv_acme"] and result[listed] == ["inv_acme"]
    assert result["resent"] == [] and says in result["msg"]
    if listed == "resend_not_made":  # the platform's reason, as for a failed update
        assert "inv_acme (inv_acme: HTTP 200: the envelope says success: false" in result["msg"]


def test_a_platform_storing_otherwise_fails_the_task_diverged_with_no_resend(
    play: Play, tmp_path: Path
) -> None:
    """The platform lower-cases e-mails: written, changed, but not as the files say, and
    the re-send a changed e-mail asks for is withheld (the address it would name is not
    the one in the files)."""
    write_invites(
        tmp_path / "play" / "invites",
        [desired_entry(ACME, email="Compliance@Acme.example", resendOnChange=["email"])],
    )

    def lower(sent: dict[str, Any]) -> dict[str, Any]:
        return {k: v.lower() if k == "email" else v for k, v in sent.items()}

    with HostileServer([ACME], Hostility(patch_store=lower), secret=SECRET) as server:
        env = sandbox_env(server)
        played = play(play_text("src: invites/"), env=env)
        assert server.resends["inv_acme"] == 0
        assert len(server.calls("PATCH")) == 1
    result = played.result
    assert result["failed"] is True and result["changed"] is True
    assert result["diverged"] == ["inv_acme"] and result["resent"] == []
    assert "reconcile adopt --target ID" in result["msg"]


# -- refusals, entries in the task, hostile files ---------------------------------------


def test_rate_limit_refusals_are_waited_out_and_do_not_fail_the_task(
    start_sandbox: Callable[..., Sandbox], play: Play, tmp_path: Path
) -> None:
    state = [dict(ACME, id=f"inv_{i}", email=f"old{i}@acme.example") for i in range(40)]
    server = start_sandbox(state, rate_limit=20)
    entries = [desired_entry(i, email=f"new{n}@acme.example") for n, i in enumerate(state)]
    write_invites(tmp_path / "play" / "invites", entries)
    played = play(play_text("src: invites/\nparallelism: 16"), env=sandbox_env(server))
    assert played.code == 0 and played.recap(changed=1, failed=0), played.output
    assert server.stats.statuses[429] > 0  # the server did refuse...
    # ...and all landed, each once (a PATCH refused with 429 and sent again is two calls)
    landed = [r for r in server.stats.calls("PATCH") if r.status == 200]
    assert len(played.result["updated"]) == 40 and len(landed) == 40
    assert [server.store.get(f"inv_{i}")["email"] for i in range(40)] == [
        f"new{i}@acme.example" for i in range(40)
    ]


def test_entries_written_in_the_task_get_every_check_and_name_the_entry(
    sandbox: Sandbox, play: Play
) -> None:
    options = """\
        invites:
          - id: inv_8f2k1
            email: compliance@acme.example
          - id: inv_7c2d4
            phone: +442079460000
            emial: x@example.com
    """
    played = play(play_text(options), "--check", env=sandbox_env(sandbox))
    assert played.result["failed"] is True
    assert played.result["msg"].splitlines() == [
        "invites[1]: `phone` must be text, but YAML reads 442079460000 as a number; "
        'put it in quotes: "442079460000"',
        "invites[1]: unknown field `emial`; did you mean `email`?",
    ]
    assert sandbox.stats.total == 0  # nothing talked to the API


def test_hostile_src_files_are_refused_at_their_place_before_any_request(
    sandbox: Sandbox, play: Play, tmp_path: Path
) -> None:
    folder = tmp_path / "play" / "invites"
    folder.mkdir(parents=True)
    # A billion laughs: 10^9 "lol"s from ten lines, through an `x-` template key.
    laughs = ["x-laughs:", "  l0: &l0 [" + ", ".join(["lol"] * 10) + "]"]
    laughs += [f"  l{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * 10) + "]" for i in range(1, 9)]
    laughs += ["invites:", "  - id: inv_8f2k1", "    groups: *l8"]
    (folder / "a-laughs.yaml").write_text("\n".join(laughs) + "\n", encoding="utf-8")
    (folder / "b-bytes.yaml").write_bytes(b"invites:\n  - id: inv_7c2d4\n    name: Caf\xe9\n")
    deep = "invites:\n  - id: inv_2b6n3\n    name: " + "[" * 200 + "]" * 200 + "\n"
    (folder / "c-deep.yaml").write_text(deep, encoding="utf-8")
    outside = tmp_path / "secret.yaml"
    outside.write_text("invites: []\n", encoding="utf-8")
    (folder / "d-link.yaml").symlink_to(outside)
    os.mkfifo(folder / "e-fifo.yaml")
    played = play(play_text("src: invites/"), "--check", env=sandbox_env(sandbox))
    assert played.result["failed"] is True, played.output
    message = played.result["msg"]
    assert "d-link.yaml: not read: it leads to" in message
    assert re.search(r"invites/b-bytes\.yaml:3:\d+: ", message)
    # In a directory as named: refused (never opened), not passed over without a word.
    assert "invites/e-fifo.yaml: not read: it is a FIFO" in message
    assert sandbox.stats.total == 0
    # Each file alone: the YAML ones are refused at their place by the module.
    for name, expected in (
        ("a-laughs.yaml", ":6:47: aliases expand to more than"),
        ("c-deep.yaml", ":3:108: nested too deeply (limit 100)"),
        ("e-fifo.yaml", ": not read: it is a FIFO"),
    ):
        text = play_text(f"src: invites/{name}")
        alone = play(text, "--check", env=sandbox_env(sandbox))
        assert alone.result["failed"] is True, alone.output
        assert f"invites/{name}{expected}" in alone.result["msg"]
    assert sandbox.stats.total == 0


def test_a_read_only_grant_fails_the_task_before_any_write(play: Play) -> None:
    # As `reconcile apply` does: the module applied with a read-only grant, each PATCH
    # refused 403 by the platform, where it must refuse before its first write.
    from support.authlib_server import CLIENT_ID as AUTHLIB_CLIENT
    from support.authlib_server import READ, WRITE, AuthlibPolicy, AuthlibServer
    from support.authlib_server import SECRET as AUTHLIB_SECRET

    invite = {"id": "inv_acme", "status": "pending", "name": "Acme Old Ltd"}
    policy = AuthlibPolicy(invites={"inv_acme": invite}, allowed=(READ,))
    with AuthlibServer(policy) as server:
        env = clean_env(
            RECONCILER_BASE_URL=server.url,
            RECONCILER_CLIENT_ID=AUTHLIB_CLIENT,
            RECONCILER_CLIENT_SECRET=AUTHLIB_SECRET,
            RECONCILER_TOKEN_AUTH_METHOD="client_secret_basic",
        )
        entries = "invites:\n  - id: inv_acme\n    name: Acme Holdings Ltd"
        played = play(play_text(entries), env=env)
    assert played.recap(failed=0, ignored=1), played.output
    assert played.result["failed"] is True
    assert f"without {WRITE}, which writing needs" in played.result["msg"]
    assert played.result["planned"] == ["inv_acme"] and played.result["changed"] is False
    assert server.requests("PATCH") == []
