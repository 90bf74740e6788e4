"""Every write checked (issue 33): the real CLI against a platform that stores something
else than it is sent, changes under the plan, answers about another invite, or refuses a
re-send; and the process signalled in the middle of a write.

Each row of issue 33's table is a test here; each asserts what the server received
(no PATCH for a conflict, no re-send for a diverged field, a GET after a PATCH without
data), the exit code and the audit log's records.
"""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import time
import unicodedata
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from support.cli import run_cli
from support.helpers import RECONCILE, REPO, audit_log, sandbox_env
from support.hostile_server import HostileServer, Hostility, Seen
from support.invites import ACME, desired_entry, write_invites

from reconciler.sandbox import Sandbox

# Retries back off a hundredth as long (tests/conftest.py): what they do is the point.
pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("quick_backoff")]

SECRET = "hostile-write-secret"
QUICK = "max_attempts: 3\nretry_max_seconds: 20\ntimeout: 2\nparallelism: 2\n"


def outcomes(path: Path, operation: str) -> list[str]:
    return [
        r["outcome"]
        for r in audit_log(path)
        if r["record"] == "outcome" and r["operation"] == operation
    ]


def apply(cwd: Path, env: dict[str, str], *extra: str) -> Any:
    (cwd / "reconciler.yaml").write_text(QUICK, encoding="utf-8")
    args = ("apply", "--auto-approve", "--audit-log", "audit.jsonl", *extra, "invites")
    return run_cli(*args, cwd=cwd, env=env)


def methods(seen: list[Seen], invite_id: str = "inv_acme") -> list[str]:
    """What the server received for the invite, in order: GET, PATCH, RESEND."""
    found = []
    for s in seen:
        if f"/invites/{invite_id}" not in s.target:
            continue
        found.append("RESEND" if s.target.endswith("/resend") else s.method)
    return found


# -- row 1: a normalising platform ----------------------------------------------------------


OWED_NORMALISED = (
    "re-send owed  inv_acme: withheld: the platform stored `email` otherwise than sent, and "
    'the invitation would go to the address it holds, "compliance@acme.example"; once you '
    "have checked what it holds (and the files hold the platform's form); send it with: "
    "reconcile resend inv_acme"
)


def test_a_normalised_email_is_diverged_and_its_re_send_owed_until_sent_once_by_hand(
    start_sandbox: Callable[..., Sandbox], tmp_path: Path
) -> None:
    # Issue 51, row 7: the re-send was withheld ("fix the files first"); after `adopt` the
    # plan was clean, the address had changed, no e-mail ever went and nothing said so.
    server = start_sandbox([ACME], normalize=True)
    env = sandbox_env(server)
    entry = desired_entry(ACME, email="Compliance@Acme.example", resendOnChange=["email"])
    write_invites(tmp_path / "invites", [entry])
    for run in range(2):  # every apply: the same answer, and never an e-mail
        applied = apply(tmp_path, env)
        assert applied.returncode == 1, applied.stderr
        assert "diverged     inv_acme" in applied.stdout
        assert (
            'the platform stored "compliance@acme.example" for `email`, not '
            '"Compliance@Acme.example" as written' in applied.stdout
        )
        assert "reconcile adopt --target inv_acme" in applied.stdout
        assert "\nre-sent " not in applied.stdout
        # Owed once: the first apply changed the address; the second changed nothing.
        assert (OWED_NORMALISED in applied.stdout) is (run == 0), applied.stdout
        owed = ", 1 re-send owed" if run == 0 else ""
        assert f"Apply: 0 updated, 1 diverged, 0 failed{owed}." in applied.stdout
    assert server.store.resends["inv_acme"] == 0
    log = audit_log(tmp_path / "audit.jsonl")
    diverged = [r for r in log if r.get("outcome") == "diverged"]
    assert diverged[0]["stored"] == {"email": "compliance@acme.example"}
    assert [r["invite_id"] for r in log if r["record"] == "resend_owed"] == ["inv_acme"]
    # The next plan does not hide it: the same change again.
    plan = run_cli("plan", "--detailed-exitcode", "invites", cwd=tmp_path, env=env)
    assert plan.returncode == 2
    assert 'email: "compliance@acme.example" -> "Compliance@Acme.example"' in plan.stdout

    # The files take the platform's form: the plan is clean, and the log still says it.
    adopted = run_cli("adopt", "--target", "inv_acme", "invites", cwd=tmp_path, env=env)
    assert adopted.returncode == 0, adopted.stderr
    assert "No changes." in run_cli("plan", "invites", cwd=tmp_path, env=env).stdout
    assert owed_in(tmp_path / "audit.jsonl") == ["inv_acme"]
    by_hand = ("resend", "inv_acme", "--auto-approve", "--audit-log", "audit.jsonl")
    assert run_cli(*by_hand, cwd=tmp_path, env=env).returncode == 0
    assert server.store.resends["inv_acme"] == 1  # sent once, by hand
    assert owed_in(tmp_path / "audit.jsonl") == []


def test_text_stored_in_another_normal_form_or_case_of_a_kept_sub_field(tmp_path: Path) -> None:
    # The platform stores NFC (the files wrote NFD) and upper-cases the kept contact phone's
    # letters: the first is the same text, the second is noted, neither diverged.
    nfd = unicodedata.normalize("NFD", "Müller Café")
    contact = {"name": "Jane Doe", "email": "jane@acme.example", "phone": "+44 20 7946 0001x"}
    invite = dict(ACME, primaryContact=contact)

    def store(body: dict[str, Any]) -> dict[str, Any]:
        body = {k: unicodedata.normalize("NFC", v) if k == "name" else v for k, v in body.items()}
        if "primaryContact" in body:
            body["primaryContact"] = {**body["primaryContact"], "phone": "+44 20 7946 0001X"}
        return body

    entry = desired_entry(
        ACME, name=nfd, primaryContact={"name": "Jane Roe", "email": "jane@acme.example"}
    )
    write_invites(tmp_path / "invites", [entry])
    with HostileServer([invite], Hostility(patch_store=store), secret=SECRET) as server:
        applied = apply(tmp_path, sandbox_env(server))
    assert applied.returncode == 0, applied.stdout + applied.stderr
    assert "updated      inv_acme" in applied.stdout
    assert 'note: the platform stored "+44 20 7946 0001X" for `primaryContact.phone`' in (
        applied.stdout
    )
    assert outcomes(tmp_path / "audit.jsonl", "update") == ["ok"]


# -- row 2: a platform that ignores a field ------------------------------------------------


@pytest.mark.parametrize("resend", [True, ["email"]], ids=["true", "list-form"])
def test_an_ignored_email_is_diverged_and_a_re_send_goes_only_to_the_address_held(
    start_sandbox: Callable[..., Sandbox], tmp_path: Path, resend: bool | list[str]
) -> None:
    server = start_sandbox([ACME], ignore=("email",))
    entry = desired_entry(ACME, name="Acme Group Ltd", email="new@acme.example")
    write_invites(tmp_path / "invites", [dict(entry, resendOnChange=resend)])
    applied = apply(tmp_path, sandbox_env(server))
    assert applied.returncode == 1
    assert "diverged     inv_acme" in applied.stdout
    if resend is True:
        # The name was stored as sent, so the invitation goes, to the address held.
        assert "re-sent      inv_acme: invitation e-mailed to old@acme.example" in applied.stdout
        assert "new@acme.example" not in applied.stdout.split("re-sent", 1)[1]
    else:
        # The platform kept the address it had: nothing changed for the business, none owed.
        assert "re-send" not in applied.stdout
        assert "resend_owed" not in (tmp_path / "audit.jsonl").read_text(encoding="utf-8")
    assert server.store.resends["inv_acme"] == (resend is True)


# -- row 3: an answer about another invite ------------------------------------------------


def test_a_patch_answered_with_another_invites_data_is_unknown_and_re_sends_nothing(
    tmp_path: Path,
) -> None:
    other = dict(ACME, id="inv_OTHER", email="private@other.example")
    entry = desired_entry(ACME, email="new@acme.example", resendOnChange=True)
    write_invites(tmp_path / "invites", [entry])
    hostility = Hostility(patch_wrong_ids={"inv_acme": "inv_OTHER"})
    with HostileServer([ACME, other], hostility, secret=SECRET) as server:
        applied = apply(tmp_path, sandbox_env(server))
        assert methods(server.seen) == ["GET", "GET", "PATCH"]  # no re-send
    assert applied.returncode == 1
    assert "update unknown  inv_acme" in applied.stdout
    assert "the answer to its update is about inv_OTHER" in applied.stdout
    assert outcomes(tmp_path / "audit.jsonl", "update") == ["unknown"]


# -- row 4: a kept sub-field changed while the plan waited ---------------------------------


def test_a_kept_phone_changed_since_the_plan_is_a_conflict_and_nothing_is_written(
    tmp_path: Path,
) -> None:
    entry = desired_entry(
        ACME, primaryContact={"name": "María López", "email": "maria@acme.example"}
    )
    write_invites(tmp_path / "invites", [entry])
    support_edit = {"primaryContact": {**ACME["primaryContact"], "phone": "+442079469999"}}
    hostility = Hostility(change_before_get={"inv_acme": (2, support_edit)})
    with HostileServer([ACME], hostility, secret=SECRET) as server:
        applied = apply(tmp_path, sandbox_env(server))
        assert methods(server.seen) == ["GET", "GET"]  # no PATCH
        assert server.invites["inv_acme"]["primaryContact"]["phone"] == "+442079469999"
    assert applied.returncode == 1
    assert "conflict     inv_acme" in applied.stdout
    assert (
        'primaryContact: planned from {"name": "Jane Doe", "email": "jane@acme.example", '
        '"phone": "+442079460001"}' in applied.stdout
    )
    assert "Apply: 0 updated, 1 conflict (not written), 0 failed." in applied.stdout
    assert "reconcile plan --target inv_acme" in applied.stderr
    assert not (tmp_path / "audit.jsonl").read_text()  # nothing was attempted


def test_a_change_between_the_read_and_the_write_is_refused_by_if_match(tmp_path: Path) -> None:
    entry = desired_entry(ACME, email="new@acme.example", resendOnChange=True)
    write_invites(tmp_path / "invites", [entry])
    hostility = Hostility(etags=True, change_after_get={"inv_acme": (2, {"phone": "+1"})})
    with HostileServer([ACME], hostility, secret=SECRET) as server:
        applied = apply(tmp_path, sandbox_env(server))
        patches = server.calls("PATCH")
        assert [p.headers.get("If-Match") for p in patches] == [patches[0].headers["If-Match"]]
        assert patches[0].headers["If-Match"].startswith('"')
        assert server.resends["inv_acme"] == 0
        assert server.invites["inv_acme"]["email"] == "old@acme.example"
    assert applied.returncode == 1
    assert "conflict     inv_acme" in applied.stdout and "HTTP 412" in applied.stdout
    assert outcomes(tmp_path / "audit.jsonl", "update") == ["failed"]


def test_a_412_after_a_read_without_an_etag_is_a_conflict_too(tmp_path: Path) -> None:
    write_invites(tmp_path / "invites", [desired_entry(ACME, email="new@acme.example")])
    with HostileServer([ACME], Hostility(always_412=True), secret=SECRET) as server:
        applied = apply(tmp_path, sandbox_env(server))
        assert "If-Match" not in server.calls("PATCH")[0].headers
    assert applied.returncode == 1
    assert "conflict     inv_acme" in applied.stdout


@pytest.mark.parametrize("style", ["weak", "fresh"])
def test_weak_etags_and_etags_new_on_every_read_let_the_write_through(
    tmp_path: Path, style: str
) -> None:
    # Weak: a server compares If-Match strongly (RFC 9110 §13.1.1), so a weak tag sent
    # back made every PATCH a 412 "conflict" and no apply could ever succeed. Fresh: each
    # GET names a new version; the PATCH carries the last one.
    write_invites(
        tmp_path / "invites", [desired_entry(ACME, email="new@acme.example", resendOnChange=True)]
    )
    with HostileServer([ACME], Hostility(etags=True, etag_style=style), secret=SECRET) as server:
        applied = apply(tmp_path, sandbox_env(server))
        (patch,) = server.calls("PATCH")
        assert server.resends["inv_acme"] == 1
    assert applied.returncode == 0, applied.stdout + applied.stderr
    assert ("If-Match" in patch.headers) is (style == "fresh")
    assert "re-sent      inv_acme" in applied.stdout


def test_the_sandbox_etags_mode_is_honoured_end_to_end(
    start_sandbox: Callable[..., Sandbox], tmp_path: Path
) -> None:
    server = start_sandbox([ACME], etags=True)
    write_invites(tmp_path / "invites", [desired_entry(ACME, email="new@acme.example")])
    applied = apply(tmp_path, sandbox_env(server))
    assert applied.returncode == 0, applied.stderr
    assert server.store.get("inv_acme")["email"] == "new@acme.example"


# -- row 5: what a contact PATCH carries, in every plan format ------------------------------


def test_every_plan_format_shows_the_phone_the_new_contact_keeps(
    start_sandbox: Callable[..., Sandbox], tmp_path: Path
) -> None:
    server = start_sandbox([ACME])
    env = sandbox_env(server)
    entry = desired_entry(ACME, primaryContact={"name": "María", "email": "maria@acme.example"})
    write_invites(tmp_path / "invites", [entry])
    text = run_cli("plan", "invites", cwd=tmp_path, env=env).stdout
    assert (
        'primaryContact.phone: "+442079460001" (kept from the platform, not in the files)' in text
    )
    assert "the new contact keeps the previous one's phone" in text
    markdown = run_cli("plan", "--format", "markdown", "invites", cwd=tmp_path, env=env).stdout
    assert "kept from the platform, not in the files" in markdown
    assert "[!WARNING]" in markdown and "keeps the previous one" in markdown
    document = json.loads(
        run_cli("plan", "--format", "json", "invites", cwd=tmp_path, env=env).stdout
    )
    assert document["changes"][0]["kept"] == {"primaryContact": ["phone"]}
    assert document["changes"][0]["patch"]["primaryContact"]["phone"] == "+442079460001"


# -- answers without data, re-sends refused, every attempt recorded -----------------------


def test_a_patch_answered_without_data_is_checked_with_a_get(
    start_sandbox: Callable[..., Sandbox], tmp_path: Path
) -> None:
    server = start_sandbox([ACME], patch_data=False)
    write_invites(tmp_path / "invites", [desired_entry(ACME, email="new@acme.example")])
    applied = apply(tmp_path, sandbox_env(server))
    assert applied.returncode == 0, applied.stderr
    order = [(r.method, r.status) for r in server.stats.requests if "/invites/" in r.path]
    assert order == [("GET", 200), ("GET", 200), ("PATCH", 200), ("GET", 200)]


@pytest.mark.parametrize(
    ("answers", "sent", "code", "said"),
    [
        ([429], 1, 0, "re-sent      inv_acme"),
        ([503], 1, 0, "re-sent      inv_acme"),
        ([429, 503], 1, 0, "re-sent      inv_acme"),
        ([502], 1, 1, "re-send unknown  inv_acme"),
        (["timeout"], 1, 1, "re-send unknown  inv_acme"),
    ],
    ids=["429-then-200", "503-then-200", "429-503-then-200", "502", "timeout"],
)
def test_a_refused_re_send_is_sent_again_and_one_that_may_have_gone_never_is(
    tmp_path: Path, answers: list[int | str], sent: int, code: int, said: str
) -> None:
    write_invites(
        tmp_path / "invites",
        [desired_entry(ACME, email="new@acme.example", resendOnChange=True)],
    )
    with HostileServer([ACME], Hostility(resend_answers=list(answers)), secret=SECRET) as server:
        # "timeout" answers after 3.5 s: the client waits a second of it, not QUICK's 2.
        timeout = {"RECONCILER_TIMEOUT": "1"} if "timeout" in answers else {}
        applied = apply(tmp_path, sandbox_env(server) | timeout)
        assert server.resends["inv_acme"] == sent  # e-mails that went out: exactly one
        tries = methods(server.seen).count("RESEND")
    assert applied.returncode == code, applied.stdout + applied.stderr
    assert said in applied.stdout
    resends = outcomes(tmp_path / "audit.jsonl", "resend")
    assert len(resends) == tries  # every attempt that went out, with its outcome
    if code == 0:
        assert resends[-1] == "ok" and resends[:-1] == ["failed"] * (tries - 1)
    else:
        assert tries == 1 and resends == ["unknown"]


JSON, PAST = {"Content-Type": "application/json"}, "Wed, 21 Oct 2015 07:28:00 GMT"
OK_ENVELOPE = json.dumps({"status": 200, "success": True, "message": "OK", "data": None}).encode()


@pytest.mark.parametrize(
    ("answer", "sent", "code", "said", "logged"),
    [
        # A 503 or 429 whose envelope says success: it may have gone; sent again, the
        # business got two e-mails.
        ((503, JSON, OK_ENVELOPE, True), 1, 1, "unknown", "unknown"),
        ((429, JSON, OK_ENVELOPE, True), 1, 1, "unknown", "unknown"),
        ((200, {"Content-Type": "text/plain"}, b"sent", True), 1, 1, "unknown", "unknown"),
        # A wait longer than the retry budget: certainly not made, and owed.
        ((429, {"Retry-After": "99999"}, b"", False), 0, 1, "not re-sent", "failed"),
        # A date in the past: no wait, sent again once.
        ((429, {"Retry-After": PAST}, b"", False), 1, 0, "re-sent", "failed"),
    ],
    ids=[
        "503-saying-success",
        "429-saying-success",
        "200-not-json",
        "429-wait-99999",
        "429-past-date",
    ],
)
def test_a_re_send_answered_against_itself_is_unknown_and_never_sent_twice(
    tmp_path: Path,
    answer: tuple[int, dict[str, str], bytes, bool],
    sent: int,
    code: int,
    said: str,
    logged: str,
) -> None:
    write_invites(
        tmp_path / "invites", [desired_entry(ACME, email="new@acme.example", resendOnChange=True)]
    )
    with HostileServer([ACME], Hostility(resend_raw=[answer]), secret=SECRET) as server:
        applied = apply(tmp_path, sandbox_env(server))
        assert server.resends["inv_acme"] == sent  # e-mails that went out: never two
    assert applied.returncode == code, applied.stdout + applied.stderr
    assert f"{said}  " in applied.stdout or f"{said}      " in applied.stdout
    assert " failed" not in applied.stdout.replace("0 failed", "")
    assert "failed" not in applied.stderr  # the progress line neither
    assert outcomes(tmp_path / "audit.jsonl", "resend")[0] == logged


def test_every_patch_attempt_is_in_the_audit_log(tmp_path: Path) -> None:
    write_invites(tmp_path / "invites", [desired_entry(ACME, email="new@acme.example")])
    with HostileServer([ACME], Hostility(patch_statuses=[504, 504]), secret=SECRET) as server:
        applied = apply(tmp_path, sandbox_env(server))
        assert methods(server.seen).count("PATCH") == 3
    assert applied.returncode == 0, applied.stdout + applied.stderr
    log = audit_log(tmp_path / "audit.jsonl")
    kinds = [(r["record"], r.get("outcome"), r.get("http_status")) for r in log]
    assert kinds == [
        ("attempt", None, None),
        ("outcome", "unknown", 504),
        ("attempt", None, None),
        ("outcome", "unknown", 504),
        ("attempt", None, None),
        ("outcome", "ok", 200),
    ]


# -- row 6: SIGHUP during a write whose re-send is due --------------------------------------


def apply_signalled(
    tmp_path: Path, server: HostileServer, signum: signal.Signals, times: int = 1
) -> tuple[int, str, str]:
    """The real `reconcile apply` (one request at a time), sent ``signum`` ``times`` once
    the server holds its first PATCH: (exit code, stdout, stderr)."""
    (tmp_path / "reconciler.yaml").write_text("parallelism: 1\n", encoding="utf-8")
    process = subprocess.Popen(
        [*RECONCILE, "apply", "--auto-approve", "--audit-log", "audit.jsonl", "invites"],
        cwd=tmp_path,
        env=sandbox_env(server),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 20
    while not server.calls("PATCH") and time.monotonic() < deadline:
        time.sleep(0.02)
    for _ in range(times):
        process.send_signal(signum)
        time.sleep(0.2)  # signals that arrive together are delivered once
    out, err = process.communicate(timeout=30)
    return process.returncode, out, err


def test_sighup_during_a_write_finishes_it_and_never_drops_its_re_send(tmp_path: Path) -> None:
    second = dict(ACME, id="inv_beta", email="old@beta.example")
    entries = [
        desired_entry(ACME, email="new@acme.example", resendOnChange=True),
        desired_entry(second, email="new@beta.example", resendOnChange=True),
    ]
    write_invites(tmp_path / "invites", entries)
    with HostileServer([ACME, second], Hostility(patch_delay=0.6), secret=SECRET) as server:
        code, out, err = apply_signalled(tmp_path, server, signal.SIGHUP)  # mid-PATCH
        resent = server.resends["inv_acme"]
        patched = [p.target for p in server.calls("PATCH")]
    assert code == 1, err  # not killed by the signal
    assert "Interrupted" in err
    assert len(patched) == 1  # the second write never started
    log = audit_log(tmp_path / "audit.jsonl")
    update = [r for r in log if r["record"] == "outcome" and r["operation"] == "update"]
    assert update[0]["resend"] == "due"  # on disk before the re-send was tried
    if resent:
        assert "re-sent      inv_acme" in out
    else:  # owed: said, on disk and with the way to make it
        assert "re-send owed  inv_acme" in out
        assert any(r["record"] == "resend_owed" for r in log)
        assert "reconcile resend inv_acme" in out
    assert "not started  inv_beta" in out


@pytest.mark.parametrize("repeated", [signal.SIGHUP, signal.SIGTERM])
def test_a_hangup_or_termination_that_comes_twice_still_finishes_the_write_and_its_re_send(
    tmp_path: Path, repeated: signal.Signals
) -> None:
    # A terminal closing under an interactive shell sends SIGHUP twice (the shell forwards
    # it to its jobs, the kernel sends its own when the shell exits); a trap may repeat
    # SIGTERM. Quitting on the second left the update made, no re-send and nothing owed.
    write_invites(
        tmp_path / "invites", [desired_entry(ACME, email="new@acme.example", resendOnChange=True)]
    )
    with HostileServer([ACME], Hostility(patch_delay=0.6), secret=SECRET) as server:
        _, out, err = apply_signalled(tmp_path, server, repeated, times=2)
        assert server.resends["inv_acme"] == 1
    assert "quitting now" not in err
    assert "re-sent      inv_acme" in out, out + err
    assert outcomes(tmp_path / "audit.jsonl", "resend") == ["ok"]


@pytest.mark.parametrize(
    ("email", "store", "said", "resent", "last"),
    [
        ("new@acme.example", None, "updated      inv_acme", 1, "ok"),
        ("New@Acme.example", str.lower, "update unknown  inv_acme", 0, "unknown"),
    ],
    ids=["stored-as-sent", "stored-otherwise"],
)
def test_a_412_to_a_retry_after_a_504_that_was_written_is_not_a_conflict(
    tmp_path: Path,
    email: str,
    store: Callable[[str], str] | None,
    said: str,
    resent: int,
    last: str,
) -> None:
    # nginx answered 504 after the platform wrote the PATCH; its retry carries the ETag
    # that write replaced, so it gets 412. Reported as a conflict ("nothing written"), the
    # update's re-send was dropped unsaid, and the next plan showed no change.
    write_invites(tmp_path / "invites", [desired_entry(ACME, email=email, resendOnChange=True)])

    def stored(body: dict[str, Any]) -> dict[str, Any]:
        return {k: store(v) if store and k == "email" else v for k, v in body.items()}

    hostility = Hostility(etags=True, patch_landed_statuses=[504], patch_store=stored)
    with HostileServer([ACME], hostility, secret=SECRET) as server:
        applied = apply(tmp_path, sandbox_env(server))
        assert methods(server.seen) == ["GET", "GET", "PATCH", "PATCH", "GET"] + ["RESEND"] * (
            resent
        )
        assert server.resends["inv_acme"] == resent
    assert said in applied.stdout, applied.stdout + applied.stderr
    assert "conflict" not in applied.stdout
    assert applied.returncode == (0 if resent else 1)
    update = [r for r in audit_log(tmp_path / "audit.jsonl") if r["operation"] == "update"]
    assert [(r["record"], r.get("outcome"), r.get("http_status")) for r in update] == [
        ("attempt", None, None),
        ("outcome", "unknown", 504),
        ("attempt", None, None),
        ("outcome", last, 412),
    ]
    assert update[-1].get("resend") == ("due" if resent else None)


def test_a_412_after_a_refused_attempt_is_still_a_conflict(tmp_path: Path) -> None:
    # A 503 refusal wrote nothing: a 412 after it is someone else's change.
    write_invites(tmp_path / "invites", [desired_entry(ACME, email="new@acme.example")])
    hostility = Hostility(always_412=True, patch_statuses=[503])
    with HostileServer([ACME], hostility, secret=SECRET) as server:
        applied = apply(tmp_path, sandbox_env(server))
        # ... and the invite, read once more, is as it was: what moved is the ETag alone.
        assert methods(server.seen) == ["GET", "GET", "PATCH", "PATCH", "GET"]
    assert applied.returncode == 1
    assert "conflict     inv_acme" in applied.stdout
    assert "the server's ETag may change at every read" in applied.stdout


def _owed_recipe() -> str:
    """The jq program of docs/troubleshooting.md that lists the re-sends due and not made."""
    readme = (REPO / "docs" / "troubleshooting.md").read_text(encoding="utf-8")
    heading = readme.index("Updates whose re-send was due and not made")
    start = readme.index("```sh\n", heading) + 6
    block = readme[start : readme.index("\n```", start)]
    return block.split("jq -rRn '", 1)[1].rsplit("' audit.jsonl", 1)[0]


def owed_in(path: Path) -> list[str]:
    """The invites that recipe lists, found in Python as it finds them, and by jq too when
    it is installed: a `resend_owed` record or an update's `"resend": "due"`, with no
    re-send attempt after it but `failed` ones."""
    log = audit_log(path)
    said = {r["attempt_id"]: r["outcome"] for r in log if r["record"] == "outcome"}
    owed: dict[str, bool] = {}
    for r in log:
        made = r["record"] == "attempt" and r["operation"] == "resend"
        if r["record"] == "resend_owed" or (r["record"] == "outcome" and r.get("resend") == "due"):
            owed[r["invite_id"]] = True
        elif made and said.get(r["attempt_id"], "unknown") != "failed":
            owed.pop(r["invite_id"], None)
    if shutil.which("jq") is not None:
        listed = subprocess.run(
            ["jq", "-rRn", _owed_recipe(), str(path)], capture_output=True, text=True, check=True
        )
        assert listed.stdout.split() == list(owed)
    return list(owed)


@pytest.mark.skipif(shutil.which("jq") is None, reason="jq is not installed")
@pytest.mark.parametrize(
    ("answer", "owed"),
    [
        ((429, {"Retry-After": "99999"}, b"", False), ["inv_acme"]),  # refused, not sent again
        ((429, {"Retry-After": "0"}, b"", False), []),  # refused, then sent
    ],
    ids=["refused-then-given-up", "refused-then-sent"],
)
def test_the_audit_log_says_a_refused_re_send_not_sent_again_is_owed(
    tmp_path: Path, answer: tuple[int, dict[str, str], bytes, bool], owed: list[str]
) -> None:
    # Its one `failed` attempt read, in the README's recipe, as a re-send made.
    write_invites(
        tmp_path / "invites", [desired_entry(ACME, email="new@acme.example", resendOnChange=True)]
    )
    with HostileServer([ACME], Hostility(resend_raw=[answer]), secret=SECRET) as server:
        apply(tmp_path, sandbox_env(server))
    log = audit_log(tmp_path / "audit.jsonl")
    assert [r["invite_id"] for r in log if r["record"] == "resend_owed"] == owed
    assert owed_in(tmp_path / "audit.jsonl") == owed  # the recipe's jq lists them too


# -- issue 51: no e-mail before a read shows the address -------------------------------------


def lower_email(body: dict[str, Any]) -> dict[str, Any]:
    return {k: v.lower() if k == "email" else v for k, v in body.items()}


def test_an_echoed_answer_never_sends_an_e_mail_a_get_shows_the_address_first(
    tmp_path: Path,
) -> None:
    # Row 2: the platform lower-cases the address and its PATCH answer echoes the request:
    # the check passed, and every apply e-mailed the business again.
    write_invites(
        tmp_path / "invites",
        [desired_entry(ACME, email="Compliance@Acme.example", resendOnChange=["email"])],
    )
    hostility = Hostility(patch_store=lower_email, patch_echo=True)
    with HostileServer([ACME], hostility, secret=SECRET) as server:
        runs = [apply(tmp_path, sandbox_env(server)) for _ in range(3)]
        # Each apply: its plan's read, the read before the write, the PATCH, and the read
        # that shows what was stored before any e-mail. None went.
        assert methods(server.seen) == ["GET", "GET", "PATCH", "GET"] * 3
        assert sum(server.resends.values()) == 0
        assert server.invites["inv_acme"]["email"] == "compliance@acme.example"
    for run, applied in enumerate(runs):
        assert applied.returncode == 1
        assert "diverged     inv_acme" in applied.stdout
        assert "re-sent      inv_acme" not in applied.stdout
        # The first apply changed the address, without an e-mail to it: owed, once.
        assert (
            "re-send owed  inv_acme: withheld: the platform stored `email`" in (applied.stdout)
        ) is (run == 0)
    log = audit_log(tmp_path / "audit.jsonl")
    assert [r["outcome"] for r in log if r["record"] == "outcome"] == ["diverged"] * 3
    assert [r["invite_id"] for r in log if r["record"] == "resend_owed"] == ["inv_acme"]
    assert all(r["operation"] == "update" for r in log if r["record"] == "attempt")


def test_a_re_send_answered_about_another_invite_is_unknown_never_re_sent(
    tmp_path: Path,
) -> None:
    # Row 8: an answer about inv_OTHER was printed `re-sent inv_acme`, exit 0.
    other = dict(ACME, id="inv_OTHER", email="private@other.example")
    write_invites(
        tmp_path / "invites",
        [desired_entry(ACME, email="new@acme.example", resendOnChange=True)],
    )
    hostility = Hostility(resend_wrong_ids={"inv_acme": "inv_OTHER"})
    with HostileServer([ACME, other], hostility, secret=SECRET) as server:
        applied = apply(tmp_path, sandbox_env(server))
        assert methods(server.seen) == ["GET", "GET", "PATCH", "GET", "RESEND"]  # never again
        assert server.resends == {"inv_OTHER": 1}
    assert applied.returncode == 1
    assert (
        "re-send unknown  inv_acme: HTTP 200: invite inv_acme: the answer to its re-send is "
        "about inv_OTHER; which invitation went out is unknown" in applied.stdout
    ), applied.stdout
    assert "re-sent      inv_acme" not in applied.stdout
    assert "reconcile resend" not in applied.stdout + applied.stderr
    assert outcomes(tmp_path / "audit.jsonl", "resend") == ["unknown"]


def test_a_412_whose_read_again_holds_what_was_sent_is_applied_and_its_re_send_owed(
    tmp_path: Path,
) -> None:
    # Row 9: someone made the same change between the read and the PATCH. It was reported
    # "conflict ... nothing written", and the due re-send disappeared unsaid.
    write_invites(
        tmp_path / "invites",
        [desired_entry(ACME, email="new@acme.example", resendOnChange=True)],
    )
    made = {"email": "new@acme.example"}
    hostility = Hostility(etags=True, change_after_get={"inv_acme": (2, made)})
    with HostileServer([ACME], hostility, secret=SECRET) as server:
        env = sandbox_env(server)
        applied = apply(tmp_path, env)
        assert methods(server.seen) == ["GET", "GET", "PATCH", "GET"]
        assert server.resends["inv_acme"] == 0  # whether the other writer e-mailed: unknown
        plan = run_cli("plan", "invites", cwd=tmp_path, env=env)
    assert applied.returncode == 1
    assert "conflict" not in applied.stdout
    assert "already applied  inv_acme" in applied.stdout
    assert "re-send owed  inv_acme: refused (HTTP 412: precondition failed (requestId " in (
        applied.stdout
    )
    assert (
        ") and read again, the platform already held the values that re-send it (someone "
        "else's write): whether an invitation went with them is unknown; once you have "
        "checked that none did; send it with: reconcile resend inv_acme" in applied.stdout
    )
    assert "1 already applied, 1 re-send owed." in applied.stdout
    assert outcomes(tmp_path / "audit.jsonl", "update") == ["failed"]  # the 412
    assert "No changes." in plan.stdout
    assert owed_in(tmp_path / "audit.jsonl") == ["inv_acme"]  # the log still says it
