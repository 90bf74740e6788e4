"""The `reconcile` command. Every failure becomes one exit code, here and only here.

`main()` returns the exit code; the console script and `python -m reconciler`
hand it to the interpreter (`raise SystemExit(main())`), as pre-commit does.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

import click

from reconciler import __version__
from reconciler.annotations import GITHUB_ANNOTATIONS, annotate_error
from reconciler.commands.apply import apply
from reconciler.commands.export import export
from reconciler.commands.plan import plan
from reconciler.commands.resend import resend
from reconciler.commands.sandbox import sandbox
from reconciler.commands.schema import schema
from reconciler.commands.show import show
from reconciler.commands.validate import validate
from reconciler.errors import InputError, ReconcilerError
from reconciler.render.common import plural
from reconciler.safetext import clean

EXIT_OK = 0
EXIT_FAILURE = 1  # cli.md: 2 is kept for `plan --detailed-exitcode` alone


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="reconcile")
def cli() -> None:
    """Keep KYB business invites in git: validate, plan and apply changes.

    Run `reconcile COMMAND --help` for a command's options and the environment
    variables and reconciler.yaml settings it reads.
    """


for command in (validate, plan, apply, export, show, resend, sandbox, schema):
    cli.add_command(command)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line ``argv`` (default: the process's) and return its exit code."""
    meta: dict[str, object] = {}  # shared by every context of this run: options leave notes
    try:
        with cli.make_context("reconcile", list(sys.argv[1:] if argv is None else argv)) as ctx:
            meta = ctx.meta
            result = cli.invoke(ctx)
    except ReconcilerError as exc:
        if meta.get(GITHUB_ANNOTATIONS):
            annotate_error(exc)
        return _report(exc)
    except click.exceptions.NoArgsIsHelpError as exc:  # `reconcile` alone: help, success
        click.echo(exc.ctx.get_help())
        return EXIT_OK
    except click.exceptions.Exit as exc:  # --help, --version
        return EXIT_FAILURE if exc.exit_code else EXIT_OK
    except click.ClickException as exc:
        # Usage errors included: click would exit 2, which cli.md keeps for "changes pending".
        exc.message = _shown(exc.message)  # it may quote an argument as typed
        exc.show()
        return EXIT_FAILURE
    except click.Abort:
        click.echo("Aborted.", err=True)
        return EXIT_FAILURE
    except KeyboardInterrupt:
        click.echo("\nInterrupted.", err=True)
        return EXIT_FAILURE
    except BrokenPipeError:
        return EXIT_FAILURE
    return result if isinstance(result, int) else EXIT_OK


def _report(exc: ReconcilerError) -> int:
    if isinstance(exc, InputError):
        click.echo(str(exc), err=True)
        click.echo(f"Found {plural(len(exc.problems), 'problem')}; nothing was sent.", err=True)
    else:  # ApiError included
        click.echo(f"error: {_shown(str(exc))}", err=True)
    return EXIT_FAILURE


def _shown(message: str) -> str:
    """``message`` fit for a terminal: a path, ref or value from outside may be in it.

    Line by line, so a message of several lines keeps its shape; escaping is
    idempotent on what the modules escaped already.
    """
    return "\n".join(clean(line) for line in message.split("\n"))


# In-process callers (tests, embedding) have used this name; it is main().
run = main
