"""The `reconcile` command. Every failure becomes one exit code, here and only here.

`main()` returns the exit code; the console script and `python -m reconciler`
hand it to the interpreter (`raise SystemExit(main())`), as pre-commit does.
"""

from __future__ import annotations

import codecs
import functools
import importlib
import os
import sys
from collections.abc import Mapping, Sequence

import click

from reconciler import __version__
from reconciler.errors import InputError, ReconcilerError
from reconciler.output import stop_writing_to_stdout
from reconciler.output.ci import (
    GITHUB_ANNOTATIONS,
    annotate_error,
    guard_output,
    release_output,
)
from reconciler.output.console import echo_err, echo_problem
from reconciler.safetext import plural, redact_and_escape, redact_and_escape_lines

EXIT_OK = 0
EXIT_FAILURE = 1  # 2 is kept for `plan --detailed-exitcode` alone (docs/plans.md, Exit codes)


# One example per command, shown at the end of its --help.
EXAMPLES = {
    "validate": "reconcile validate invites/",
    "plan": "reconcile plan --sandbox examples/invites\n"
    "reconcile plan --detailed-exitcode --changed-since origin/main --out plan.json",
    "apply": "reconcile apply --auto-approve --audit-log audit.jsonl --changed-since HEAD~1\n"
    "reconcile apply --plan plan.json",
    "applied": "reconcile applied show\n"
    "reconcile apply --auto-approve --changed-since-applied && reconcile applied advance HEAD",
    "comment": "reconcile comment --markdown plan.md --exitcode 2",
    "show": "reconcile show plan.json --format markdown",
    "export": "reconcile export inv_8f2k1 inv_3m9q7 --out invites/acme.yaml",
    "adopt": "reconcile adopt invites/ --target inv_8f2k1",
    "resend": "reconcile resend inv_8f2k1 --audit-log audit.jsonl",
    "sandbox": "reconcile sandbox --port 8787",
    "schema": "reconcile schema > schemas/invites.schema.json",
}
# Each command lives in reconciler.commands.<name>, as a click command of that name, in
# the order of the workflow, which `reconcile --help` keeps.
COMMANDS = tuple(EXAMPLES)
COMPLETE_VAR = "_RECONCILE_COMPLETE"  # click's shell completion: see docs/commands.md


class LazyGroup(click.Group):
    """Imports a command's module only when that command runs or help lists it.

    `--version`, `validate` and `schema` then never load requests, which costs most
    of the start-up. The list of commands shows each summary whole (``_command``).
    """

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(COMMANDS)  # the workflow's order, not the alphabet's

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        return _command(cmd_name) if cmd_name in COMMANDS else None

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        try:
            return super().resolve_command(ctx, args)
        except click.exceptions.NoSuchCommand as exc:
            # click suggests from self.commands, empty here: suggest from the names.
            raise click.exceptions.NoSuchCommand(
                exc.command_name, possibilities=COMMANDS, ctx=exc.ctx
            ) from None


_COMMAND = "reconciler.command"  # ctx.meta key: the subcommand this run invoked
_NEVER_SENDS = frozenset({"validate", "schema", "show"})  # "nothing was sent" would mislead


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="reconcile")
@click.pass_context
def cli(ctx: click.Context) -> None:
    """Keep KYB business invites in git: validate, plan and apply changes.

    It changes invites that already exist on the platform. It never creates,
    deletes or revokes one: removing an entry from the files only stops
    managing that invite (`reconcile export ID` brings an existing one under git).

    Run `reconcile COMMAND --help` for a command's options and the environment
    variables and reconciler.yaml settings it reads.
    """
    command = ctx.invoked_subcommand
    ctx.meta[_COMMAND] = command  # the closing line of input problems depends on it
    if sys.stdout is None and command != "validate":  # its product is not on stdout
        # Started with stdout closed (`>&-`): plans, results and e-mails sent would be
        # reported to nobody. Nothing is read or written; the run fails.
        raise ReconcilerError(
            f"cannot write the output: stdout is closed; `reconcile {command}` reports "
            "on stdout, so it did not run: nothing was read or changed"
        )


@functools.cache  # once per run: the example is added to the epilog once
def _command(name: str) -> click.Command:
    command: click.Command = getattr(importlib.import_module(f"reconciler.commands.{name}"), name)
    lines = EXAMPLES[name].split("\n")
    title = "Examples:" if len(lines) > 1 else "Example:"
    shown = "\n".join(["\b", title, *(f"  {line}" for line in lines)])
    command.epilog = f"{shown}\n\n{command.epilog}" if command.epilog else shown
    # Whole in `reconcile --help`: click would cut it at the line's width.
    command.short_help = command.get_short_help_str(limit=1000)
    return command


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line ``argv`` (default: the process's) and return its exit code."""
    if argv is None and os.environ.get(COMPLETE_VAR):
        return _complete()
    guard_output()  # under GitHub Actions: no outside text can speak to the runner
    try:
        return _main(argv)
    finally:
        release_output()


def _main(argv: Sequence[str] | None) -> int:
    meta: dict[str, object] = {}  # shared by every context of this run: options leave notes
    _hold_closed_streams()
    try:
        with cli.make_context("reconcile", list(sys.argv[1:] if argv is None else argv)) as ctx:
            meta = ctx.meta
            result = cli.invoke(ctx)
            if sys.stdout is not None:  # None when started with stdout closed (`>&-`)
                sys.stdout.flush()  # here, where a closed pipe is handled, not at exit
        return result if isinstance(result, int) else EXIT_OK
    except (ReconcilerError, click.ClickException, click.exceptions.Exit) as exc:
        return _refused(exc, meta)
    except KeyboardInterrupt:
        click.echo("\nInterrupted.", err=True)
    except BrokenPipeError:
        stop_writing_to_stdout()
    except UnicodeEncodeError as exc:  # stdout in Latin-1, say, and a name in Japanese
        _unencodable(exc, meta)
    except OSError as exc:  # mostly the output itself failed (`>/dev/full`)
        _os_error(exc, meta)
    except Exception as exc:  # a bug of ours: a traceback would quote outside text unescaped
        _internal_error(exc, meta)
    return EXIT_FAILURE


def _refused(
    exc: ReconcilerError | click.ClickException | click.exceptions.Exit,
    meta: Mapping[str, object],
) -> int:
    """Our own error, or click's (a usage error, --help, --version), said."""
    if isinstance(exc, ReconcilerError):
        if meta.get(GITHUB_ANNOTATIONS):
            annotate_error(exc)
        return _report(exc, meta)
    if isinstance(exc, click.exceptions.NoArgsIsHelpError):  # `reconcile` alone: help, success
        click.echo(exc.ctx.get_help())
        return EXIT_OK
    if isinstance(exc, click.exceptions.Exit):  # --help, --version
        return EXIT_FAILURE if exc.exit_code else EXIT_OK
    # Usage errors included: click would exit 2, which means "changes pending" here.
    # It may quote an argument as typed. click's stubs mark message Final, yet its
    # show() reads this attribute: rewriting it is how the quoted text gets escaped.
    exc.message = redact_and_escape_lines(exc.message)  # type: ignore[misc]
    exc.show()
    return EXIT_FAILURE


def _unencodable(exc: UnicodeEncodeError, meta: Mapping[str, object]) -> None:
    try:  # by its codec's name (`iso8859-1` for latin-1)
        encoding = codecs.lookup(sys.stdout.encoding).name
    except (AttributeError, LookupError, TypeError):
        encoding = None
    if encoding is None or codecs.lookup(exc.encoding).name != encoding:
        raise exc  # not stdout's encoding: not this message's to word
    char = f"U+{ord(exc.object[exc.start]):04X}"
    echo_err(
        f"error: cannot write the output: stdout's encoding ({encoding}) cannot hold "
        f"{char}; run with a UTF-8 locale (LANG=C.UTF-8) or PYTHONIOENCODING=utf-8",
        meta,
    )


def _os_error(exc: OSError, meta: Mapping[str, object]) -> None:
    reason = redact_and_escape_lines(exc.strerror or str(exc))
    if exc.filename is not None:  # a file the modules did not wrap: name it
        echo_err(f"error: {redact_and_escape_lines(str(exc.filename))}: {reason}", meta)
    else:
        stop_writing_to_stdout()
        echo_err(f"error: cannot write the output: {reason}", meta)


def _internal_error(exc: Exception, meta: Mapping[str, object]) -> None:
    text = redact_and_escape(f"{type(exc).__name__}: {exc}")[:500]
    echo_err(
        f"error: internal error ({text}); this is a bug in reconcile, please report it. "
        "A write it was making may or may not have reached the platform: `reconcile plan` "
        "shows what the platform holds now",
        meta,
    )


def _complete() -> int:
    """Shell completion, by click's own mechanism (``_RECONCILE_COMPLETE=bash_source``).

    click's ``main()`` runs it before parsing; this ``main()`` parses by itself, so
    it hands over here, as click would.
    """
    from click.shell_completion import shell_complete

    instruction = os.environ[COMPLETE_VAR]
    try:
        return shell_complete(cli, {}, "reconcile", COMPLETE_VAR, instruction)
    except click.ClickException as exc:
        exc.show()
        return EXIT_FAILURE


def _hold_closed_streams() -> None:
    """Keep a closed stdout or stderr's descriptor taken, by /dev/null.

    Started with `>&-`, fd 1 is free: the next file opened (the audit log, a plan)
    would get it, and anything written to "stdout" by a child process (git) would
    land in that file. sys.stdout stays None, so the run still knows stdout is gone.
    """
    for fd in (1, 2):
        try:
            os.fstat(fd)
        except OSError:
            devnull = os.open(os.devnull, os.O_WRONLY)
            if devnull != fd:
                os.dup2(devnull, fd)
                os.close(devnull)


def _report(exc: ReconcilerError, meta: Mapping[str, object]) -> int:
    command = meta.get(_COMMAND)
    if isinstance(exc, InputError):
        for problem in exc.problems:
            echo_problem(problem, meta)
        errors = len(exc.errors)
        warnings = len(exc.problems) - errors
        also = f" and {plural(warnings, 'warning')}" if warnings else ""
        sent = "." if command in _NEVER_SENDS else "; nothing was sent."
        click.echo(f"Found {plural(errors, 'problem')}{also}{sent}", err=True)
    else:  # ApiError included
        echo_err(f"error: {redact_and_escape_lines(str(exc))}", meta)
    return EXIT_FAILURE


# In-process callers (tests, embedding) have used this name; it is main().
run = main
