"""Offline commands start fast: they never import the HTTP stack or DeepDiff, nor
jsonschema, email-validator or RE2 while every file is valid and no policy is set.

Commands are imported on demand (``reconciler.cli.LazyGroup``); these tests pin
what a user notices of that: start-up of `--version` and `validate`, the help
listing every command, and click's suggestion for a mistyped command.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from support.cli import run_cli, run_cli_process
from support.helpers import EXAMPLES, clean_env

from reconciler.cli import COMMANDS

# email_validator decides every address (not its dnspython: no deliverability check), re2
# runs policies' patterns: only the first for valid files and no policies.
HEAVY = ("requests", "urllib3", "deepdiff", "jsonschema", "email_validator", "dns", "re2")

# Runs the CLI in a fresh interpreter and prints the top-level packages it loaded.
_CHILD = """
import json, sys
from reconciler.cli import main
code = main(sys.argv[1:])
print(json.dumps({"code": code, "loaded": sorted({name.split(".")[0] for name in sys.modules})}))
"""


def _heavy_modules_loaded(*args: str) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, *args],
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["code"] == 0, done.stderr
    return sorted(set(report["loaded"]) & set(HEAVY))


@pytest.mark.parametrize(
    ("args", "heavy"), [(["--version"], []), (["validate", str(EXAMPLES)], ["email_validator"]),
                        (["schema"], [])],
)  # fmt: skip
def test_offline_commands_load_no_http_stack(args: list[str], heavy: list[str]) -> None:
    assert _heavy_modules_loaded(*args) == heavy


def test_plan_and_apply_load_no_sandbox_server_nor_jsonschema_at_start() -> None:
    # Only `--sandbox` starts one; its credentials come with the package, not the server.
    # jsonschema is needed only to word a file's errors, to read a saved plan, or by the
    # sandbox.
    code = (
        "import sys\n"
        "import reconciler.commands.plan, reconciler.commands.apply\n"
        "print(sorted(m for m in sys.modules if m.startswith('reconciler.sandbox')))\n"
        "print('jsonschema' in sys.modules)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], env=clean_env(), capture_output=True, text=True, check=True
    )
    assert done.stdout.split() == ["['reconciler.sandbox']", "False"]


@pytest.mark.parametrize(
    ("typed", "said"),
    [("paln", "No such command 'paln'. Did you mean 'plan'?"),
     ("frobnicate", "No such command 'frobnicate'.\n")],  # with no close name, no suggestion
)  # fmt: skip
def test_a_mistyped_command_is_suggested_when_one_is_close(typed: str, said: str) -> None:
    result = run_cli(typed)
    assert result.returncode == 1
    assert said in result.stderr


def test_help_lists_every_command_in_order_with_its_summary() -> None:
    # COLUMNS=80: the width a pipe gets (no terminal to measure), whatever runs the tests.
    result = run_cli("--help", env=clean_env(COLUMNS="80"))
    assert result.returncode == 0, result.stderr
    listed = result.stdout.split("Commands:\n", 1)[1].splitlines()
    names = [line.split()[0] for line in listed if line.startswith("  ") and line[2] != " "]
    expected = [
        "validate",
        "plan",
        "apply",
        "applied",
        "comment",
        "show",
        "export",
        "adopt",
        "resend",
        "sandbox",
    ]
    assert names == [*expected, "schema"] == list(COMMANDS)
    assert "  schema    Print the JSON Schema of desired-state files." in listed
    # Whole summaries (none cut short), in the workflow's order: validate, plan, apply.
    listed_text = result.stdout.split("Commands:")[1]
    assert re.findall(r"^  ([a-z]+)  ", listed_text, re.MULTILINE)[:3] == expected[:3]
    assert "..." not in listed_text
    assert "sending only the fields that\n            differ." in result.stdout
    assert "never creates,\n  deletes or revokes one" in result.stdout


def test_each_command_runs_after_a_lazy_import_and_shows_an_example() -> None:
    for name in COMMANDS:
        result = run_cli(name, "--help", env=clean_env(COLUMNS="80"))
        assert result.returncode == 0, name
        assert result.stdout.startswith(f"Usage: reconcile {name} "), name
        assert re.search(rf"Examples?:\n    reconcile {name}\b", result.stdout), result.stdout


def test_the_limits_and_changed_since_are_helped_as_each_command_does_them() -> None:
    # cli.md: plan fails (exit 1) and apply refuses a plan over a limit; --changed-since
    # plans field by field, not whole entries.
    said = {}
    for name in ("plan", "apply"):
        result = run_cli(name, "--help", env=clean_env(COLUMNS="80"))
        assert result.returncode == 0, name
        said[name] = " ".join(result.stdout.split())  # as one line, however wrapped
    for limit in ("updates more invites", "e-mails more invitations again"):
        assert f"Fail (exit 1) when the plan {limit} than this" in said["plan"]
        assert f"Refuse to apply a plan that {limit} than this" in said["apply"]
        assert "Refuse to apply" not in said["plan"] and "Fail (exit 1)" not in said["apply"]
    for text in said.values():
        assert (
            "Only the fields whose YAML value differs between git REF and the working tree, "
            "field by field (an entry added since REF: all its fields)" in text
        )


def test_stdout_in_an_encoding_that_cannot_hold_the_output_is_said_not_a_traceback(
    tmp_path: Path,
) -> None:
    # A Latin-1 locale (or PYTHONIOENCODING=latin-1): an export of 株式会社サクラ商事 to stdout
    # ended in UnicodeEncodeError's traceback.
    env = clean_env(PYTHONIOENCODING="latin-1")
    result = run_cli_process("export", "--sandbox", "inv_6p3j9", cwd=tmp_path, env=env)
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    assert result.stderr.splitlines()[-1] == (
        "error: cannot write the output: stdout's encoding (iso8859-1) cannot hold U+682A; "
        "run with a UTF-8 locale (LANG=C.UTF-8) or PYTHONIOENCODING=utf-8"
    )


def test_a_bug_of_ours_is_one_line_of_error_never_a_traceback(monkeypatch: Any) -> None:
    # A traceback would quote outside text (a value, a server's words) unescaped.
    import reconciler.commands.schema as command

    def broken(_: str) -> Path:
        raise RuntimeError("value \x1b[31mred\x1b[0m\nsecond line")

    monkeypatch.setattr(command, "resource_path", broken)
    done = run_cli("schema", "--config")
    assert done.returncode == 1
    assert "Traceback" not in done.stderr and "\x1b" not in done.stderr
    assert done.stderr.startswith(
        "error: internal error (RuntimeError: value \\x1b[31mred\\x1b[0m"
    ), done.stderr
    assert "this is a bug in reconcile, please report it" in done.stderr
    assert done.stderr.count("\n") == 1  # the value's line break escaped too
