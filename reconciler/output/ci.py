"""What CI shows of a run: errors on a change's lines, and the job summary.

GitHub: workflow commands (below) and the step summary. GitLab: a Code Quality report
(``writing_codequality``), input errors shown on the merge request's diff,
https://docs.gitlab.com/ci/testing/code_quality/#code-quality-report-format

https://docs.github.com/actions/reference/workflow-commands-for-github-actions
Values are escaped as the runner unescapes them: `%`, CR and LF everywhere, and
also `:` and `,` in properties, so a message can never end the command early
or start a second one.

The runner reads every line of a step's output for commands: a line that starts
with `::` (after any spaces) is one, and so is any line with `##[` anywhere in it
(the older form). A file name, a value or a server's message can be anything a
pull request or a server chose (`::stop-commands::x.yaml`), so under GitHub
Actions stdout and stderr go through ``RunnerGuard``: no line but the tool's own
commands starts with `::`, and `##[` never reaches the runner whole.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import stat
import sys
import threading
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import click

from reconciler.errors import FileProblem, InputError, ReconcilerError
from reconciler.files import open_append, refuse_special_file, write_output
from reconciler.git import repo_relative
from reconciler.model.invite import SourceLocation
from reconciler.output.console import echo_err
from reconciler.safetext import redact_and_escape

if TYPE_CHECKING:
    from reconciler.plan.model import Plan

ANNOTATION_CHOICES = ("auto", "github", "none")
GITHUB_ANNOTATIONS = "reconciler.github_annotations"  # the key in click's Context.meta
TITLE = "invite-reconciler"
SUMMARY_LIMIT = 1024 * 1024  # GitHub refuses a step summary over 1 MiB


def github_enabled(choice: str = "auto", env: Mapping[str, str] | None = None) -> bool:
    if choice == "auto":
        return (os.environ if env is None else env).get("GITHUB_ACTIONS") == "true"
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
    command: str = "error",
) -> str:
    """One `::error ...::message` line (`::warning` with ``command="warning"``); every
    outside string is redacted and escaped."""
    props = []
    if file:
        props.append(f"file={escape_property(redact_and_escape(file))}")
    if file and line:
        props.append(f"line={line}")
        if col:
            props.append(f"col={col}")
    props.append(f"title={escape_property(redact_and_escape(title))}")
    # Lines are kept (GitHub shows %0A as a line break); what is in them is redacted and escaped.
    text = "\n".join(redact_and_escape(line) for line in message.splitlines())
    # The runner reads `##[` anywhere in a line, its own commands' lines too.
    written = f"::{command} {','.join(props)}::{escape_data(text)}"
    return written.replace(_LEGACY, _LEGACY_SHOWN)


def input_error_commands(problems: Iterable[FileProblem]) -> list[str]:
    return [
        error_command(
            p.message, file=repo_relative(p.path), line=p.line, col=p.column, command=p.severity
        )
        for p in problems
    ]


def invite_error_commands(
    errors: Iterable[tuple[str, str, SourceLocation | None]],
) -> list[str]:
    """Per-invite API errors, given as (invite id, message, source): annotated at the entry
    (``file=``, ``line=``) when its line is known, as input errors are."""
    return [
        error_command(message, title=invite_id, file=repo_relative(source.path), line=source.line)
        if source is not None and source.path and source.line >= 1
        else error_command(message, title=invite_id)
        for invite_id, message, source in errors
    ]


def emit(commands: list[str]) -> None:
    # Workflow commands are read from stdout and stderr alike; stderr keeps stdout
    # the product (a plan piped into a file stays a plan).
    stream = sys.stderr
    if stream is None:  # stderr closed (2>&-): nobody reads the commands
        return
    for command in commands:
        if isinstance(stream, RunnerGuard):
            stream.write_command(command)
        else:
            click.echo(command, err=True)


# -- the guard ---------------------------------------------------------------------------

_LEGACY = "##["  # the runner's older command form, matched anywhere in a line
# Shown instead: escaped as the tool shows unsafe characters, and in a JSON string
# (`plan --format json | jq`) the very same text.
_LEGACY_SHOWN = "#\\u0023["
_LINE_MARK = "| "  # put before a line that would start with `::`
_LINE_ENDS = re.compile(r"(?<=[\r\n])")  # the runner ends a line at CR or LF


def neutralized(line: str) -> str:
    """``line`` (without its end) as the runner must see it when it is not one of ours."""
    line = line.replace(_LEGACY, _LEGACY_SHOWN)
    return _LINE_MARK + line if line.lstrip().startswith("::") else line


class RunnerGuard(io.TextIOBase):
    """A text stream in front of stdout or stderr that no outside text can use to speak to
    the runner. Lines are passed on whole, once ended (CR or LF), through ``neutralized``;
    the tool's own commands go through ``write_command``. A line still open when the run
    ends is passed on by ``release_output``.
    """

    def __init__(self, stream: Any) -> None:
        super().__init__()
        self.stream = stream
        self._open_line = ""
        self._lock = threading.RLock()  # workers and the interrupt handler write too

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return str(getattr(self.stream, "encoding", None) or "utf-8")

    @property
    def errors(self) -> str | None:  # type: ignore[override]
        return getattr(self.stream, "errors", None) or "strict"

    def writable(self) -> bool:
        return True

    def isatty(self) -> bool:
        return bool(self.stream.isatty())

    def fileno(self) -> int:
        return int(self.stream.fileno())

    def write(self, text: str) -> int:
        if not isinstance(text, str):  # click asks with b"" whether this is a binary stream
            raise TypeError(f"write() argument must be str, not {type(text).__name__}")
        with self._lock:
            *ended, self._open_line = _LINE_ENDS.split(self._open_line + text)
            if ended:
                self.stream.write("".join(neutralized(line[:-1]) + line[-1] for line in ended))
        return len(text)

    def write_command(self, command: str) -> None:
        """One of the tool's own workflow commands, on a line of its own."""
        with self._lock:
            self._end_open_line()
            self.stream.write(command + "\n")
            self.stream.flush()

    def flush(self) -> None:
        self.stream.flush()  # a line still open waits for its end: its start is not known yet

    def finish(self) -> None:
        with self._lock:
            self._end_open_line("")
            self.stream.flush()

    def _end_open_line(self, end: str = "\n") -> None:
        if self._open_line:
            self.stream.write(neutralized(self._open_line) + end)
            self._open_line = ""


_GUARDED: list[tuple[str, Any]] = []  # (name in sys, the stream it replaced)


def guard_output(env: Mapping[str, str] | None = None, *, force: bool = False) -> None:
    """Put a ``RunnerGuard`` in front of stdout and stderr when a GitHub runner reads them.

    Under ``GITHUB_ACTIONS=true`` (or ``force``, for `--annotations github`). A
    terminal, a closed stream and a regular file (`> plan.md`: the product, which
    the runner does not read) are left alone. Idempotent; ``release_output`` undoes it.
    """
    env = os.environ if env is None else env
    if not force and env.get("GITHUB_ACTIONS") != "true":
        return
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        if stream is None or isinstance(stream, RunnerGuard) or _unread_by_runner(stream):
            continue
        _GUARDED.append((name, stream))
        setattr(sys, name, RunnerGuard(stream))


def release_output() -> None:
    """Pass on what the guards still hold and put the streams back."""
    while _GUARDED:
        name, stream = _GUARDED.pop()
        guard = getattr(sys, name)
        try:
            if isinstance(guard, RunnerGuard):
                guard.finish()
        except (OSError, ValueError):
            pass  # the output is gone; main() has already said so
        finally:
            setattr(sys, name, stream)


def _unread_by_runner(stream: Any) -> bool:
    """A terminal, or a regular file: not the runner's log."""
    try:
        return bool(stream.isatty()) or stat.S_ISREG(os.fstat(stream.fileno()).st_mode)
    except (AttributeError, OSError, ValueError, io.UnsupportedOperation):
        return False  # no file behind it (captured in a test): treated as the log


def report_plan(plan: Plan, github: bool, env: Mapping[str, str] | None = None) -> None:
    """Under GitHub: one annotation per invite the plan could not read, and the job summary."""
    if not github:
        return
    # Imported here: the renderer pulls in the plan model, which `validate` never needs.
    from reconciler.output.markdown import MarkdownRenderer

    emit(invite_error_commands((f.id, f.message, f.source) for f in plan.failed))
    append_step_summary(MarkdownRenderer().render(plan), env)


def annotate_error(error: ReconcilerError) -> None:
    """The error that ends a run, as annotations: one per input problem (and the problems
    in the job summary), else one."""
    if isinstance(error, InputError):
        report_problems(error.problems)
    else:
        emit([error_command(str(error))])


def report_problems(problems: list[FileProblem], env: Mapping[str, str] | None = None) -> None:
    """Input problems, errors or warnings, as annotations and in the job summary."""
    from reconciler.output.markdown import problems_markdown  # the plan's renderer's module

    emit(input_error_commands(problems))
    shown = [p._replace(path=repo_relative(p.path)) for p in problems]
    append_step_summary(problems_markdown(shown), env)


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
        fd = open_append(path, private=False, follow_symlinks=True)
        with os.fdopen(fd, "a", encoding="utf-8") as handle:
            handle.write(data)
    except OSError as exc:
        echo_err(f"warning: cannot append the plan to GITHUB_STEP_SUMMARY: {exc.strerror}")


# GitLab Code Quality.

CHECK_NAME = "invite-reconciler/validate"


def report_entry(problem: FileProblem) -> dict[str, Any]:
    path, message = (
        redact_and_escape(repo_relative(problem.path)),
        redact_and_escape(problem.message),
    )
    # Same problem at the same place, same fingerprint: GitLab compares reports by it.
    digest = hashlib.sha256(f"{path}\0{problem.line}\0{message}".encode()).hexdigest()
    return {
        "description": message,
        "check_name": CHECK_NAME,
        "fingerprint": digest,
        "severity": "major" if problem.is_error else "minor",
        "location": {"path": path, "lines": {"begin": max(problem.line, 1)}},
    }


def render_report(problems: Iterable[FileProblem]) -> str:
    return json.dumps([report_entry(p) for p in problems], indent=2, ensure_ascii=False) + "\n"


@contextmanager
def writing_codequality(path: str | None) -> Iterator[list[FileProblem]]:
    """Write a Code Quality report of the input errors raised inside, with the warnings
    put in the list it gives (an empty report if none).

    A FIFO or device at ``path`` is refused before anything is read; the report is
    written whole, by rename.
    """
    what = "the Code Quality report"
    if path:
        refuse_special_file(path, what)
    warnings: list[FileProblem] = []
    try:
        yield warnings
    except InputError as error:
        if path:
            write_output(path, render_report(error.problems), what)
        raise
    if path:
        write_output(path, render_report(warnings), what)
