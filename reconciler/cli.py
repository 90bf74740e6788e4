"""The `reconcile` command. Every failure becomes one exit code, here and only here."""

from __future__ import annotations

import sys

import click

from reconciler import __version__
from reconciler.api.errors import ApiError
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

EXIT_OK = 0
EXIT_FAILURE = 1  # cli.md: 2 is kept for `plan --detailed-exitcode` alone


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="reconcile")
def cli() -> None:
    """Keep KYB business invites in git: validate, plan and apply changes."""


for command in (validate, plan, apply, export, show, resend, sandbox, schema):
    cli.add_command(command)


def main(argv: list[str] | None = None) -> None:
    sys.exit(run(argv))


def run(argv: list[str] | None = None) -> int:
    try:
        result = cli.main(args=argv, prog_name="reconcile", standalone_mode=False)
    except click.exceptions.Exit as exc:  # --help, --version
        return EXIT_FAILURE if exc.exit_code else EXIT_OK
    except click.UsageError as exc:
        # click would exit 2, which cli.md keeps for "changes pending".
        exc.show()
        return EXIT_FAILURE
    except click.ClickException as exc:
        exc.show()
        return EXIT_FAILURE
    except click.Abort:
        click.echo("Aborted.", err=True)
        return EXIT_FAILURE
    except InputError as exc:
        click.echo(str(exc), err=True)
        click.echo(f"Found {plural(len(exc.problems), 'problem')}; nothing was sent.", err=True)
        return EXIT_FAILURE
    except (ReconcilerError, ApiError) as exc:
        click.echo(f"error: {exc}", err=True)
        return EXIT_FAILURE
    except KeyboardInterrupt:
        click.echo("\nInterrupted.", err=True)
        return EXIT_FAILURE
    except BrokenPipeError:
        return EXIT_FAILURE
    return result if isinstance(result, int) else EXIT_OK
