"""Every command-line option, defined once (in the style of pre-commit's `_add_config_option`).

A command takes the options it needs from here, so an option means the same and
reads the same help text wherever it appears. Numeric options convert through
reconciler.settings.config, as the environment and reconciler.yaml do. Each
command's --help ends with the settings it reads (``settings_help``). Without
--auto-approve, a write waits for a person's yes (``ask_first``, ``confirm``).
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import Any, TextIO, TypeVar, cast

import click

from reconciler.desired.state import Selection
from reconciler.errors import ReconcilerError
from reconciler.output.ci import (
    ANNOTATION_CHOICES,
    GITHUB_ANNOTATIONS,
    github_enabled,
    guard_output,
)
from reconciler.output.console import COLOR_CHOICE, COLOR_CHOICES, setup_logging, use_color
from reconciler.service.offline import applied_since
from reconciler.settings.config import (
    ENV_VARS,
    SECRET_ENV,
    SECRET_FILE_ENV,
    Settings,
    SettingType,
    load_settings,
)

F = TypeVar("F", bound=Callable[..., Any])


def together(*decorators: Callable[[Any], Any]) -> Callable[[F], F]:
    """One decorator of several, applied in the order written (the first outermost)."""
    return lambda f: functools.reduce(lambda g, decorator: decorator(g), reversed(decorators), f)


class FilePath(click.Path):
    """A file's path; an empty one is refused rather than read as "not given".

    ``--out "$PLAN_FILE"`` with the variable unset would otherwise save no
    plan, and ``apply --plan ""`` would apply the files instead of a plan.
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(dir_okay=False, **kwargs)

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if value == "":
            self.fail("an empty file name (is a variable unset?)", param, ctx)
        return super().convert(value, param, ctx)


def _decide_color(ctx: click.Context, param: click.Parameter, value: str) -> str:
    # click.echo strips styles unless the context says otherwise: one decision for all output.
    ctx.color = use_color(value)
    ctx.meta[COLOR_CHOICE] = value  # stderr's colour follows the same rule (output/color.py)
    return value


def _decide_annotations(ctx: click.Context, param: click.Parameter, value: str) -> str:
    # Read by cli.main, the one place errors become exit codes (and annotations).
    ctx.meta[GITHUB_ANNOTATIONS] = github_enabled(value)
    if value == "github":  # shown as on a runner, so guarded as on a runner
        guard_output(force=True)
    return value


def _limit(setting: str, text: str, tail: str = ").") -> Callable[[F], F]:
    """A numeric option, converted as the environment and reconciler.yaml are."""
    return click.option(
        f"--{setting.replace('_', '-')}",
        type=SettingType(setting),
        help=f"{text} (env {ENV_VARS[setting]}, setting {setting}{tail}",
    )


config_option = click.option(
    "--config",
    "config_file",
    type=FilePath(),
    help="Config file (default: reconciler.yaml here, else in the nearest directory "
    "above, up to the repository's top).",
)
# Logging is set up as the option is read: no command takes the flag.
verbose_option = click.option(
    "-v",
    "--verbose",
    is_flag=True,
    expose_value=False,
    callback=lambda ctx, param, verbose: setup_logging(verbose),
    help="More detail on stderr (never a secret or token).",
)
sandbox_option = click.option(
    "--sandbox",
    is_flag=True,
    help="Use an in-process sandbox seeded with the bundled example state, instead of "
    "the configured API (nothing real is read or changed).",
)
auto_approve_option = click.option(
    "--auto-approve", is_flag=True, help="Do not ask for confirmation."
)
audit_log_option = click.option(
    "--audit-log",
    type=FilePath(),
    help="Append one JSON line per write attempted to this file "
    f"(env {ENV_VARS['audit_log']}, setting audit_log).",
)
color_option = click.option(
    "--color",
    type=click.Choice(COLOR_CHOICES),
    default="auto",
    show_default=True,
    callback=_decide_color,
    help="Colour on stdout; auto: a terminal, NO_COLOR unset or empty, TERM not dumb.",
)
annotations_option = click.option(
    "--annotations",
    type=click.Choice(ANNOTATION_CHOICES),
    default="auto",
    show_default=True,
    callback=_decide_annotations,
    help="Also print errors as GitHub workflow commands (::error file=...), so they show "
    "on the pull request; auto: when GITHUB_ACTIONS=true.",
)
plan_format_option = click.option(
    "--format",
    "output_format",
    type=click.Choice(["text", "json", "markdown"]),
    default="text",
    show_default=True,
    help="How the plan is printed on stdout.",
)
paths_argument = click.argument("paths", nargs=-1, type=click.Path())
# --target and --exclude: invites of the files picked by id.
target_options = together(
    click.option(
        "--target", "targets", multiple=True, metavar="ID", help="Only this invite (repeatable)."
    ),
    click.option(
        "--exclude",
        "excludes",
        multiple=True,
        metavar="ID",
        help="Leave this invite out (repeatable).",
    ),
)
changed_since_applied_option = click.option(
    "--changed-since-applied",
    is_flag=True,
    help="--changed-since the last successful apply: the commit the branch "
    "reconcile/applied of origin is at, trusted only on main's first-parent history "
    "(env RECONCILER_APPLIED_BRANCH, RECONCILER_MAIN_BRANCH, RECONCILER_GIT_REMOTE). "
    "None yet: every invite, with a notice; not trusted: every invite, with a warning "
    "(adopt refuses it, exit 1); a later commit of main than HEAD: nothing to do, exit 0.",
)
parallelism_option = _limit(
    "parallelism",
    "Requests in flight, at most N, 1-256",
    "; default: max_parallelism, 64); fewer while the rate the server allows keeps fewer busy.",
)


@dataclass(frozen=True)
class RunOptions:
    """What plan and apply share: which invites, from where, against which API, shown how."""

    paths: tuple[str, ...]
    config_file: str | None
    targets: tuple[str, ...]
    excludes: tuple[str, ...]
    changed_since: str | None
    changed_since_applied: bool
    parallelism: int | None
    max_rate: float | None
    max_changes: int | None
    max_resends: int | None
    sandbox: bool
    color: str
    annotations: str

    def settings(self, **overrides: Any) -> Settings:
        """The settings of the run: its config file, then its own options."""
        limits = ("parallelism", "max_rate", "max_changes", "max_resends")
        mine = {name: getattr(self, name) for name in limits}
        return load_settings(self.config_file).with_overrides(**mine, **overrides)

    def selection(self, action: str) -> Selection:
        """The invites the run is about: --target, --exclude, --changed-since (-applied)."""
        changed_since = applied_since(self.changed_since, self.changed_since_applied, action=action)
        return Selection(self.targets, self.excludes, changed_since)


_RUN_FIELDS = tuple(field.name for field in fields(RunOptions))


# What each limit does, said as each command does it (cli.md: plan fails, apply refuses).
_LIMITS = {
    "plan": (
        "Fail (exit 1) when the plan updates more invites than this",
        "Fail (exit 1) when the plan e-mails more invitations again than this",
    ),
    "apply": (
        "Refuse to apply a plan that updates more invites than this",
        "Refuse to apply a plan that e-mails more invitations again than this",
    ),
}


def run_options(command: str) -> Callable[[F], F]:
    """Options of plan and apply that pick invites and shape the run, passed as `run`;
    ``command``: which of the two, for the help of the limits."""
    changes, resends = _LIMITS[command]

    def decorate(f: F) -> F:
        @functools.wraps(f)
        def with_run(**kwargs: Any) -> Any:
            run = RunOptions(**{name: kwargs.pop(name) for name in _RUN_FIELDS})
            return f(run=run, **kwargs)

        # functools.wraps keeps f's name and doc but not its type: F is what click sees.
        return together(
            paths_argument,
            config_option,
            target_options,
            click.option(
                "--changed-since",
                metavar="REF",
                help="Only the fields whose YAML value differs between git REF and the "
                "working tree, field by field (an entry added since REF: all its fields); "
                "a field the platform changed meanwhile is a conflict.",
            ),
            changed_since_applied_option,
            parallelism_option,
            _limit(
                "max_rate",
                "Requests per second at most, all together",
                "; default: none, the rate the server's answers allow): a gateway's limit, "
                "where crossing it blocks the client for seconds.",
            ),
            _limit("max_changes", changes),
            _limit("max_resends", resends),
            sandbox_option,
            color_option,
            annotations_option,
            verbose_option,
        )(cast(F, with_run))

    return decorate


# What a command's --help says of the settings it reads: the environment variables and the
# reconciler.yaml keys, and which wins.
_API_SETTINGS = (
    "base_url",
    "client_id",
    "scope",
    "token_auth_method",
    "parallelism",
    "max_parallelism",
    "max_rate",
    "timeout",
    "max_response_bytes",
)
_API_FILE_ONLY = ("max_attempts", "retry_max_seconds", "token_path", "*_invite_path", "field_names")
RUN_ENV = ("NO_COLOR", "TERM", "GITHUB_ACTIONS", "GITHUB_STEP_SUMMARY")


def settings_help(
    *,
    api: bool,
    reads_paths: bool = False,
    extra: tuple[str, ...] = (),
    other_env: tuple[str, ...] = (),
) -> str:
    """The epilog of a command's --help: the environment and reconciler.yaml settings it reads."""
    keys = [*(_API_SETTINGS if api else ()), *extra]
    env = [ENV_VARS[key] for key in keys if key in ENV_VARS]
    if api:
        env.insert(2, f"{SECRET_ENV} (or {SECRET_FILE_ENV})")
    settings = [*(["paths"] if reads_paths else []), *keys, *(_API_FILE_ONLY if api else ())]
    lines = ["Environment: " + ", ".join([*env, *other_env]) + "."] if env or other_env else []
    lines.append("reconciler.yaml (or --config): " + ", ".join(settings) + ".")
    if api:
        lines.append("Options win over the environment, which wins over the file.")
    return "\n\n".join(lines)


# Asking before a write: yes from a person at a terminal, never from silence.


def _is_terminal(stream: TextIO | None) -> bool:
    try:  # None: started with it closed; an error: closed or detached under us
        return stream is not None and stream.isatty()
    except (OSError, ValueError):
        return False


def _refusing(action: str, why: str, instead: str) -> ReconcilerError:
    return ReconcilerError(
        f"refusing to {action} without confirmation: {why}; pass --auto-approve{instead}"
    )


def ask_first(*, action: str, instead: str = "") -> bool:
    """Refuse at once, before any work, when nobody could answer the question (stdin is no
    terminal: a CI job without --auto-approve fails in a second) or see what it is about;
    whether that must be shown on stderr as well as stdout (only stderr is a terminal:
    `reconcile apply > apply.txt`)."""
    if not _is_terminal(sys.stdin):
        raise _refusing(action, "standard input is not a terminal", instead)
    if _is_terminal(sys.stdout):
        return False
    if _is_terminal(sys.stderr):
        return True
    raise _refusing(
        action,
        "neither stdout nor stderr is a terminal, so what you would be asked about could "
        "not be seen",
        instead,
    )


def confirm(question: str, *, action: str, instead: str = "") -> None:
    """Go on only when a person at a terminal answers yes to ``question``: silence is no
    yes. ``action`` names what is refused ("apply"); ``instead`` offers another way."""
    if not _is_terminal(sys.stdin):
        raise _refusing(action, "standard input is not a terminal", instead)
    # On stderr, unless only stdout is a terminal (`reconcile apply 2> errors.txt`): a
    # question asked into a file leaves the person waiting in silence.
    err = _is_terminal(sys.stderr) or not _is_terminal(sys.stdout)
    try:
        if err:
            yes = click.confirm(question, default=False, err=True)
        else:  # input() at a terminal writes its prompt to fd 2: the question is ours to write
            click.echo(f"{question} [y/N]: ", nl=False)
            yes = click.confirm("", default=False, prompt_suffix="", show_default=False)
    except click.Abort:  # Ctrl-C or end of input at the prompt: click would say `Aborted.`
        click.echo("", err=err)  # the prompt's line ends here, not in the next message
        raise ReconcilerError(
            f"{action} cancelled at the prompt (Ctrl-C or end of input); nothing was changed"
        ) from None
    if not yes:
        raise ReconcilerError(f"{action} cancelled; nothing was changed")
