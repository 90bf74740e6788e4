"""GitHub workflow commands: errors shown on the pull request's lines, and the job summary.

https://docs.github.com/actions/reference/workflow-commands-for-github-actions
Values are escaped as the runner unescapes them: `%`, CR and LF everywhere, and
also `:` and `,` in properties, so a message can never end the command early
or start a second one.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

import click

from reconciler.errors import FileProblem, InputError, ReconcilerError
from reconciler.output.repo_paths import repo_relative
from reconciler.safefile import open_for_append
from reconciler.safetext import clean

if TYPE_CHECKING:
    from reconciler.plan.model import Plan

ANNOTATION_CHOICES = ("auto", "github", "none")
GITHUB_ANNOTATIONS = "reconciler.github_annotations"  # the key in click's Context.meta
TITLE = "invite-reconciler"
SUMMARY_LIMIT = 1024 * 1024  # GitHub refuses a step summary over 1 MiB


def github_enabled(choice: str = "auto", env: Mapping[str, str] | None = None) -> bool:
    env = os.environ if env is None else env
    if choice == "auto":
        return env.get("GITHUB_ACTIONS") == "true"
    return choice == "github"


def escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def error_command(
    message: str,
    *,
    title: str = TITLE,
    file: str | None = None,
    line: int | None = None,
    col: int | None = None,
) -> str:
    """One `::error ...::message` line; every outside string is redacted and escaped."""
    props = []
    if file:
        props.append(f"file={escape_property(clean(file))}")
    if file and line:
        props.append(f"line={line}")
        if col:
            props.append(f"col={col}")
    props.append(f"title={escape_property(clean(title))}")
    # Lines are kept (GitHub shows %0A as a line break); what is in them is cleaned.
    text = "\n".join(clean(line) for line in message.splitlines())
    return f"::error {','.join(props)}::{escape_data(text)}"


def input_error_commands(problems: Iterable[FileProblem]) -> list[str]:
    return [
        error_command(
            p.message, file=repo_relative(p.path), line=p.line or None, col=p.column or None
        )
        for p in problems
    ]


def invite_error_commands(errors: Iterable[tuple[str, str]]) -> list[str]:
    """Per-invite API errors, given as (invite id, message)."""
    return [error_command(message, title=invite_id) for invite_id, message in errors]


def emit(commands: list[str]) -> None:
    # Workflow commands are read from stdout and stderr alike; stderr keeps stdout
    # the product (a plan piped into a file stays a plan).
    for command in commands:
        click.echo(command, err=True)


def report_plan(plan: Plan, github: bool, env: Mapping[str, str] | None = None) -> None:
    """Under GitHub: one annotation per invite the plan could not read, and the job summary."""
    if not github:
        return
    # Imported here: the renderer pulls in the plan model, which `validate` never needs.
    from reconciler.output.markdown import MarkdownRenderer

    emit(invite_error_commands((failed.id, failed.message) for failed in plan.failed))
    append_step_summary(MarkdownRenderer().render(plan), env)


def annotate_error(error: ReconcilerError) -> None:
    """The error that ends a run, as annotations: one per input problem, else one."""
    if isinstance(error, InputError):
        emit(input_error_commands(error.problems))
    else:
        emit([error_command(str(error))])


def append_step_summary(markdown: str, env: Mapping[str, str] | None = None) -> None:
    """Append to $GITHUB_STEP_SUMMARY when set; a failure to write is a warning, not a failure."""
    env = os.environ if env is None else env
    path = env.get("GITHUB_STEP_SUMMARY")
    if not path:
        return
    text = markdown if markdown.endswith("\n") else markdown + "\n"
    data = text.encode("utf-8")[:SUMMARY_LIMIT].decode("utf-8", "ignore")
    try:
        # A regular file only: a FIFO there would block the run for ever.
        with os.fdopen(open_for_append(path), "a", encoding="utf-8") as handle:
            handle.write(data)
    except OSError as exc:
        click.echo(
            f"warning: cannot append the plan to GITHUB_STEP_SUMMARY: {exc.strerror}", err=True
        )
