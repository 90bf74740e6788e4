"""`reconcile comment`: the plan as the one sticky comment of this pull request or merge
request. The rules are reconciler.output.comment's."""

from __future__ import annotations

import os

import click

from reconciler.commands.options import FilePath
from reconciler.errors import ConfigError
from reconciler.files import TooLarge, read_regular
from reconciler.output.comment import (
    ADOPT_BRANCH,
    AUTHOR_ENV,
    DEFAULT_AUTHOR,
    MARKER,
    TOKEN_ENV,
    CommentError,
    body,
    place_from_env,
    post,
    propose_adopted,
)
from reconciler.safetext import escape

_PLAN_LIMIT = 16 * 1024 * 1024  # bytes of the plan's Markdown read; the comment is cut anyway


@click.command(
    epilog=(
        f"Environment: {TOKEN_ENV} (GitHub: the job's token with pull-requests: write; "
        "GitLab: a project access token, role Reporter, scope api); "
        f"{AUTHOR_ENV} (GitHub: the login of the token, whose comment is this tool's; default "
        f"{DEFAULT_AUTHOR}, the job's token; set it for an app's or a personal token); "
        "GitHub: GITHUB_API_URL, GITHUB_REPOSITORY, GITHUB_EVENT_PATH, GITHUB_SERVER_URL, "
        "GITHUB_RUN_ID; GitLab: "
        "CI_API_V4_URL, CI_PROJECT_ID, CI_MERGE_REQUEST_IID, CI_JOB_URL, CI_COMMIT_SHA. "
        "Only that API is called."
    )
)
@click.argument("files", nargs=-1, type=FilePath())
@click.option(
    "--markdown",
    type=FilePath(),
    metavar="FILE",
    help="The plan as `plan --format markdown` wrote it (missing: no plan shown).",
)
@click.option(
    "--exitcode",
    type=click.IntRange(0, 255),
    help="The exit code of `reconcile plan --detailed-exitcode`: 0, 2 or a failure.",
)
@click.option(
    "--validate-failed",
    is_flag=True,
    help="Say that validation failed and no plan was made (in place of an older plan).",
)
@click.option(
    "--adopt-summary",
    type=FilePath(),
    metavar="FILE",
    help=f"GitLab: commit FILES (what adopt wrote) to {ADOPT_BRANCH} and open or update "
    "ONE merge request of it, with FILE (adopt's --summary) as its description.",
)
def comment(
    files: tuple[str, ...],
    markdown: str | None,
    exitcode: int | None,
    validate_failed: bool,
    adopt_summary: str | None,
) -> int:
    """Post the plan as ONE comment of this pull request (GitHub) or merge request (GitLab).

    The comment this tool posted before (found by its marker) is edited, so the pull
    request shows one plan, the latest. A plan longer than the platform allows is cut,
    with a link to the run.
    """
    if adopt_summary:
        return _propose(adopt_summary, files)
    if exitcode is None and not validate_failed:
        raise ConfigError("give --exitcode (the plan's) or --validate-failed")
    place = place_from_env()
    plan = _text(markdown) if markdown else ""
    try:
        done = post(place, body(place, plan, exitcode, validate_failed=validate_failed))
    except CommentError as error:
        raise CommentError(f"could not post the plan comment: {error}") from None
    click.echo(f"The plan comment ({MARKER}) is {done}.")
    return 0


def _text(path: str, missing_ok: bool = True) -> str:
    try:
        return read_regular(path, _PLAN_LIMIT).decode("utf-8", "replace")
    except TooLarge:
        raise ConfigError(f"{escape(path)}: larger than 16 MiB") from None
    except FileNotFoundError:
        if missing_ok:
            return ""
        raise ConfigError(f"{escape(path)}: no such file") from None
    except OSError as error:
        raise ConfigError(f"{escape(path)}: {error.strerror}") from None


def _propose(summary: str, files: tuple[str, ...]) -> int:
    if not files:
        raise ConfigError("--adopt-summary needs the files adopt changed (git diff --name-only)")
    place = place_from_env(pull=False)
    base = os.environ.get("CI_DEFAULT_BRANCH") or "main"
    adopted = {f: _text(f, missing_ok=False) for f in files}
    try:
        done = propose_adopted(place, adopted, _text(summary), base)
    except CommentError as error:
        raise CommentError(f"could not propose the adopted values: {error}") from None
    click.echo(f"Proposed the adopted values on the branch {ADOPT_BRANCH}: merge request {done}.")
    return 0
