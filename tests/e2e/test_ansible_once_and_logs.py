"""End to end (issue 54, items 1-4): the kyb.invites collection run by the real
`ansible-playbook` against the sandbox (or a hostile server) on 127.0.0.1, as an Ansible
user writes plays: several hosts and forks, TLS and timeout options, job logs at -vvv,
and failures in Ansible's words. What the server received is the assertion: PATCHes and
re-sends are counted there.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from support.ansible import (
    ANSIBLE_BIN,
    Played,
    ansible_env,
    patches,
    play_text,
    playbook,
    require_ansible,
    resends,
)
from support.helpers import clean_env, sandbox_env
from support.hostile_server import HostileServer, Hostility
from support.invites import ACME, desired_entry, write_invites
from support.tls import Certificates, make_certificates, wrap_server_socket

from reconciler.sandbox import SANDBOX_CLIENT_ID, SANDBOX_CLIENT_SECRET, Sandbox

pytestmark = [pytest.mark.e2e, pytest.mark.real]

SECRET = "s3cr3t/DO+NOT&LEAK=xyz"
HOSTS = [f"web{n}" for n in range(5)]


@pytest.fixture(autouse=True)
def _ansible_installed() -> None:
    require_ansible()


Play = Callable[..., Played]


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    made = tmp_path / "play"
    made.mkdir()
    inventory = "[web]\n" + "".join(
        f"{host} ansible_connection=local ansible_python_interpreter={sys.executable}\n"
        for host in HOSTS
    )
    (made / "hosts.ini").write_text(inventory, encoding="utf-8")
    return made


@pytest.fixture
def play(folder: Path, tmp_path: Path) -> Iterator[Play]:
    """ansible-playbook in ``folder``, with an inventory of 5 local hosts and 5 forks."""

    def run(text: str, *args: str, env: dict[str, str], name: str = "play.yml") -> Played:
        (folder / name).write_text(text, encoding="utf-8")
        hosts = ("-i", "hosts.ini", "-i", "localhost,", "-c", "local", name)
        return playbook(folder, *hosts, *args, env=ansible_env(env, tmp_path, ANSIBLE_FORKS="5"))

    yield run


def acme_entry(n: int) -> dict[str, Any]:
    return desired_entry(ACME, email=f"new{n}@acme.example", resendOnChange=["email"])


# -- 1. exactly once across hosts ---------------------------------------------------------


def test_five_hosts_five_forks_refused_without_run_once_and_once_with_it(
    start_sandbox: Callable[..., Sandbox], play: Play, folder: Path
) -> None:
    server = start_sandbox([ACME])
    env = sandbox_env(server)
    for trial in range(3):  # each trial a change whose update e-mails the invitation again
        write_invites(folder / "invites", [acme_entry(trial)])
        refused = play(play_text("src: invites/", hosts="web"), env=env)
        assert refused.result["failed"] is True, refused.output
        assert refused.result["msg"].startswith(
            "kyb.invites.invites would run for 5 hosts of this play (web0, web1, web2, web3, "
            "web4), each sending the same writes to the platform"
        )
        assert (
            "set run_once: true on the task, or run it in a play of hosts: localhost"
            in (refused.result["msg"])
        )
        assert patches(server) == trial and resends(server) == trial  # nothing sent
        once = play(play_text("src: invites/", hosts="web", keywords="run_once: true"), env=env)
        assert once.code == 0, once.output
        assert once.result["resent"] == ["inv_acme"]
        assert patches(server) == trial + 1 and resends(server) == trial + 1
        assert server.store.get("inv_acme")["email"] == f"new{trial}@acme.example"
    # strategy: free runs even a run_once task for every host (Ansible warns, and runs it)
    write_invites(folder / "invites", [acme_entry(9)])
    free = play_text("src: invites/", hosts="web", keywords="run_once: true")
    free = free.replace("  gather_facts: false\n", "  gather_facts: false\n  strategy: free\n", 1)
    refused = play(free, env=env)
    assert (
        "the play's strategy, free, runs even a run_once task for every host"
        in (refused.result["msg"])
    ), refused.output
    assert patches(server) == 3 and resends(server) == 3


def test_concurrent_runs_on_one_controller_take_turns_and_e_mail_once(
    start_sandbox: Callable[..., Sandbox], folder: Path, tmp_path: Path
) -> None:
    """Five playbooks at once (as five plays of host groups each with its run_once, or
    five jobs), each of a localhost play: the controller's lock makes them apply one after
    another, and the ones after the first find nothing to do."""
    # 40 ms an answer: a run's plan and writes take long enough for the others to overlap.
    server = start_sandbox([ACME], latency=0.04)
    env = ansible_env(sandbox_env(server), tmp_path, ANSIBLE_FORKS="5")
    for trial in range(3):
        write_invites(folder / "invites", [acme_entry(trial)])
        (folder / "once.yml").write_text(play_text("src: invites/", keep=False))
        runs = [
            subprocess.Popen(
                [
                    str(ANSIBLE_BIN / "ansible-playbook"),
                    *("-i", "localhost,", "-c", "local"),
                    "once.yml",
                ],
                cwd=folder,
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            )
            for _ in range(5)
        ]
        outputs = [run.communicate(timeout=240)[0] for run in runs]
        assert all(run.returncode == 0 for run in runs), outputs
        assert all("failed=0" in o and "ignored=0" in o for o in outputs), outputs
        changed = [o for o in outputs if "changed=1" in o]
        assert len(changed) == 1, outputs  # the others planned after it: nothing to do
        assert patches(server) == trial + 1, outputs
        assert resends(server) == trial + 1, outputs


# -- 2. the options Ansible users look for --------------------------------------------------


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed")
    return make_certificates(tmp_path_factory.mktemp("tls"))


def test_ca_path_validate_certs_and_timeout_as_options(
    play: Play, folder: Path, certs: Certificates
) -> None:
    write_invites(folder / "invites", [desired_entry(ACME, email="new@acme.example")])
    hostile = HostileServer([ACME], secret=SECRET)
    hostile.use_tls(lambda sock: wrap_server_socket(sock, certs))
    with hostile as server:
        env = sandbox_env(server)
        untrusted = play(play_text("src: invites/"), "--check", env=env)
        assert untrusted.result["failed"] is True
        assert "for a private CA, set ca_path to its certificate" in untrusted.result["msg"]
        assert "REQUESTS_CA_BUNDLE" not in untrusted.result["msg"]
        trusted = play(play_text(f"src: invites/\nca_path: {certs.ca}\ntimeout: 20"), env=env)
        assert trusted.code == 0 and trusted.result["updated"] == ["inv_acme"], trusted.output
        missing = play(play_text("src: invites/\nca_path: /no/such/ca.pem"), "--check", env=env)
        assert missing.result["msg"] == "ca_path names /no/such/ca.pem, which does not exist"
        # Unchecked: on loopback, allowed with a warning that says so.
        loopback = play(play_text("src: invites/\nvalidate_certs: false"), "--check", env=env)
        assert loopback.code == 0, loopback.output
        assert "[WARNING]: validate_certs is false: the certificate of 127.0.0.1 is not" in (
            loopback.output
        )
        assert "InsecureRequestWarning" not in loopback.output
        calls = len(server.seen)
        remote = play(
            play_text("src: invites/\nvalidate_certs: false\nbase_url: https://kyb.example.com"),
            "--check",
            env=env,
        )
        assert remote.result["msg"].startswith(
            "validate_certs is false for kyb.example.com, which is not a loopback host"
        )
        slow = play(play_text("src: invites/\ntimeout: 0"), "--check", env=env)
        assert slow.result["msg"] == "timeout: '0.0' must be more than 0 and at most 3600"
        assert len(server.seen) == calls  # neither refusal sent a request
        assert len(server.calls("PATCH")) == 1


def test_state_present_is_accepted_and_any_other_refused_before_any_request(
    sandbox: Sandbox, play: Play
) -> None:
    entries = "invites:\n  - id: inv_8f2k1\n    email: compliance@acme.example"
    absent = play(play_text(f"state: absent\n{entries}"), env=sandbox_env(sandbox))
    assert absent.result["failed"] is True
    assert absent.result["msg"].startswith(
        "state=absent is not supported: present is the only state"
    )
    assert sandbox.stats.total == 0
    present = play(play_text(f"state: present\n{entries}"), "--check", env=sandbox_env(sandbox))
    assert present.code == 0 and present.result["planned"] == ["inv_8f2k1"], present.output


def test_ansible_doc_names_every_variable_a_setting_falls_back_to(tmp_path: Path) -> None:
    shown = subprocess.run(
        [str(ANSIBLE_BIN / "ansible-doc"), "kyb.invites.invites"],
        env=ansible_env(clean_env(), tmp_path, ANSIBLE_FORKS="5"),
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
    for variable in (
        "RECONCILER_BASE_URL",
        "RECONCILER_CLIENT_ID",
        "RECONCILER_CLIENT_SECRET",
        "RECONCILER_TOKEN_AUTH_METHOD",
        "RECONCILER_TIMEOUT",
        "RECONCILER_MAX_CHANGES",
        "RECONCILER_MAX_RESENDS",
        "RECONCILER_PARALLELISM",
        "RECONCILER_MAX_RATE",
        "RECONCILER_AUDIT_LOG",
        "REQUESTS_CA_BUNDLE",
    ):
        assert variable in shown, variable
    for option in ("ca_path", "validate_certs", "timeout", "state"):
        assert f"- {option}" in shown or f"{option}:" in shown, option
    assert "run_once: true" in " ".join(shown.split())


# -- 3. no personal data or secret in job logs by default ----------------------------------


INLINE = """\
invites:
  - id: inv_acme
    email: compliance@acme.example
    primaryContact:
      name: Janet Q Public
      email: janet.public@acme.example
"""
PERSONAL = ("compliance@acme.example", "janet.public@acme.example", "Janet Q Public")


def test_vvv_with_diff_false_shows_no_entrys_value_and_the_echo_names_fields_only(
    start_sandbox: Callable[..., Sandbox], play: Play
) -> None:
    server = start_sandbox([ACME])
    env = sandbox_env(server)
    played = play(play_text(INLINE, keywords="diff: false"), "-vvv", env=env)
    assert played.code == 0 and played.result["updated"] == ["inv_acme"], played.output
    for value in PERSONAL:
        assert value not in played.output, value
    # The echo of the arguments (-v): each entry's id and field names, no value.
    assert '"invocation": {' in played.stdout
    echo = played.stdout.split('"invocation": {', 1)[1]
    assert '"email": "[not logged]"' in echo and '"primaryContact": "[not logged]"' in echo
    assert '"id": "inv_acme"' in echo
    # With --diff (the task's diff not false), the diff shows the values: as documented.
    write = INLINE.replace("compliance@", "kyc@")
    shown = play(play_text(write), "--diff", "--check", env=env)
    assert "kyc@acme.example" in shown.stdout
    assert "--- before: inv_acme (invites[0])" in shown.stdout
    # no_log: true hides the result and the echo altogether.
    hidden = play(play_text(write, keywords="no_log: true"), "-vvv", "--diff", env=env)
    assert "kyc@acme.example" not in hidden.output and "inv_acme" not in hidden.stdout
    assert "censored" in hidden.stdout
    assert hidden.result["updated"] == ["inv_acme"]  # the registered result keeps it all


def test_a_secret_in_the_environment_keyword_is_warned_of_and_the_option_is_never_shown(
    start_sandbox: Callable[..., Sandbox], play: Play
) -> None:
    server = start_sandbox([ACME])
    env = clean_env(RECONCILER_BASE_URL=server.url, RECONCILER_CLIENT_ID=SANDBOX_CLIENT_ID)
    env["VAULTED"] = SANDBOX_CLIENT_SECRET  # as a vault variable would give it
    option = play(
        play_text(INLINE + "client_secret: \"{{ lookup('env', 'VAULTED') }}\""),
        "-vvv",
        "--check",
        env=env,
    )
    assert option.code == 0, option.output
    assert SANDBOX_CLIENT_SECRET not in option.output
    keyword = f"environment:\n  RECONCILER_CLIENT_SECRET: {SANDBOX_CLIENT_SECRET}"
    warned = play(play_text(INLINE, keywords=keyword), "-vvv", "--check", env=env)
    assert warned.code == 0, warned.output
    assert (
        "[WARNING]: RECONCILER_CLIENT_SECRET is set with the task's environment keyword, "
        "whose values -vvv shows in the EXEC line"
    ) in " ".join(warned.output.split())
    # Why: Ansible puts the keyword's values in the command it runs, which -vvv shows.
    assert f"EXEC /bin/sh -c 'RECONCILER_CLIENT_SECRET={SANDBOX_CLIENT_SECRET} " in warned.output


# -- 4. messages in Ansible's words ---------------------------------------------------------


def test_a_failed_update_says_its_reason_in_msg(play: Play, folder: Path) -> None:
    write_invites(folder / "invites", [desired_entry(ACME, email="new@acme.example")])
    with HostileServer([ACME], Hostility(envelope_failure=("PATCH",)), secret=SECRET) as server:
        env = sandbox_env(server)
        played = play(play_text("src: invites/"), env=env)
    result = played.result
    assert result["failed"] is True, played.output
    assert result["msg"].startswith("not updated: inv_acme (inv_acme: "), result["msg"]
    assert result["msg"].split("(inv_acme: ", 1)[1].startswith(result["errors"][0]["message"])
    # status, the server's message, requestId: as the CLI says them
    assert (
        "HTTP 200: the envelope says success: false (request could not be processed)"
        in (result["msg"])
    )
    assert "(requestId " in result["msg"]


def test_missing_settings_and_src_are_named_in_the_tasks_words(
    sandbox: Sandbox, play: Play, folder: Path
) -> None:
    env = clean_env(RECONCILER_BASE_URL=sandbox.url, RECONCILER_CLIENT_ID=SANDBOX_CLIENT_ID)
    missing = play(play_text(INLINE), env=env)
    assert missing.result["msg"].startswith("missing client_secret: set it on the task")
    assert "RECONCILER_" not in missing.result["msg"] and "--sandbox" not in missing.result["msg"]
    no_src = play(play_text("src: nowhere/"), env=sandbox_env(sandbox))
    message = no_src.result["msg"]
    assert message.startswith("src: nowhere/ was not found on the controller"), message
    assert "remote_src" not in message
    assert sandbox.stats.total == 0
