"""What a person sees of a run, the real CLI against the sandbox over HTTP (issue 39, row 7):
a value the platform does not hold is `(not set)`, the error that stops a run is said
once, and `error:` and `warning:` on stderr are coloured by stdout's rule."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from support.cli import run_cli
from support.helpers import EXAMPLES, clean_env, sandbox_env
from support.hostile_server import HostileServer, Hostility
from support.local_http import envelope
from support.terminal import PIPE, run_at_terminal

from reconciler.sandbox import Sandbox

pytestmark = pytest.mark.e2e

COLOUR = re.compile(r"\x1b\[[0-9;]*m")
SCOPE_MESSAGE = "token lacks scope kyb:invites:write"
NOT_HELD = """\
invites:
  - id: inv_5q5q5
    groups: [emea]
    primaryContact: {name: Jo Bloggs, email: jo@unmanaged.example}
"""


def test_a_value_the_platform_does_not_hold_is_not_set_and_null_only_in_json(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    (tmp_path / "invites").mkdir()
    (tmp_path / "invites" / "u.yaml").write_text(NOT_HELD, encoding="utf-8")
    env = sandbox_env(sandbox)
    text = run_cli("plan", cwd=tmp_path, env=env).stdout
    assert '    groups: (not set) -> ["emea"]' in text
    assert "    primaryContact: (not set) -> {" in text and "null" not in text
    markdown = run_cli("plan", "--format", "markdown", cwd=tmp_path, env=env).stdout
    assert "| groups | _(not set)_ |" in markdown and "null" not in markdown
    document = json.loads(run_cli("plan", "--format", "json", cwd=tmp_path, env=env).stdout)
    assert document["changes"][0]["before"] == {"groups": None, "primaryContact": None}


def _examples(tmp_path: Path) -> Path:
    shutil.copytree(EXAMPLES, tmp_path / "invites")
    return tmp_path


def test_a_403_that_stops_apply_is_said_once_and_counted(sandbox: Sandbox, tmp_path: Path) -> None:
    env = sandbox_env(sandbox, RECONCILER_SCOPE="kyb:invites:read")  # no write scope: 403
    result = run_cli("apply", "--auto-approve", cwd=_examples(tmp_path), env=env)
    assert result.returncode == 1
    shown = result.stdout + result.stderr
    assert shown.count(SCOPE_MESSAGE) == 1, shown
    failed = [line for line in result.stdout.splitlines() if line.startswith("failed ")]
    assert failed and all(line.endswith("HTTP 403 (the error at the end)") for line in failed)
    assert f"Apply: 0 updated, {len(failed)} failed" in result.stdout  # the count is kept
    assert "Stopped: HTTP 403 (the error at the end); no new writes were started." in shown
    last = result.stderr.splitlines()[-1]
    assert last.startswith("error: inv_") and SCOPE_MESSAGE in last and "(requestId " in last


def test_a_403_that_stops_resend_is_said_once_and_no_further_e_mail_is_tried(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    env = sandbox_env(sandbox, RECONCILER_SCOPE="kyb:invites:read")
    ids = ["inv_8f2k1", "inv_3m9q7", "inv_7c2d4"]
    result = run_cli("resend", "--auto-approve", *ids, cwd=tmp_path, env=env)
    assert result.returncode == 1
    assert (result.stdout + result.stderr).count(SCOPE_MESSAGE) == 1
    assert "Resend: 0 re-sent, 1 failed, 2 not sent." in result.stdout
    assert len(sandbox.stats.calls("POST", "/public-api/v1/kyb/invites/")) == 1


def test_a_403_to_apply_s_first_re_send_stops_the_run_and_is_said_once(tmp_path: Path) -> None:
    # The contract: a 403 stops the run. Refused at the re-send only, apply went on
    # updating every other invite, each re-send refused again and owed by hand, the
    # refusal said for each on stdout and again on stderr.
    invites = [
        {"id": f"inv_{n}", "status": "pending", "name": f"N{n}", "email": f"old{n}@x.example"}
        for n in (1, 2, 3)
    ]
    refusal = envelope(403, None, "the token lacks scope kyb:invites:resend")
    hostility = Hostility(resend_raw=[(403, {}, refusal, False)] * 3)
    (tmp_path / "invites").mkdir()
    entries = "".join(
        f"  - id: inv_{n}\n    email: new{n}@x.example\n    resendOnChange: true\n"
        for n in (1, 2, 3)
    )
    (tmp_path / "invites" / "a.yaml").write_text(f"invites:\n{entries}", encoding="utf-8")
    (tmp_path / "reconciler.yaml").write_text("parallelism: 1\n", encoding="utf-8")
    with HostileServer(invites, hostility, secret="s3cr3t-resend-403") as server:
        result = run_cli("apply", "--auto-approve", cwd=tmp_path, env=sandbox_env(server))
        patched = [seen.target for seen in server.calls("PATCH")]
        resends = [s.target for s in server.calls("POST") if s.target.endswith("/resend")]
    assert result.returncode == 1
    shown = result.stdout + result.stderr
    assert shown.count("the token lacks scope kyb:invites:resend") == 1, shown
    assert len(patched) == 1 and len(resends) == 1  # no further update, no further re-send
    assert "not re-sent  inv_1: HTTP 403 (the error at the end)" in result.stdout
    assert "Stopped: HTTP 403 (the error at the end); no new writes were started." in shown
    assert "reconcile resend inv_1" in result.stdout
    last = result.stderr.splitlines()[-1]
    assert last.startswith("error: inv_1: HTTP 403: the token lacks scope kyb:invites:resend")


def _stderr_on_a_terminal(args: list[str], cwd: Path, env: dict[str, str]) -> str:
    """What stderr shows on a terminal (stdout a pipe, stdin /dev/null)."""
    return run_at_terminal(args, cwd, env, stdin_terminal=False, stdout=PIPE).terminal


BAD = """\
invites:
  - id: inv_8f2k1
    name: " Acme"
  - id: inv_3m9q7
    emial: kyb@mueller-soehne.example
"""


def test_errors_and_warnings_on_stderr_are_coloured_on_a_terminal_by_stdouts_rule(
    tmp_path: Path,
) -> None:
    (tmp_path / "invites").mkdir()
    (tmp_path / "invites" / "bad.yaml").write_text(BAD, encoding="utf-8")
    shown = _stderr_on_a_terminal(["validate"], tmp_path, clean_env())
    assert "\x1b[31m\x1b[1minvites/bad.yaml:5:5:\x1b[0m unknown field `emial`" in shown
    assert "invites/bad.yaml:3:11: \x1b[33m\x1b[1mwarning:\x1b[0m surrounding-space" in shown
    good = _examples(tmp_path / "good")  # no credentials set: an error, on stderr
    missing = _stderr_on_a_terminal(["plan"], good, clean_env())
    assert "\x1b[31m\x1b[1merror:\x1b[0m missing RECONCILER_BASE_URL" in missing
    # NO_COLOR, TERM=dumb, --color never and a pipe: the same lines, plain.
    for plain in (
        _stderr_on_a_terminal(["validate"], tmp_path, clean_env(NO_COLOR="1")),
        _stderr_on_a_terminal(["validate"], tmp_path, clean_env(TERM="dumb")),
        run_cli("validate", cwd=tmp_path).stderr,  # a pipe
    ):
        assert "invites/bad.yaml:5:5: unknown field `emial`" in plain
        assert not COLOUR.search(plain)
    never = _stderr_on_a_terminal(["plan", "--color", "never"], good, clean_env())
    assert "error: missing RECONCILER_BASE_URL" in never and not COLOUR.search(never)
    # --color always colours a pipe too, as it does stdout.
    forced = run_cli("plan", "--color", "always", cwd=good).stderr
    assert "\x1b[31m\x1b[1merror:\x1b[0m missing RECONCILER_BASE_URL" in forced
