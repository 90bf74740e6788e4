"""The audit log is written ahead: on disk before each write leaves, readable after any crash."""

from __future__ import annotations

import errno
import json
import os
import re
import threading
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import requests
from support.fake_platform import (
    CLIENT_ID,
    IDS,
    SECRET,
    TOKEN,
    FakePlatform,
    answer,
    apply_all,
    envelope,
    outcome_for,
    read_records,
    reconcile,
    write_invites,
)
from support.git import git

from reconciler.apply.audit import AuditLog, AuditLogError, audit_path_problem
from reconciler.safetext import register_secret


class SyncWatch:
    """How much of a file os.fsync has put on disk so far."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, path: Path) -> None:
        self.path = path
        self.synced_bytes = 0
        real_fsync = os.fsync

        def fsync(fd: int) -> None:
            real_fsync(fd)
            synced, watched = os.fstat(fd), os.stat(self.path)
            if (synced.st_dev, synced.st_ino) == (watched.st_dev, watched.st_ino):
                self.synced_bytes = max(self.synced_bytes, synced.st_size)

        monkeypatch.setattr(os, "fsync", fsync)


def disk_full_at(monkeypatch: pytest.MonkeyPatch, path: Path, nth: int, *, stays: bool) -> None:
    """The ``nth`` write to ``path`` fails, the disk full (and every one after, if it ``stays``)."""
    real_write = os.write
    writes = 0

    def write(fd: int, data: Any) -> int:
        nonlocal writes
        target, log = os.fstat(fd), os.stat(path)
        if (target.st_dev, target.st_ino) == (log.st_dev, log.st_ino):
            writes += 1
            if writes == nth or (stays and writes > nth):
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real_write(fd, data)

    monkeypatch.setattr(os, "write", write)


def test_each_write_has_its_attempt_on_disk_before_the_request_leaves(
    platform: FakePlatform, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    audit = tmp_path / "audit.jsonl"
    audit.touch()
    watch = SyncWatch(monkeypatch, audit)
    seen_by_server: list[tuple[str, str, bool]] = []

    def check_the_log(operation: str, invite_id: str) -> Any:
        def respond(request: Any, context: Any) -> Any:
            text = audit.read_text(encoding="utf-8")
            last = json.loads(text.splitlines()[-1])
            written_ahead = (last["record"], last["invite_id"], last["operation"]) == (
                "attempt",
                invite_id,
                operation,
            )
            seen_by_server.append((operation, invite_id, written_ahead))
            assert watch.synced_bytes >= len(text.encode("utf-8")), "attempt not on disk yet"
            return envelope({"id": invite_id}, request_id=f"{operation}-{invite_id}")

        return respond

    for invite_id in IDS:
        platform.on_update(invite_id, json=check_the_log("update", invite_id))
        platform.on_resend(invite_id, json=check_the_log("resend", invite_id))
    assert apply_all(tmp_path, resend=True) == 0
    expected = [(op, i, True) for i in IDS for op in ("update", "resend")]
    assert seen_by_server == expected
    records = read_records(audit)
    assert [r["record"] for r in records] == ["attempt", "outcome"] * 6
    update = next(r for r in records if r["record"] == "attempt")
    assert update["fields"] == {
        "email": {"before": "kyb@sakura-shoji.example", "after": "compliance@sakura-shoji.example"}
    }
    assert update["client_id"] == CLIENT_ID and update["plan_hash"].startswith("sha256:")
    ok = outcome_for(records, "inv_6p3j9", "update")
    assert (ok["outcome"], ok["http_status"], ok["request_id"]) == ("ok", 200, "update-inv_6p3j9")


def test_a_torn_last_line_from_an_earlier_crash_does_not_spoil_the_next_run(
    platform: FakePlatform, tmp_path: Path
) -> None:
    audit = tmp_path / "audit.jsonl"
    earlier = '{"record": "outcome", "attempt_id": "0c1d", "outcome": "ok"}\n'
    torn = '{"record": "attempt", "attempt_id": "9f2e", "invite_id": "inv_1v'
    audit.write_text(earlier + torn, encoding="utf-8")
    assert apply_all(tmp_path) == 0
    lines = audit.read_text(encoding="utf-8").splitlines()
    assert lines[:2] == [earlier.strip(), torn]  # kept as they were, evidence of the crash
    records = [json.loads(line) for line in lines[2:]]
    assert Counter(r["record"] for r in records) == {"attempt": 3, "outcome": 3}


def test_a_write_whose_answer_never_came_is_recorded_as_unknown(
    platform: FakePlatform, tmp_path: Path
) -> None:
    dropped = requests.exceptions.ConnectionError("Connection aborted")
    platform.on_update("inv_6p3j9", exc=dropped)
    assert apply_all(tmp_path) == 1
    unknown = outcome_for(read_records(tmp_path / "audit.jsonl"), "inv_6p3j9", "update")
    assert (unknown["outcome"], unknown["http_status"], unknown["request_id"]) == (
        "unknown",
        None,
        None,
    )


def test_no_secret_token_or_control_character_reaches_the_log(
    platform: FakePlatform, tmp_path: Path
) -> None:
    # The API client registers both as soon as it holds them; the log must honour that.
    register_secret(SECRET)
    register_secret(TOKEN)
    echo = f"bad client_secret={SECRET}; token {TOKEN}\x1b]0;PWNED\x07\u202e"
    platform.on_update("inv_2b6n3", **answer(400, echo, "req\x1b[2J-400"))
    assert apply_all(tmp_path) == 1
    text = (tmp_path / "audit.jsonl").read_text(encoding="utf-8")
    assert SECRET not in text and TOKEN not in text
    assert not any((ord(c) < 0x20 and c != "\n") or 0x7F <= ord(c) <= 0x9F for c in text)
    assert "\u202e" not in text
    assert "株式会社サクラ商事" not in text  # names are not in the log unless patched...
    assert "Núñez Exportaciones S.A." in text  # ...and patched ones stay readable
    refused = outcome_for(read_records(tmp_path / "audit.jsonl"), "inv_2b6n3", "update")
    assert refused["message"].startswith("bad client_secret=[redacted]; token [redacted]")
    assert "\\x1b]0;PWNED\\x07" in refused["message"]
    assert refused["request_id"] == "req\\x1b[2J-400"


def test_values_come_back_exactly_as_the_server_had_them_written_escaped(tmp_path: Path) -> None:
    # The same characters a terminal and the JSON output escape: `tail -f` shows no
    # hidden text, and a lone surrogate from a server cannot stop the log being written.
    log = AuditLog(str(tmp_path / "audit.jsonl"), CLIENT_ID)
    names = ["Acme \u202eLtd\u0085 \x1b[31m", "Acme\u200b\xad\U000e0041 Ltd \ud800"]
    for name in names:  # bidi override, C1 NEL, ESC; invisible ones, a tag, a lone surrogate
        log.attempt("inv_8f2k1", "update", {"name": {"before": name, "after": "Acme Ltd"}})
    log.close()
    text = (tmp_path / "audit.jsonl").read_text(encoding="utf-8")
    assert "\\u202e" in text and "\\u0085" in text and "\\u001b" in text
    assert "\\u200b" in text and "\\u00ad" in text and "\\udb40\\udc41" in text
    assert "\\ud800" in text
    assert [r["fields"]["name"]["before"] for r in read_records(tmp_path / "audit.jsonl")] == names


def test_workers_writing_at_once_leave_one_whole_record_per_line(tmp_path: Path) -> None:
    log = AuditLog(str(tmp_path / "audit.jsonl"), CLIENT_ID, sync=False)
    long_value = "Ünïcødé Holdings " * 400  # lines far longer than one pipe or page buffer

    def worker(n: int) -> None:
        for i in range(50):
            attempt = log.attempt(f"inv_{n}_{i}", "update", {"name": {"after": long_value}})
            log.outcome(attempt, "ok", 200, f"r-{n}-{i}")

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    log.close()
    records = read_records(tmp_path / "audit.jsonl")
    assert len(records) == 16 * 50 * 2
    assert len({r["attempt_id"] for r in records if r["record"] == "attempt"}) == 800


def test_an_audit_log_that_cannot_be_opened_stops_apply_before_any_write(
    platform: FakePlatform, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    invites = write_invites(tmp_path / "invites")
    missing_dir = tmp_path / "no-such-dir" / "audit.jsonl"
    assert reconcile("apply", "--auto-approve", "--audit-log", str(missing_dir), str(invites)) == 1
    assert "cannot open the audit log: No such file or directory" in capsys.readouterr().err
    assert platform.writes() == []


def test_manual_resends_are_written_ahead_too(
    platform: FakePlatform, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    platform.on_resend("inv_2b6n3", **answer(409, "invite inv_2b6n3 is not pending", "r-409"))
    args = ("resend", "inv_6p3j9", "inv_2b6n3", "--auto-approve", "--audit-log", "audit.jsonl")
    assert reconcile(*args) == 1
    assert "Resend: 1 re-sent, 1 failed." in capsys.readouterr().out
    records = read_records(tmp_path / "audit.jsonl")
    assert [r["record"] for r in records] == ["attempt", "outcome"] * 2
    assert all(r["plan_hash"] is None for r in records)  # sent by hand, not from a plan
    assert outcome_for(records, "inv_6p3j9", "resend")["outcome"] == "ok"
    refused = outcome_for(records, "inv_2b6n3", "resend")
    assert (refused["outcome"], refused["http_status"]) == ("failed", 409)


def test_a_full_disk_stops_the_run_before_a_write_goes_out_unrecorded(
    platform: FakePlatform,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    audit = tmp_path / "audit.jsonl"
    audit.touch()
    disk_full_at(monkeypatch, audit, 3, stays=False)  # the second invite's attempt
    assert apply_all(tmp_path) == 1
    err = capsys.readouterr().err
    assert (
        "cannot write the audit log (No space left on device); "
        "no new writes are started without their audit record"
    ) in err
    assert "Traceback" not in err
    assert platform.writes() == [("PATCH", "inv_6p3j9")]
    assert [r["record"] for r in read_records(audit)] == ["attempt", "outcome"]


def test_an_outcome_line_names_its_write_in_full(tmp_path: Path) -> None:
    # Someone reading the log after a crash reads outcome lines on their own.
    log = AuditLog(str(tmp_path / "audit.jsonl"), CLIENT_ID, "sha256:abc")
    attempt = log.attempt("inv_8f2k1", "resend")
    log.outcome(attempt, "failed", 409, "req-77", "already accepted")
    log.close()
    first, outcome = read_records(tmp_path / "audit.jsonl")
    time = outcome.pop("time")
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", time), time
    assert time >= first["time"]
    assert outcome == {
        "record": "outcome",
        "attempt_id": first["attempt_id"],
        "invite_id": "inv_8f2k1",
        "operation": "resend",
        "outcome": "failed",
        "http_status": 409,
        "request_id": "req-77",
        "client_id": CLIENT_ID,
        "plan_hash": "sha256:abc",
        "message": "already accepted",
    }


def test_a_re_send_owed_is_a_record_of_its_own_in_full(tmp_path: Path) -> None:
    log = AuditLog(str(tmp_path / "audit.jsonl"), CLIENT_ID, "sha256:abc")
    log.resend_owed("inv_8f2k1", "not sent: the run is stopping")
    log.close()
    (owed,) = read_records(tmp_path / "audit.jsonl")
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", owed.pop("time"))
    assert owed == {
        "record": "resend_owed",
        "invite_id": "inv_8f2k1",
        "operation": "resend",
        "message": "not sent: the run is stopping",
        "client_id": CLIENT_ID,
        "plan_hash": "sha256:abc",
    }
    log = AuditLog(str(tmp_path / "other.jsonl"), None)  # a run with no client id: null, no text
    log.resend_owed("inv_1", "owed")
    log.close()
    assert [r["client_id"] for r in read_records(tmp_path / "other.jsonl")] == [None]


def test_a_log_that_ends_cleanly_gains_no_blank_line(tmp_path: Path) -> None:
    audit = tmp_path / "audit.jsonl"
    audit.write_text('{"record": "outcome"}\n', encoding="utf-8")
    log = AuditLog(str(audit), CLIENT_ID)
    log.attempt("inv_8f2k1", "update")
    log.close()
    lines = audit.read_text(encoding="utf-8").split("\n")
    assert lines[0] == '{"record": "outcome"}' and json.loads(lines[1])["record"] == "attempt"
    assert lines[2:] == [""]


def test_a_line_the_kernel_writes_in_parts_is_still_written_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = AuditLog(str(tmp_path / "audit.jsonl"), CLIENT_ID)
    write = os.write
    monkeypatch.setattr(os, "write", lambda fd, data: write(fd, bytes(data[:7])))
    log.attempt("inv_8f2k1", "update", {"name": {"after": "Acme Holdings Ltd"}})
    log.close()
    (record,) = read_records(tmp_path / "audit.jsonl")
    assert record["fields"] == {"name": {"after": "Acme Holdings Ltd"}}


def test_the_fields_are_recorded_as_given_never_rewritten(tmp_path: Path) -> None:
    # The record of what was sent: the applier gives the server's parts redacted
    # (test_applier.py); the log never edits a value, least of all a file's.
    register_secret("cs_live_LISTsecret")
    log = AuditLog(str(tmp_path / "audit.jsonl"), CLIENT_ID)
    fields: dict[str, Any] = {
        "groups": {"after": ["emea", "Flag Bearer Ltd."]},
        "name": {"after": "Café"},
    }
    log.attempt("inv_8f2k1", "update", fields)
    log.close()
    assert json.loads((tmp_path / "audit.jsonl").read_text(encoding="utf-8"))["fields"] == fields


def test_a_log_that_cannot_be_synced_at_the_end_says_which_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = AuditLog(str(tmp_path / "audit.jsonl"), CLIENT_ID)

    def fail(fd: int) -> None:
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(os, "fsync", fail)
    with pytest.raises(AuditLogError) as caught:
        log.close()
    assert (
        str(caught.value)
        == f"{tmp_path / 'audit.jsonl'}: cannot sync the audit log: Input/output error"
    )
    log.close()  # a second close does nothing more


def test_a_log_that_changed_after_the_check_is_a_clear_error_never_followed(tmp_path: Path) -> None:
    # apply checks the path first; between that check and the open, it can go (a directory
    # stands there now), or a link can take its place, which a commit could point anywhere.
    with pytest.raises(AuditLogError) as caught:
        AuditLog(str(tmp_path), CLIENT_ID)
    assert str(caught.value) == f"{tmp_path}: cannot open the audit log: Is a directory"
    target = tmp_path / "elsewhere.jsonl"
    link = tmp_path / "audit.jsonl"
    link.symlink_to(target)
    with pytest.raises(AuditLogError) as caught:
        AuditLog(str(link), CLIENT_ID)
    assert str(caught.value) == (
        f"{link}: cannot open the audit log: it is a symbolic link (to {target}); the audit "
        "log is never written through a link, which a commit could point at any file: give "
        "the real path"
    )
    assert not target.exists()


def test_a_re_send_due_or_owed_is_on_disk_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # That an e-mail is owed must survive whatever stops the run next (kill -9, a power
    # cut): `reconcile resend` finds it there.
    audit = tmp_path / "audit.jsonl"
    log = AuditLog(str(audit), CLIENT_ID, "sha256:abc")
    watch = SyncWatch(monkeypatch, audit)
    attempt = log.attempt("inv_6p3j9", "update", {"email": {"after": "kyb@sakura.example"}})
    log.outcome(attempt, "ok", 200, "req-1", resend="due")
    assert read_records(audit)[-1]["resend"] == "due"
    assert watch.synced_bytes == audit.stat().st_size
    log.resend_owed("inv_2b6n3", "not sent: the run is stopping")
    assert [r["record"] for r in read_records(audit)][-1] == "resend_owed"
    assert watch.synced_bytes == audit.stat().st_size
    log.close()


def test_a_torn_log_on_a_full_disk_is_refused_saying_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The crash that tore the last line was the disk filling up, and it is full still:
    # the line break that would start our records on their own line cannot be written.
    audit = tmp_path / "audit.jsonl"
    audit.write_text(
        '{"record": "attempt", "attempt_id": "9f2e", "invite_id": "inv_1v', encoding="utf-8"
    )
    disk_full_at(monkeypatch, audit, 1, stays=True)
    with pytest.raises(AuditLogError) as caught:
        AuditLog(str(audit), CLIENT_ID)
    assert str(caught.value) == f"{audit}: cannot prepare the audit log: No space left on device"


def test_a_record_another_run_appends_as_this_one_opens_the_log_gains_no_blank_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Two runs may share one log (O_APPEND keeps their lines whole): the other one's
    # record lands between this one's look at the log's size and at its last byte.
    audit = tmp_path / "audit.jsonl"
    earlier = '{"record": "outcome", "attempt_id": "0c1d", "outcome": "ok"}\n'
    theirs = '{"record": "attempt", "attempt_id": "7a3b", "invite_id": "inv_2b6n3"}\n'
    audit.write_text(earlier, encoding="utf-8")
    real_pread = os.pread

    def pread(fd: int, length: int, offset: int) -> bytes:
        with audit.open("a", encoding="utf-8") as other:
            other.write(theirs)
        return real_pread(fd, length, offset)

    monkeypatch.setattr(os, "pread", pread)
    log = AuditLog(str(audit), CLIENT_ID)
    monkeypatch.setattr(os, "pread", real_pread)
    log.attempt("inv_8f2k1", "update")
    log.close()
    lines = audit.read_text(encoding="utf-8").splitlines()
    assert lines[:2] == [earlier.strip(), theirs.strip()]
    assert [json.loads(line)["record"] for line in lines[2:]] == ["attempt"]


def test_the_log_given_is_the_users_choice_but_never_a_repository_link_out_or_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # --audit-log and RECONCILER_AUDIT_LOG are the user's: anywhere outside the checkout.
    # Inside it, what a commit made is refused: a directory linked out (issue 51's one
    # rule), a committed file, also when reached through a link inside the checkout.
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))
    repo, home = tmp_path / "repo", tmp_path / "home"
    (repo / "kept").mkdir(parents=True)
    home.mkdir()
    git(repo, "init", "-q")
    (repo / "kept" / "audit.jsonl").write_text('{"forged": true}\n', encoding="utf-8")
    (repo / "out").symlink_to(home)
    (repo / "in").symlink_to(repo / "kept")
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "a pull request")
    monkeypatch.chdir(repo)

    assert audit_path_problem(str(home / "audit.jsonl")) is None
    assert audit_path_problem("../home/audit.jsonl") is None
    assert audit_path_problem("new/audit.jsonl") is None
    assert audit_path_problem("out/audit.jsonl") == (
        f"it leads to {home.resolve()}/audit.jsonl, outside the repository ({repo.resolve()}); "
        "the audit log never follows a link out of it: give the real path"
    )
    for committed in ("kept/audit.jsonl", "in/audit.jsonl"):
        why = audit_path_problem(committed)
        assert why is not None and why.startswith("it is a file committed in the repository")
