"""The plan comment (GitHub) and note (GitLab): posted once, then edited; failures said."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from support import ci_recipes
from support.ci_recipes import GITHUB, gitlab_job_script
from support.ci_runner import load

stub = ci_recipes.stub  # the fixture, shared with the other recipe tests

NODE = shutil.which("node")


def base_env(tmp_path: Path) -> dict[str, str]:
    return {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "LANG": "C.UTF-8"}


# --- the sticky comment / note -------------------------------------------------------------

NODE_HARNESS = """
const fs = require('fs');
const script = fs.readFileSync(process.argv[2], 'utf8');
const existing = JSON.parse(process.env.EXISTING_COMMENTS);
const calls = [];
const github = {
  paginate: async (method, args) => { calls.push(['list', args]); return existing; },
  rest: { issues: {
    listComments: 'listComments',
    createComment: async (args) => { calls.push(['create', args]); },
    updateComment: async (args) => { calls.push(['update', args]); },
  } },
};
const context = {
  repo: { owner: 'org', repo: 'invites' }, issue: { number: 7 }, runId: 42, sha: 'f00dfeed',
  serverUrl: 'https://github.com', payload: { pull_request: { head: { sha: '0123456789abcdef' } } },
};
const AsyncFunction = Object.getPrototypeOf(async function () {}).constructor;
new AsyncFunction('github', 'context', 'core', 'require', script)(github, context, {}, require)
  .then(() => console.log(JSON.stringify(calls)), (e) => { console.error(e); process.exit(1); });
"""


def github_comment_script() -> tuple[str, str]:
    steps = load(GITHUB)["jobs"]["plan"]["steps"]
    script = next(s for s in steps if s.get("uses", "").startswith("actions/github-script@"))
    marker = re.search(r"'(<!--.*?-->)'", script["with"]["script"])
    assert marker, "the comment script has no HTML-comment marker to find its comment by"
    return script["with"]["script"], marker[1]


def run_comment_script(
    tmp_path: Path,
    plan_md: str,
    exitcode: str,
    existing: list[dict[str, Any]],
    validate_outcome: str = "success",
) -> list[list[Any]]:
    script, _ = github_comment_script()
    (tmp_path / "script.js").write_text(script, encoding="utf-8")
    (tmp_path / "harness.js").write_text(NODE_HARNESS, encoding="utf-8")
    (tmp_path / "plan.md").write_text(plan_md, encoding="utf-8")
    env = {
        **base_env(tmp_path),
        "PLAN_MARKDOWN": str(tmp_path / "plan.md"),
        "PLAN_EXITCODE": exitcode,
        "EXISTING_COMMENTS": json.dumps(existing),
        "VALIDATE_OUTCOME": validate_outcome,
    }
    result = subprocess.run(
        [str(NODE), "harness.js", "script.js"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return [call for call in json.loads(result.stdout) if call[0] != "list"]


@pytest.mark.skipif(NODE is None, reason="node is not installed")
def test_github_comment_is_created_once_then_edited(tmp_path: Path) -> None:
    _, marker = github_comment_script()
    calls = run_comment_script(tmp_path, "### Invite plan: 1 to update", "2", [])
    assert [call[0] for call in calls] == ["create"]
    assert calls[0][1]["issue_number"] == 7
    body = calls[0][1]["body"]
    assert marker in body and "### Invite plan: 1 to update" in body

    existing = [
        {"id": 5, "user": {"type": "User"}, "body": f"quoting the bot: {marker}"},
        {"id": 9, "user": {"type": "Bot"}, "body": f"{marker}\nold plan"},
    ]
    calls = run_comment_script(tmp_path, "### Invite plan: 0 to update", "0", existing)
    assert [(call[0], call[1]["comment_id"]) for call in calls] == [("update", 9)]
    assert "0 to update" in calls[0][1]["body"]


@pytest.mark.skipif(NODE is None, reason="node is not installed")
def test_github_comment_says_validation_failed_instead_of_the_old_plan(tmp_path: Path) -> None:
    _, marker = github_comment_script()
    old = [
        {
            "id": 9,
            "user": {"type": "Bot"},
            "body": f"{marker}\n**These changes will be "
            "applied when this pull request is merged.**\nold plan",
        }
    ]
    calls = run_comment_script(tmp_path, "", "", old, validate_outcome="failure")
    assert [(call[0], call[1]["comment_id"]) for call in calls] == [("update", 9)]
    body = calls[0][1]["body"]
    assert "Validation failed: no plan was made" in body
    assert "will be applied when" not in body and "old plan" not in body


@pytest.mark.skipif(NODE is None, reason="node is not installed")
def test_github_comment_reports_a_failed_plan_and_fits_a_long_one(tmp_path: Path) -> None:
    calls = run_comment_script(tmp_path, "x" * 200_000, "1", [])
    body = calls[0][1]["body"]
    assert "failed" in body and "exit 1" in body
    assert len(body) <= 65536


class FakeGitLab(ThreadingHTTPServer):
    """Just enough of the GitLab notes API, with one human note already on the MR."""

    def __init__(self, marker: str) -> None:
        super().__init__(("127.0.0.1", 0), FakeGitLabHandler)
        self.notes: list[dict[str, Any]] = [
            {"id": 1, "author": {"id": 5}, "body": f"quoting the bot: {marker}"}
        ]
        self.requests: list[tuple[str, str, str | None]] = []


class FakeGitLabHandler(BaseHTTPRequestHandler):
    server: FakeGitLab
    notes_path = "/api/v4/projects/11/merge_requests/3/notes"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def answer(self, status: int, body: Any) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("X-Next-Page", "")
        self.end_headers()
        self.wfile.write(data)

    def record(self) -> tuple[str, dict[str, Any]]:
        path = self.path.split("?")[0]
        self.server.requests.append((self.command, path, self.headers.get("PRIVATE-TOKEN")))
        length = int(self.headers.get("Content-Length") or 0)
        return path, json.loads(self.rfile.read(length) or b"{}")

    def do_GET(self) -> None:
        path, _ = self.record()
        if path == "/api/v4/user":
            self.answer(200, {"id": 99})
        elif path == self.notes_path:
            self.answer(200, self.server.notes)
        else:
            self.answer(404, {"message": "404 Not Found"})

    def do_POST(self) -> None:
        path, body = self.record()
        note = {"id": 100 + len(self.server.notes), "author": {"id": 99}, "body": body["body"]}
        self.server.notes.append(note)
        self.answer(201 if path == self.notes_path else 404, note)

    def do_PUT(self) -> None:
        path, body = self.record()
        note_id = int(path.rsplit("/", 1)[1])
        note = next(n for n in self.server.notes if n["id"] == note_id)
        note["body"] = body["body"]
        self.answer(200, note)


@pytest.fixture
def fake_gitlab() -> Iterator[FakeGitLab]:
    _, marker = github_comment_script()
    server = FakeGitLab(marker)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def test_gitlab_plan_note_is_posted_once_then_edited(stub: Any, fake_gitlab: FakeGitLab) -> None:
    shell, script = gitlab_job_script("plan")
    ci = {
        "PLAN_NOTE_TOKEN": "token-for-the-fake-api",
        "CI_API_V4_URL": f"http://127.0.0.1:{fake_gitlab.server_port}/api/v4",
        "CI_PROJECT_ID": "11",
        "CI_MERGE_REQUEST_IID": "3",
        "CI_JOB_URL": "https://gitlab.example/job/1",
        "CI_COMMIT_SHORT_SHA": "f00dfeed",
    }
    result, _ = stub(shell, script, 2, **ci)
    assert result.returncode == 0, result.stderr
    human, *mine = fake_gitlab.notes
    assert len(mine) == 1 and "stub plan for" in mine[0]["body"]

    result, _ = stub(shell, script, 1, **ci)
    assert result.returncode == 1
    assert len(fake_gitlab.notes) == 2, "a second note was added instead of editing the first"
    assert "failed (exit 1)" in fake_gitlab.notes[1]["body"]
    assert human["body"].startswith("quoting the bot")
    assert ("PUT", f"{FakeGitLabHandler.notes_path}/{mine[0]['id']}") in [
        r[:2] for r in fake_gitlab.requests
    ]
    assert {r[2] for r in fake_gitlab.requests} == {"token-for-the-fake-api"}


def test_gitlab_plan_job_fails_clearly_when_the_note_cannot_be_posted(stub: Any) -> None:
    shell, script = gitlab_job_script("plan")
    result, _ = stub(
        shell,
        script,
        0,
        PLAN_NOTE_TOKEN="token-for-the-fake-api",
        CI_API_V4_URL="http://127.0.0.1:9/api/v4",
        CI_PROJECT_ID="11",
        CI_MERGE_REQUEST_IID="3",
    )
    assert result.returncode == 1
    assert "could not post the plan" in result.stderr
    assert "Traceback" not in result.stderr


# --- the adopt merge request (GitLab drift job) ----------------------------------------------


class FakeGitLabProject(ThreadingHTTPServer):
    """Just enough of the GitLab commits and merge requests API, for project 11."""

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), FakeGitLabProjectHandler)
        self.commits: list[dict[str, Any]] = []
        self.merge_requests: list[dict[str, Any]] = []
        self.tokens: set[str | None] = set()
        self.requests: list[tuple[str, str, str | None]] = []


class FakeGitLabProjectHandler(FakeGitLabHandler):
    server: FakeGitLabProject  # type: ignore[assignment]

    def do_GET(self) -> None:
        path = self.path.split("?")[0]
        self.server.tokens.add(self.headers.get("PRIVATE-TOKEN"))
        query = parse_qs(urlsplit(self.path).query)
        opened = [
            m
            for m in self.server.merge_requests
            if [m["source_branch"]] == query.get("source_branch")
            and query.get("state") == ["opened"]
        ]
        self.answer(200 if path.endswith("/merge_requests") else 404, opened)

    def do_POST(self) -> None:
        path, body = self.record()
        self.server.tokens.add(self.headers.get("PRIVATE-TOKEN"))
        if path == "/api/v4/projects/11/repository/commits":
            self.server.commits.append(body)
        elif path == "/api/v4/projects/11/merge_requests":
            self.server.merge_requests.append(body | {"iid": len(self.server.merge_requests) + 1})
        else:
            self.answer(404, {"message": "404 Not Found"})
            return
        self.answer(201, {"id": 1})

    def do_PUT(self) -> None:
        path, body = self.record()
        self.server.tokens.add(self.headers.get("PRIVATE-TOKEN"))
        iid = int(path.rsplit("/", 1)[1])
        (request,) = [m for m in self.server.merge_requests if m["iid"] == iid]
        request.update(body)
        self.answer(200, request)


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_gitlab_drift_proposes_the_adopted_files_as_one_merge_request(stub: Any) -> None:
    server = FakeGitLabProject()
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    work: Path = stub.work
    git = ["git", "-c", "user.name=T", "-c", "user.email=t@example.com"]
    (work / "invites").mkdir()
    (work / "invites" / "a.yaml").write_text("invites:\n  - id: inv_a\n", encoding="utf-8")
    subprocess.run([*git, "init", "-q"], cwd=work, check=True)
    subprocess.run([*git, "add", "-A"], cwd=work, check=True)
    subprocess.run([*git, "commit", "-qm", "a"], cwd=work, check=True)
    # What adopt (a stub here) leaves behind: an edited invite file.
    adopted = "invites:\n  - id: inv_a\n    name: From The Platform\n"
    (work / "invites" / "a.yaml").write_text(adopted, encoding="utf-8")
    ci = {
        "ADOPT_TOKEN": "token-for-the-fake-api",
        "CI_API_V4_URL": f"http://127.0.0.1:{server.server_port}/api/v4",
        "CI_PROJECT_ID": "11",
    }
    try:
        for run in range(2):  # the second run updates the branch; no second merge request
            result, calls = stub(*gitlab_job_script("drift"), 2, STUB_EXIT_ADOPT="0", **ci)
            assert result.returncode == 1  # drift is still reported
            assert calls[:2] == ["applied show", "plan --detailed-exitcode"]
            adopt = r"adopt --summary /\S+/adopt-summary\.md --changed-since-applied"
            assert re.fullmatch(adopt, calls[2])
            assert "Proposed the adopted values" in result.stdout, result.stderr
            if run == 0:
                server.merge_requests[0]["description"] = "edited by hand"
    finally:
        server.shutdown()
        server.server_close()
    commit = server.commits[0]
    assert commit["branch"] == "reconcile/adopt" and commit["start_branch"] == "main"
    assert commit["force"] is True
    assert commit["actions"] == [
        {"action": "update", "file_path": "invites/a.yaml", "content": adopted}
    ]
    assert len(server.commits) == 2 and len(server.merge_requests) == 1
    assert server.merge_requests[0]["target_branch"] == "main"
    # The second run rewrote the description: what adopt found this time.
    description = server.merge_requests[0]["description"]
    assert "except values merged since the last successful apply" in description
    assert description.endswith("\n\nstub summary\n")  # what the stub's adopt wrote
    assert server.tokens == {"token-for-the-fake-api"}


def test_gitlab_drift_without_a_token_only_reports(stub: Any) -> None:
    (stub.work / "changed.yaml").write_text("x\n", encoding="utf-8")
    result, _ = stub(*gitlab_job_script("drift"), 2)
    assert result.returncode == 1
    assert "ADOPT_TOKEN is not set" in result.stderr
    assert "DRIFT DETECTED" in result.stderr
