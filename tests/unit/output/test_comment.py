"""The plan comment (GitHub) and note (GitLab), and GitLab's adopt merge request:
`reconcile comment` (reconciler.output.comment) against requests-mock, and the recipes'
calls of it against a stub `reconcile`."""

from __future__ import annotations

import base64
import contextlib
import json
import re
import socket
import subprocess
import threading
import time
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
import requests
import requests_mock
from support import ci_recipes
from support.ci_recipes import gitlab_job_script
from support.cli import run_cli

from reconciler.errors import ConfigError
from reconciler.output import comment
from reconciler.output.comment import MARKER, CommentError, body, place_from_env, post

stub = ci_recipes.stub  # the fixture, shared with the other recipe tests

API = "https://api.github.example"
COMMENTS = f"{API}/repos/org/invites/issues/7/comments"
LAB = "https://gitlab.example/api/v4"
NOTES = f"{LAB}/projects/11/merge_requests/3/notes"


def github_env(tmp_path: Path) -> dict[str, str]:
    event = tmp_path / "event.json"
    event.write_text(json.dumps({"pull_request": {"number": 7, "head": {"sha": "0123456789ab"}}}))
    return {
        "GITHUB_ACTIONS": "true",
        "GITHUB_API_URL": API,
        "GITHUB_REPOSITORY": "org/invites",
        "GITHUB_EVENT_PATH": str(event),
        "GITHUB_SERVER_URL": "https://github.example",
        "GITHUB_RUN_ID": "42",
        "RECONCILER_COMMENT_TOKEN": "gh-secret-token",
    }


def gitlab_env() -> dict[str, str]:
    return {
        "GITLAB_CI": "true",
        "CI_API_V4_URL": LAB,
        "CI_PROJECT_ID": "11",
        "CI_MERGE_REQUEST_IID": "3",
        "CI_JOB_URL": "https://gitlab.example/job/1",
        "CI_COMMIT_SHA": "f00dfeed" * 5,
        "RECONCILER_COMMENT_TOKEN": "gl-secret-token",
    }


def sent(mock: requests_mock.Mocker) -> list[tuple[str, str]]:
    return [(r.method, r.url.split("?")[0]) for r in mock.request_history]


def test_github_comment_is_created_once_then_edited(tmp_path: Path) -> None:
    place = place_from_env(github_env(tmp_path))
    with requests_mock.Mocker() as mock:
        mock.get(COMMENTS, json=[])
        mock.post(COMMENTS, status_code=201, json={"id": 9})
        assert post(place, body(place, "### Invite plan: 1 to update", 2, validate_failed=False))
        (create,) = [r for r in mock.request_history if r.method == "POST"]
    text = create.json()["body"]
    assert text.startswith(MARKER) and "### Invite plan: 1 to update" in text
    assert "will be applied when this is merged" in text and "Plan of 0123456" in text
    assert create.headers["Authorization"] == "Bearer gh-secret-token"

    existing = [
        {"id": 5, "user": {"type": "User"}, "body": f"quoting the bot: {MARKER}"},
        {"id": 9, "user": {"login": "github-actions[bot]"}, "body": f"{MARKER}\nold plan"},
    ]
    with requests_mock.Mocker() as mock:
        mock.get(COMMENTS, json=existing)
        mock.patch(f"{API}/repos/org/invites/issues/comments/9", json={"id": 9})
        assert post(place, body(place, "### 0 to update", 0, validate_failed=False)) == "updated"
        assert sent(mock)[-1] == ("PATCH", f"{API}/repos/org/invites/issues/comments/9")
        assert "No changes" in mock.request_history[-1].json()["body"]


def test_github_comment_says_validation_failed_or_a_plan_failed_and_fits_a_long_one(tmp_path):
    place = place_from_env(github_env(tmp_path))
    text = body(place, "old plan", None, validate_failed=True)
    assert "Validation failed: no plan was made" in text
    assert "will be applied when" not in text and "old plan" not in text
    assert "https://github.example/org/invites/actions/runs/42" in text
    text = body(place, "x" * 200_000, 1, validate_failed=False)
    assert "failed (exit 1)" in text and len(text) <= 65_536
    assert "cut short here" in text and "actions/runs/42" in text.rsplit("cut short", 1)[1]


def test_the_comments_are_read_page_by_page_within_a_bound(tmp_path: Path) -> None:
    place = place_from_env(github_env(tmp_path))
    mine = {"id": 301, "user": {"login": "github-actions[bot]"}, "body": MARKER}
    with requests_mock.Mocker() as mock:
        pages = [[{"id": i, "user": {"type": "User"}, "body": ""} for i in range(100)], [mine]]
        mock.get(COMMENTS, [{"json": page} for page in pages])
        mock.patch(f"{API}/repos/org/invites/issues/comments/301", json={})
        assert post(place, "text") == "updated"
        assert [r.qs["page"] for r in mock.request_history if r.method == "GET"] == [["1"], ["2"]]
    with requests_mock.Mocker() as mock:
        mock.get(COMMENTS, content=b"[" + b" " * (comment.ANSWER_LIMIT + 1) + b"]")
        with pytest.raises(CommentError, match="over 4194304 bytes"):
            post(place, "text")


def test_a_refused_call_says_status_and_message_escaped_never_the_token(tmp_path: Path) -> None:
    place = place_from_env(github_env(tmp_path))
    with requests_mock.Mocker() as mock:
        mock.get(COMMENTS, status_code=403, json={"message": "Resource not\x1b[31m accessible"})
        with pytest.raises(CommentError) as raised:
            post(place, "text")
    said = str(raised.value)
    assert said.startswith(f"GET {COMMENTS}: HTTP 403: Resource not")
    assert "\x1b" not in said and "gh-secret-token" not in said
    with requests_mock.Mocker() as mock:
        mock.get(COMMENTS, exc=requests.ConnectTimeout)
        with pytest.raises(CommentError, match="ConnectTimeout"):
            post(place, "text")
    # A server echoing the token re-encoded: Base64 (as in a Basic header), percent-encoded.
    token = github_env(tmp_path)["RECONCILER_COMMENT_TOKEN"]
    echoed = f"bad {base64.b64encode(token.encode()).decode()} and {quote(token, safe='')}"
    with requests_mock.Mocker() as mock:
        mock.get(COMMENTS, status_code=401, json={"message": echoed})
        with pytest.raises(CommentError) as raised:
            post(place, "text")
    said = str(raised.value)
    assert said.startswith(f"GET {COMMENTS}: HTTP 401: bad ")
    assert base64.b64encode(token.encode()).decode()[:12] not in said
    assert quote(token, safe="") not in said


def test_only_the_cis_api_over_https_or_loopback_and_only_a_pull_request(tmp_path: Path) -> None:
    env = github_env(tmp_path)
    with pytest.raises(ConfigError, match=r"GITHUB_API_URL: .* use https://") as plain:
        place_from_env(env | {"GITHUB_API_URL": "http://api.github.example"})
    # Said for the token it would send, not for a client secret.
    assert "would send the token unencrypted" in str(plain.value)
    assert "client secret" not in str(plain.value)
    assert (
        place_from_env(env | {"GITHUB_API_URL": "http://127.0.0.1:8/"}).api == "http://127.0.0.1:8"
    )
    for event in ('{"push": {}}', '{"pull_request": {"number": -1, "head": {"sha": "a"}}}'):
        (tmp_path / "event.json").write_text(event)
        with pytest.raises(ConfigError, match="no pull request"):
            place_from_env(env)
    with pytest.raises(ConfigError, match="RECONCILER_COMMENT_TOKEN is not set") as unset:
        place_from_env({"GITHUB_ACTIONS": "true"})
    # Where a user sets it, on either platform.
    assert "the action's `token`" in str(unset.value) and "PLAN_NOTE_TOKEN" in str(unset.value)


def test_gitlab_note_is_posted_once_then_edited_by_the_tokens_own_user() -> None:
    place = place_from_env(gitlab_env())
    human = {"id": 1, "author": {"id": 5}, "body": f"quoting the bot: {MARKER}"}
    with requests_mock.Mocker() as mock:
        mock.get(f"{LAB}/user", json={"id": 99})
        mock.get(NOTES, json=[human], headers={"X-Next-Page": ""})
        mock.post(NOTES, status_code=201, json={"id": 100})
        assert post(place, body(place, "stub plan", 2, validate_failed=False)) == "posted"
        assert {r.headers["PRIVATE-TOKEN"] for r in mock.request_history} == {"gl-secret-token"}
    mine = {"id": 100, "author": {"id": 99}, "body": f"{MARKER}\nold"}
    with requests_mock.Mocker() as mock:
        mock.get(f"{LAB}/user", json={"id": 99})
        mock.get(NOTES, json=[human, mine], headers={"X-Next-Page": ""})
        mock.put(f"{NOTES}/100", json=mine)
        assert post(place, body(place, "", 1, validate_failed=False)) == "updated"
        assert "failed (exit 1)" in mock.request_history[-1].json()["body"]


ADOPT_MR = {
    "iid": 4,
    "source_project_id": 11,
    "target_project_id": 11,
    "source_branch": "reconcile/adopt",
    "target_branch": "main",
    "author": {"id": 99},
}


def test_gitlab_adopt_merge_request_is_committed_then_opened_once() -> None:
    place = place_from_env(gitlab_env(), pull=False)
    files = {"invites/a.yaml": "invites:\n  - id: inv_a\n"}
    project = f"{LAB}/projects/11"
    with requests_mock.Mocker() as mock:
        mock.post(f"{project}/repository/commits", status_code=201, json={})
        mock.get(f"{LAB}/user", json={"id": 99})
        mock.get(f"{project}/merge_requests", [{"json": []}, {"json": [ADOPT_MR]}])
        mock.post(f"{project}/merge_requests", status_code=201, json={"iid": 4})
        mock.put(f"{project}/merge_requests/4", json={"iid": 4})
        assert comment.propose_adopted(place, files, "stub summary\n", "main") == "opened"
        assert comment.propose_adopted(place, files, "again\n", "main") == "updated"
        commit = mock.request_history[1].json()  # after GET /user
        opened = mock.request_history[3].json()
        updated = mock.request_history[-1].json()
    assert commit["branch"] == "reconcile/adopt" and commit["start_branch"] == "main"
    assert commit["force"] is True
    assert commit["actions"] == [
        {"action": "update", "file_path": "invites/a.yaml", "content": files["invites/a.yaml"]}
    ]
    assert opened["target_branch"] == "main" and opened["description"].endswith("stub summary\n")
    assert "except values merged since the last successful apply" in updated["description"]
    assert updated["description"].endswith("\n\nagain\n")


def test_the_command_needs_an_exitcode_and_says_a_failure_in_one_line(tmp_path: Path) -> None:
    env = github_env(tmp_path)
    result = run_cli("comment", env=env)
    assert result.returncode == 1 and "give --exitcode" in result.stderr
    with requests_mock.Mocker() as mock:
        mock.get(COMMENTS, status_code=404, json={"message": "Not Found"})
        result = run_cli("comment", "--exitcode", "2", "--markdown", str(tmp_path / "no"), env=env)
    assert result.returncode == 1
    assert "could not post the plan comment: GET" in result.stderr
    assert "Traceback" not in result.stderr and "gh-secret-token" not in result.stderr


# --- the recipes call it ----------------------------------------------------------------------


def test_gitlab_plan_job_posts_the_note_with_its_token_and_fails_when_it_cannot(stub: Any) -> None:
    # Without PLAN_NOTE_TOKEN: tests/unit/ci/test_recipes.py (no `comment` call, a notice).
    shell, script = gitlab_job_script("plan")
    ok = {"PLAN_NOTE_TOKEN": "note-token", "STUB_EXIT_COMMENT": "0"}
    result, calls = stub(shell, script, 2, **ok)
    assert result.returncode == 0, result.stderr
    assert calls[-1] == "comment --markdown plan.md --exitcode 2"
    result, calls = stub(shell, script, 1, **ok)
    assert result.returncode == 1 and calls[-1] == "comment --markdown plan.md --exitcode 1"
    result, calls = stub(shell, script, 0, PLAN_NOTE_TOKEN="note-token", STUB_EXIT_COMMENT="1")
    assert result.returncode == 1  # the note could not be posted: the job says so by failing


def test_gitlab_drift_proposes_the_adopted_files_through_the_tool(stub: Any) -> None:
    work: Path = stub.work
    (work / "invites").mkdir()
    (work / "invites" / "a.yaml").write_text("invites:\n  - id: inv_a\n", encoding="utf-8")
    git = ["git", "-c", "user.name=T", "-c", "user.email=t@example.com"]
    subprocess.run([*git, "add", "-A"], cwd=work, check=True)
    subprocess.run([*git, "commit", "-qm", "a"], cwd=work, check=True)
    (work / "invites" / "a.yaml").write_text("invites:\n  - id: inv_a\n    name: P\n")
    result, calls = stub(
        *gitlab_job_script("drift"), 2, STUB_EXIT_ADOPT="0", STUB_EXIT_COMMENT="0", ADOPT_TOKEN="t"
    )
    assert result.returncode == 1 and "DRIFT DETECTED" in result.stderr  # drift still reported
    assert calls[:2] == ["applied show", "plan --detailed-exitcode"]
    assert re.fullmatch(r"adopt --summary /\S+/adopt-summary\.md --changed-since-applied", calls[2])
    assert re.fullmatch(r"comment --adopt-summary /\S+/adopt-summary\.md invites/a\.yaml", calls[3])


def test_gitlab_drift_without_a_token_only_reports(stub: Any) -> None:
    (stub.work / "changed.yaml").write_text("x\n", encoding="utf-8")
    result, calls = stub(*gitlab_job_script("drift"), 2)
    assert result.returncode == 1
    assert "ADOPT_TOKEN is not set" in result.stderr
    assert "DRIFT DETECTED" in result.stderr
    assert not any(c.startswith("comment") for c in calls)


# --- what an attack found ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "other",
    [
        {"source_project_id": 666},  # a fork's branch named reconcile/adopt
        {"target_project_id": 666},
        {"target_branch": "release"},
        {"author": {"id": 5}},  # someone else's merge request
    ],
)
def test_gitlab_adopt_updates_only_its_own_merge_request_else_opens_one(other: Any) -> None:
    place = place_from_env(gitlab_env(), pull=False)
    project = f"{LAB}/projects/11"
    with requests_mock.Mocker() as mock:
        mock.post(f"{project}/repository/commits", status_code=201, json={})
        mock.get(f"{LAB}/user", json={"id": 99})
        mock.get(f"{project}/merge_requests", json=[ADOPT_MR | other])
        mock.post(f"{project}/merge_requests", status_code=201, json={"iid": 5})
        assert comment.propose_adopted(place, {"a.yaml": "x"}, "s", "main") == "opened"
        assert not [r for r in mock.request_history if r.method == "PUT"]


def test_github_comment_is_only_the_configured_authors(tmp_path: Path) -> None:
    foreign = {"id": 5, "user": {"login": "other-app[bot]", "type": "Bot"}, "body": MARKER}
    for env, posted in [({}, True), ({"RECONCILER_COMMENT_AUTHOR": "other-app[bot]"}, False)]:
        place = place_from_env(github_env(tmp_path) | env)
        with requests_mock.Mocker() as mock:
            mock.get(COMMENTS, json=[foreign])
            mock.post(COMMENTS, status_code=201, json={"id": 6})
            mock.patch(f"{API}/repos/org/invites/issues/comments/5", json={})
            assert post(place, "text") == ("posted" if posted else "updated")
    result = run_cli("comment", "--help")
    assert "RECONCILER_COMMENT_AUTHOR" in result.stdout and "github-actions[bot]" in result.stdout


@pytest.mark.parametrize(
    ("answer", "said"),
    [
        ([{"id": [1], "user": {"login": "github-actions[bot]"}, "body": MARKER}], '"id"'),
        ([{"id": 1, "user": "Bot", "body": MARKER}], '"user"'),
        ([{"id": 1, "user": {}, "body": 5}], '"body"'),
        ([7], "not an object"),
    ],
)
def test_hostile_comment_shapes_are_a_clear_error(tmp_path: Path, answer: Any, said: str) -> None:
    place = place_from_env(github_env(tmp_path))
    with requests_mock.Mocker() as mock:
        mock.get(COMMENTS, json=answer)
        with pytest.raises(CommentError, match="answered JSON of the wrong shape") as raised:
            post(place, "text")
    assert said in str(raised.value)


def test_hostile_gitlab_shapes_and_a_user_without_id_are_refused(tmp_path: Path) -> None:
    place = place_from_env(gitlab_env())
    for user in ([{"id": 99}], {"username": "x"}, {"id": "99"}):
        with requests_mock.Mocker() as mock:
            mock.get(f"{LAB}/user", json=user)
            mock.get(NOTES, json=[{"id": 1, "author": {}, "body": MARKER}])
            with pytest.raises(CommentError, match=r"/user answered JSON of the wrong shape"):
                post(place, "text")
    adopt = place_from_env(gitlab_env(), pull=False)
    project = f"{LAB}/projects/11"
    with requests_mock.Mocker() as mock:
        mock.post(f"{project}/repository/commits", status_code=201, json={})
        mock.get(f"{LAB}/user", json={"id": 99})
        mock.get(f"{project}/merge_requests", json=[ADOPT_MR | {"iid": "../../x"}])
        with pytest.raises(CommentError, match='"iid" is not a positive integer'):
            comment.propose_adopted(adopt, {"a.yaml": "x"}, "s", "main")
    with requests_mock.Mocker() as mock:
        mock.get(f"{LAB}/user", content=b"[" * 2_000_000)
        with pytest.raises(CommentError, match=r"wrong shape \(nested too deep"):
            post(place, "text")


def test_the_command_never_says_internal_error(tmp_path: Path) -> None:
    env = github_env(tmp_path)
    (tmp_path / "event.json").write_text("[" * 2_000_000)
    result = run_cli("comment", "--exitcode", "2", env=env)
    assert result.returncode == 1 and "GITHUB_EVENT_PATH (" in result.stderr
    assert "internal error" not in result.stderr
    big = tmp_path / "plan.md"
    big.write_bytes(b"x" * (16 * 1024 * 1024 + 1))
    small = tmp_path / "a.yaml"
    small.write_text("x")
    adopt = ["--adopt-summary", str(big), str(small)]
    for args in (["--markdown", str(big), "--exitcode", "2"], adopt):
        result = run_cli(
            "comment", *args, env=gitlab_env() if args == adopt else github_env(tmp_path)
        )
        assert result.returncode == 1 and f"{big}: larger than 16 MiB" in result.stderr, args
        assert "internal error" not in result.stderr


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("GITHUB_REPOSITORY", "o/r/../../../elsewhere?x=#"),
        ("GITHUB_REPOSITORY", "../.."),
        ("CI_PROJECT_ID", "11/../12"),
        ("CI_MERGE_REQUEST_IID", "0"),
        ("CI_MERGE_REQUEST_IID", "3?x"),
    ],
)
def test_where_to_comment_is_checked(tmp_path: Path, name: str, value: str) -> None:
    env = github_env(tmp_path) if name.startswith("GITHUB") else gitlab_env()
    with pytest.raises(ConfigError, match=name):
        place_from_env(env | {name: value})


def test_the_session_reads_no_netrc_and_no_proxy_for_plain_http(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HTTP_PROXY", "http://proxy.example:3128")
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.example:3128")
    place = place_from_env(github_env(tmp_path) | {"GITHUB_API_URL": "http://127.0.0.1:9"})
    session = comment.session_for(place)
    assert session.trust_env is False and not session.proxies


def _slow_server(answer: str) -> tuple[str, Any]:
    """A server that drips its body (``drip``), sends nothing (``silent``), or cuts it short."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()

    def serve() -> None:
        conn, _ = listener.accept()
        conn.recv(65536)
        if answer == "cut":
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n[]")
        else:
            if answer == "drip":
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n")
            for _ in range(40):
                time.sleep(0.2)
                with contextlib.suppress(OSError):
                    conn.sendall(b" " if answer == "drip" else b"")
        conn.close()

    threading.Thread(target=serve, daemon=True).start()
    return f"http://127.0.0.1:{listener.getsockname()[1]}", listener


@pytest.mark.parametrize(
    ("answer", "said"),
    [
        ("drip", "no whole answer within 1 s"),
        ("silent", "no whole answer within 1 s"),
        ("cut", r"comments: ProtocolError"),
    ],
)
def test_a_slow_or_cut_answer_ends_within_the_timeout_as_a_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, answer: str, said: str
) -> None:
    monkeypatch.setattr(comment, "TIMEOUT", 1.0)
    api, listener = _slow_server(answer)
    place = place_from_env(github_env(tmp_path) | {"GITHUB_API_URL": api})
    started = time.monotonic()
    with pytest.raises(CommentError, match=said):
        post(place, "text")
    assert time.monotonic() - started < 3
    listener.close()
