"""The one sticky plan comment of a pull request (GitHub) or merge request (GitLab).

Found by its marker among the comments the token's own user (GitHub: the login
RECONCILER_COMMENT_AUTHOR names, github-actions[bot] by default) wrote, then
edited; posted when there is none. The body says what the plan means (no changes, changes
pending, plan failed, validation failed), then the plan, cut at the platform's limit with
a link to the run. Only the API the CI gives (GITHUB_API_URL, CI_API_V4_URL) is called,
with the token from RECONCILER_COMMENT_TOKEN; every answer is read within a size and time
bound, and what a server says is redacted and escaped before it is shown.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import requests

from reconciler.api.auth import register_secret_forms
from reconciler.api.exceptions import AnswerTooLarge, TransportError
from reconciler.api.exchange import (
    READ_FAILURES,
    GuardedAdapter,
    Limits,
    attempt_deadline,
    read_body,
)
from reconciler.api.network import host_of, make_session, parse_base_url
from reconciler.errors import ConfigError, ReconcilerError
from reconciler.files import TooLarge, read_regular
from reconciler.safetext import cut, escape, redact_and_escape

TOKEN_ENV = "RECONCILER_COMMENT_TOKEN"
AUTHOR_ENV = "RECONCILER_COMMENT_AUTHOR"  # GitHub: the login whose comment is this tool's
DEFAULT_AUTHOR = "github-actions[bot]"  # the job's GITHUB_TOKEN
_REPOSITORY = re.compile(r"[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+")
MARKER = "<!-- invite-reconciler:plan -->"
TIMEOUT = 30.0  # seconds for one call, connect and answer
ANSWER_LIMIT = 4 * 1024 * 1024  # bytes of one answer
PAGES = 50  # of 100 comments each: a pull request with more is refused, not read for ever
_CUT_NOTE = "\n\n_The plan is cut short here; the full plan is in the artifacts of [the run]({})._"


class CommentError(ReconcilerError):
    """The comment could not be read or written (the plan itself is unaffected)."""


@dataclass(frozen=True)
class Place:
    """Where this run's comment lives, read from the CI's environment."""

    platform: str  # "github" or "gitlab"
    api: str  # the API's base URL, checked
    project: str  # the project's URL (GitHub: the repository's)
    comments: str  # the URL listing (and, by POST, adding) the comments
    edit: str  # the URL of one comment, with {id}
    headers: Mapping[str, str]
    run_url: str
    commit: str
    author: str = DEFAULT_AUTHOR  # GitHub: the login of this tool's comments
    project_id: int = 0  # GitLab: CI_PROJECT_ID

    @property
    def limit(self) -> int:
        """Characters a comment may hold."""
        return 65_536 if self.platform == "github" else 1_000_000

    @property
    def me(self) -> str:
        """GitLab: the URL saying who the token is."""
        return f"{self.api}/user"


def status_line(exitcode: int | None, *, validate_failed: bool, run_url: str) -> str:
    if validate_failed:
        return (
            "Validation failed: no plan was made, and nothing will be applied until the "
            "invite files are fixed. The problems are marked on the changed lines and in "
            f"the [job log]({run_url})."
        )
    if exitcode == 0:
        return "No changes: the platform already matches this branch."
    if exitcode == 2:
        return "These changes will be applied when this is merged."
    return f"`reconcile plan` failed (exit {exitcode}); see the [job log]({run_url})."


def body(place: Place, plan: str, exitcode: int | None, *, validate_failed: bool) -> str:
    """The whole comment, within ``place.limit`` characters; no plan after a failed validate."""
    status = status_line(exitcode, validate_failed=validate_failed, run_url=place.run_url)
    head = f"{MARKER}\n**{status}**\n\n"
    tail = f"\n\n<sub>Plan of {place.commit[:7]} · [run]({place.run_url})</sub>"
    plan = "" if validate_failed else plan
    room = place.limit - len(head) - len(tail)
    if len(plan) > room:
        note = _CUT_NOTE.format(place.run_url)
        plan = plan[: max(room - len(note), 0)] + note
    return head + plan + tail


def place_from_env(env: Mapping[str, str] | None = None, *, pull: bool = True) -> Place:
    """Where to comment (``pull``: this pull request's; else the project alone)."""
    env = os.environ if env is None else env
    token = env.get(TOKEN_ENV, "")
    if not token:
        raise ConfigError(
            f"{TOKEN_ENV} is not set: the token that may comment (GitHub: the action's "
            "`token`, with pull-requests: write; GitLab: PLAN_NOTE_TOKEN, or ADOPT_TOKEN for "
            "--adopt-summary)"
        )
    register_secret_forms(token)  # a long-lived token: as the client secret, any echo of it
    if env.get("GITHUB_ACTIONS") == "true":
        return _github(env, token)
    if env.get("GITLAB_CI") == "true":
        return _gitlab(env, token, pull)
    raise ConfigError("not under GitHub Actions or GitLab CI: no pull request to comment on")


def _needed(env: Mapping[str, str], *names: str) -> None:
    missing = [name for name in names if not env.get(name)]
    if missing:
        raise ConfigError(f"{', '.join(missing)} not set: cannot tell where to comment")


def _api(env: Mapping[str, str], name: str) -> str:
    try:
        return parse_base_url(env[name]).text
    except ConfigError as error:
        said = (
            str(error)
            .removeprefix("base_url ")
            .replace("the client secret and tokens", "the token")
        )
        raise ConfigError(f"{name}: {said}") from None


def positive(value: Any) -> int | None:
    """``value`` if it is a positive int (an id or iid), else None."""
    return value if type(value) is int and value > 0 else None


def _number(env: Mapping[str, str], name: str) -> int:
    text = env[name]
    if not (text.isascii() and text.isdigit() and int(text) > 0):
        raise ConfigError(f"{name} is not a positive integer: {cut(escape(text), 40)}")
    return int(text)


def _event(path: str) -> tuple[int, str]:
    """The pull request's number and head commit, from GITHUB_EVENT_PATH's file."""
    try:
        event = json.loads(read_regular(path, ANSWER_LIMIT))
    except (OSError, ValueError, TooLarge, RecursionError):
        raise ConfigError(
            f"GITHUB_EVENT_PATH ({escape(path)}): not a readable JSON file of at most "
            f"{ANSWER_LIMIT} bytes"
        ) from None
    pull = event.get("pull_request") if isinstance(event, dict) else None
    head = pull.get("head") if isinstance(pull, dict) else None
    number = positive(pull.get("number")) if isinstance(pull, dict) else None
    commit = head.get("sha") if isinstance(head, dict) else None
    if number is None or not isinstance(commit, str):
        raise ConfigError(
            f"GITHUB_EVENT_PATH ({escape(path)}) holds no pull request: run on pull_request"
        )
    return number, commit


def _github(env: Mapping[str, str], token: str) -> Place:
    _needed(env, "GITHUB_API_URL", "GITHUB_REPOSITORY", "GITHUB_EVENT_PATH")
    api, repo = _api(env, "GITHUB_API_URL"), env["GITHUB_REPOSITORY"]
    if not _REPOSITORY.fullmatch(repo) or any(set(p) == {"."} for p in repo.split("/")):
        raise ConfigError(f"GITHUB_REPOSITORY is not owner/name: {cut(escape(repo), 80)}")
    number, commit = _event(env["GITHUB_EVENT_PATH"])
    server, project = env.get("GITHUB_SERVER_URL", "https://github.com"), f"{api}/repos/{repo}"
    headers = {"Authorization": f"Bearer {token}", "Accept": "application/vnd.github+json"}
    return Place(
        "github",
        api,
        project,
        f"{project}/issues/{number}/comments",
        f"{project}/issues/comments/{{id}}",
        headers | {"X-GitHub-Api-Version": "2022-11-28"},
        f"{server}/{repo}/actions/runs/{env.get('GITHUB_RUN_ID', '')}",
        commit,
        env.get(AUTHOR_ENV) or DEFAULT_AUTHOR,
    )


def _gitlab(env: Mapping[str, str], token: str, pull: bool) -> Place:
    needed = ("CI_API_V4_URL", "CI_PROJECT_ID") + (("CI_MERGE_REQUEST_IID",) if pull else ())
    _needed(env, *needed)
    api = _api(env, "CI_API_V4_URL")
    project_id = _number(env, "CI_PROJECT_ID")
    project = f"{api}/projects/{project_id}"
    iid = _number(env, "CI_MERGE_REQUEST_IID") if pull else ""
    notes = f"{project}/merge_requests/{iid}/notes"
    job, commit = env.get("CI_JOB_URL", ""), env.get("CI_COMMIT_SHA", "")
    headers = {"PRIVATE-TOKEN": token}
    return Place(
        "gitlab", api, project, notes, notes + "/{id}", headers, job, commit, "", project_id
    )


def session_for(place: Place) -> requests.Session:
    """The API client's session: no .netrc, its proxy and CA rules, a deadline on answers."""
    return make_session(place.api, GuardedAdapter())


def call(
    session: requests.Session, place: Place, method: str, url: str, data: Any = None
) -> tuple[Any, Mapping[str, str]]:
    """One call: its JSON answer and headers, read within ANSWER_LIMIT and, the whole
    call (headers and body), TIMEOUT: the API client's deadline and bounded reader."""
    shown = f"{method} {url.split('?')[0]}"
    limits = Limits(time.monotonic() + TIMEOUT, ANSWER_LIMIT, time.monotonic, host_of(url), TIMEOUT)
    late = CommentError(f"{shown}: no whole answer within {TIMEOUT:.0f} s")
    try:
        with (
            attempt_deadline(TIMEOUT) as deadline,
            session.request(
                method,
                url,
                json=data,
                headers=dict(place.headers),
                timeout=TIMEOUT,
                stream=True,
                allow_redirects=False,
            ) as answer,
        ):
            raw = bytes(read_body(answer, limits))
            status, headers = answer.status_code, answer.headers
    except AnswerTooLarge:
        raise CommentError(f"{shown}: the answer is over {ANSWER_LIMIT} bytes") from None
    except (TransportError, requests.ReadTimeout):
        raise late from None
    except READ_FAILURES as error:  # the API client's: a connection refused or cut off
        if deadline.expired:
            raise late from None
        raise CommentError(f"{shown}: {redact_and_escape(type(error).__name__)}") from None
    if status >= 300:
        said = _message(raw)
        raise CommentError(f"{shown}: HTTP {status}{': ' + said if said else ''}")
    try:
        return json.loads(raw or b"null"), headers
    except RecursionError:
        raise wrong_shape(shown, "nested too deep") from None
    except ValueError:
        raise CommentError(f"{shown}: HTTP {status} but the answer is not JSON") from None


def wrong_shape(shown: str, what: str) -> CommentError:
    return CommentError(f"{shown} answered JSON of the wrong shape ({what})")


def _message(raw: bytes) -> str:
    try:
        said = json.loads(raw).get("message", "")
    except (ValueError, AttributeError, RecursionError):
        said = raw.decode("utf-8", "replace")
    return cut(redact_and_escape(str(said)), 200)


def _pages(session: requests.Session, place: Place) -> Iterator[dict[str, Any]]:
    for page in range(1, PAGES + 1):
        found, headers = call(session, place, "GET", f"{place.comments}?per_page=100&page={page}")
        if not isinstance(found, list):
            raise wrong_shape(f"GET {place.comments}", "not a list of comments")
        if not all(isinstance(c, dict) for c in found):
            raise wrong_shape(f"GET {place.comments}", "a comment is not an object")
        yield from found
        more = headers.get("X-Next-Page") if place.platform == "gitlab" else None
        if len(found) < 100 or (place.platform == "gitlab" and not more):
            return
    raise CommentError(f"more than {PAGES * 100} comments: the plan comment is not looked for")


def _me(session: requests.Session, place: Place) -> int:
    """GitLab: the token's own user id (refused when the answer has none)."""
    found = call(session, place, "GET", place.me)[0]
    me = positive(found.get("id")) if isinstance(found, dict) else None
    if me is None:
        raise wrong_shape(f"GET {place.me}", "no positive integer user id")
    return me


def _author(comment: Mapping[str, Any], key: str, shown: str) -> Mapping[str, Any]:
    author = comment.get(key)
    if author is None:  # a deleted account
        return {}
    if not isinstance(author, dict):
        raise wrong_shape(shown, f'a comment\'s "{key}" is not an object')
    return author


def find_mine(session: requests.Session, place: Place) -> int | None:
    """The id of this tool's comment (its author the token's, GitHub: ``place.author``)."""
    github = place.platform == "github"
    me: Any = place.author if github else _me(session, place)
    key, field = ("user", "login") if github else ("author", "id")
    shown = f"GET {place.comments}"
    for comment in _pages(session, place):
        text = comment.get("body")
        if not isinstance(text, str | None):
            raise wrong_shape(shown, 'a comment\'s "body" is not a string')
        if _author(comment, key, shown).get(field) == me and MARKER in (text or ""):
            return _id(comment, "id", shown, "comment")
    return None


def _id(found: Mapping[str, Any], key: str, shown: str, what: str) -> int:
    number = positive(found.get(key))
    if number is None:
        raise wrong_shape(shown, f'a {what}\'s "{key}" is not a positive integer')
    return number


def post(place: Place, text: str, session: requests.Session | None = None) -> str:
    """Edit this tool's comment, or add it: says which was done."""
    session = session or session_for(place)
    mine = find_mine(session, place)
    if mine is None:
        call(session, place, "POST", place.comments, {"body": text})
        return "posted"
    method = "PATCH" if place.platform == "github" else "PUT"
    call(session, place, method, place.edit.format(id=mine), {"body": text})
    return "updated"


ADOPT_BRANCH = "reconcile/adopt"
ADOPT_TITLE = "Adopt invite changes made on the platform"
ADOPT_INTRO = (
    "The scheduled drift check found invites that differ from the platform. "
    "`reconcile adopt` wrote the platform's current values into the invite files, "
    "except values merged since the last successful apply (they wait for an apply)."
    "\n\n- **Merge** to keep the platform's values.\n"
    "- **Close** and run a full apply (FULL_APPLY=1) to put git's values back.\n\n"
)


def propose_adopted(
    place: Place,
    files: Mapping[str, str],
    summary: str,
    base: str,
    session: requests.Session | None = None,
) -> str:
    """GitLab: ``files`` (path -> text) committed afresh on reconcile/adopt from ``base``,
    and ONE open merge request of that branch, its description adopt's summary."""
    if place.platform != "gitlab":
        raise ConfigError("--adopt-summary is for GitLab (GitHub: peter-evans/create-pull-request)")
    session = session or session_for(place)
    me = _me(session, place)  # before any write: a token without a user id writes nothing
    project = place.project
    actions = [{"action": "update", "file_path": p, "content": t} for p, t in files.items()]
    commit: dict[str, Any] = {"branch": ADOPT_BRANCH, "start_branch": base, "force": True}
    commit |= {"commit_message": ADOPT_TITLE, "actions": actions}
    call(session, place, "POST", f"{project}/repository/commits", commit)
    description = cut(ADOPT_INTRO + summary, place.limit)
    iid = _adopt_request(session, place, base, me)
    if iid is not None:
        call(session, place, "PUT", f"{project}/merge_requests/{iid}", {"description": description})
        return "updated"
    mr: dict[str, Any] = {"source_branch": ADOPT_BRANCH, "target_branch": base}
    mr |= {"title": ADOPT_TITLE, "remove_source_branch": True, "description": description}
    call(session, place, "POST", f"{project}/merge_requests", mr)
    return "opened"


def _adopt_request(session: requests.Session, place: Place, base: str, me: int) -> int | None:
    """The iid of the open adopt merge request this tool opened: from reconcile/adopt of
    this project (not a fork's branch of that name) to ``base``, by the token's user ``me``."""
    url = f"{place.project}/merge_requests?state=opened&source_branch={ADOPT_BRANCH}"
    found, _ = call(session, place, "GET", url)
    shown = f"GET {url.split('?')[0]}"
    if not isinstance(found, list) or not all(isinstance(mr, dict) for mr in found):
        raise wrong_shape(shown, "not a list of merge requests")
    for mr in found:
        if _is_adopt_request(mr, place.project_id, base, me):
            return _id(mr, "iid", shown, "merge request")
    return None


def _is_adopt_request(mr: Mapping[str, Any], project_id: int, base: str, me: int) -> bool:
    author = mr.get("author")
    return (
        positive(mr.get("source_project_id")) == project_id
        and positive(mr.get("target_project_id")) == project_id
        and mr.get("source_branch") == ADOPT_BRANCH
        and mr.get("target_branch") == base
        and isinstance(author, dict)
        and positive(author.get("id")) == me
    )
