"""Just enough of the GitHub and GitLab REST APIs, on 127.0.0.1, for `reconcile comment`:
a pull request's issue comments (GitHub), a merge request's notes, the commits and
merge requests API (GitLab). Every request is kept, with the token it carried."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

GITHUB_COMMENTS = "/repos/org/invites/issues/7/comments"
GITLAB_NOTES = "/api/v4/projects/11/merge_requests/3/notes"
GITLAB_PROJECT = "/api/v4/projects/11"
ME = 99  # the token's user on GitLab


class FakeForge(ThreadingHTTPServer):
    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.comments: list[dict[str, Any]] = []  # GitHub's, or GitLab's notes
        self.commits: list[dict[str, Any]] = []
        self.merge_requests: list[dict[str, Any]] = []
        self.requests: list[tuple[str, str, str | None]] = []  # method, path, token
        self.fail_with: int | None = None  # answer every request so

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_port}"

    def github_env(self, tmp: Any, token: str = "gh-token") -> dict[str, str]:
        event = tmp / "event.json"
        event.write_text(
            json.dumps({"pull_request": {"number": 7, "head": {"sha": "0123abc" * 6}}})
        )
        return {
            "GITHUB_API_URL": self.url,
            "GITHUB_REPOSITORY": "org/invites",
            "GITHUB_EVENT_PATH": str(event),
            "GITHUB_SERVER_URL": "https://github.example",
            "GITHUB_RUN_ID": "42",
            "RECONCILER_COMMENT_TOKEN": token,
        }

    def gitlab_env(self) -> dict[str, str]:
        return {
            "GITLAB_CI": "true",
            "CI_API_V4_URL": f"{self.url}/api/v4",
            "CI_PROJECT_ID": "11",
            "CI_MERGE_REQUEST_IID": "3",
            "CI_JOB_URL": "https://gitlab.example/job/1",
            "CI_COMMIT_SHA": "f00dfeed" * 5,
            "CI_DEFAULT_BRANCH": "main",
        }

    def mine(self) -> list[dict[str, Any]]:
        return [c for c in self.comments if c.get("id", 0) >= 100]


class Handler(BaseHTTPRequestHandler):
    # Headers and body go out in two writes: with Nagle's algorithm the second waits for
    # the client's delayed ACK of the first, 40 ms an answer on Linux.
    disable_nagle_algorithm = True
    server: FakeForge

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def answer(self, status: int, body: Any) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def read(self) -> tuple[str, dict[str, Any]]:
        path = self.path.split("?")[0]
        token = self.headers.get("PRIVATE-TOKEN") or self.headers.get("Authorization")
        self.server.requests.append((self.command, path, token))
        length = int(self.headers.get("Content-Length") or 0)
        return path, json.loads(self.rfile.read(length) or b"{}")

    def failed(self) -> bool:
        if self.server.fail_with:
            self.answer(self.server.fail_with, {"message": "403 Forbidden <script>"})
            return True
        return False

    def do_GET(self) -> None:
        path, _ = self.read()
        query = parse_qs(urlsplit(self.path).query)
        if self.failed():
            return
        if path == "/api/v4/user":
            self.answer(200, {"id": ME})
        elif path in (GITHUB_COMMENTS, GITLAB_NOTES):
            self.answer(200, self.server.comments)
        elif path == f"{GITLAB_PROJECT}/merge_requests":
            source = query.get("source_branch")
            found = [m for m in self.server.merge_requests if [m["source_branch"]] == source]
            self.answer(200, found if query.get("state") == ["opened"] else [])
        else:
            self.answer(404, {"message": "404 Not Found"})

    def do_POST(self) -> None:
        path, body = self.read()
        if self.failed():
            return
        if path in (GITHUB_COMMENTS, GITLAB_NOTES):
            author = (
                {"user": {"login": "github-actions[bot]", "type": "Bot"}}
                if path == GITHUB_COMMENTS
                else {"author": {"id": ME}}
            )
            comment = {"id": 100 + len(self.server.comments), "body": body["body"], **author}
            self.server.comments.append(comment)
            self.answer(201, comment)
        elif path == f"{GITLAB_PROJECT}/repository/commits":
            self.server.commits.append(body)
            self.answer(201, {"id": "c0ffee"})
        elif path == f"{GITLAB_PROJECT}/merge_requests":
            project = {"source_project_id": 11, "target_project_id": 11, "author": {"id": ME}}
            iid = {"iid": len(self.server.merge_requests) + 1}
            self.server.merge_requests.append(body | project | iid)
            self.answer(201, self.server.merge_requests[-1])
        else:
            self.answer(404, {"message": "404 Not Found"})

    def edit(self) -> None:
        path, body = self.read()
        if self.failed():
            return
        key = int(path.rsplit("/", 1)[1])
        if "/notes/" in path or "/comments/" in path:
            found = [c for c in self.server.comments if c["id"] == key]
        else:
            found = [m for m in self.server.merge_requests if m["iid"] == key]
        if not found:
            self.answer(404, {"message": "404 Not Found"})
            return
        found[0].update(body)
        self.answer(200, found[0])

    do_PATCH = edit
    do_PUT = edit


@contextmanager
def fake_forge() -> Iterator[FakeForge]:
    server = FakeForge()
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
