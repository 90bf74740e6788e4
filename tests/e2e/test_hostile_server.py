"""End to end: the real CLI against a hostile API on 127.0.0.1, one test per way a
server can lie (redirects, lying answers, endless answers, echoed secrets).

Runs are in-process (``reconciler.cli.run``), except where the process ending
is the point. Every run is checked for the client secret and every token the
server issued, in every output and file it wrote.
"""

from __future__ import annotations

import json
import os
import re
import socket
import stat
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path
from urllib.parse import quote_plus

import pytest
from support.cli import CliResult, run_cli
from support.helpers import RECONCILE, audit_log, clean_env, sandbox_env
from support.hostile_server import CLIENT_ID, HostileServer, Hostility

# Retries back off a hundredth as long (tests/conftest.py): what they do is the point.
pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("quick_backoff")]

SECRET = "s3cr3t/DO+NOT&LEAK=xyz"  # changes when form-encoded, as echoed forms are
JWT = re.compile(r"eyJ[\w-]+\.[\w-]+\.[\w-]+")
QUICK = "max_attempts: 2\nretry_max_seconds: 3\nparallelism: 4\n"

SERVER = [
    {"id": "inv_acme", "status": "pending", "name": "Acme Holdings Ltd",
     "email": "old@acme.example", "groups": ["emea"]},
    {"id": "inv_mueller", "status": "pending", "name": "Müller & Söhne GmbH",
     "email": "kyb@mueller.example", "groups": ["emea", "enterprise"]},
    {"id": "inv_sakura", "status": "pending", "name": "株式会社サクラ商事",
     "email": "old@sakura.example", "groups": ["apac"]},
    {"id": "inv_nunez", "status": "pending", "name": "Nuñez Exportaciones S.A.",
     "email": "cumplimiento@nunez.example", "groups": ["latam"]},
    {"id": "inv_SOMEONE_ELSE", "status": "pending", "name": "Someone Else's Business Ltd",
     "email": "private@someone-else.example", "groups": ["na"]},
]  # fmt: skip

DESIRED = """\
# Hand-written, as a compliance team keeps it.
invites:
  - id: inv_acme
    name: Acme Holdings Ltd
    email: compliance@acme.example   # was old@acme.example
    groups: [emea]
    resendOnChange: true

  - id: inv_mueller
    name: Müller & Söhne GmbH
    email: kyb@mueller.example
    groups: [enterprise, emea]

  - id: inv_sakura
    name: 株式会社サクラ商事
    email: kyb@sakura.example
    groups: [apac]
    resendOnChange: true

  - id: inv_nunez
    name: Nuñez Exportaciones S.A.
    email: cumplimiento@nunez.example
    groups: [latam]
"""


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    (tmp_path / "invites").mkdir()
    (tmp_path / "invites" / "business.yaml").write_text(DESIRED, encoding="utf-8")
    (tmp_path / "reconciler.yaml").write_text(QUICK, encoding="utf-8")
    return tmp_path


@pytest.fixture
def hostile() -> Iterator[Callable[..., HostileServer]]:
    """Start hostile servers serving SERVER; all are stopped after the test."""
    with ExitStack() as started:

        def start(hostility: Hostility | None = None, host: str = "127.0.0.1") -> HostileServer:
            return started.enter_context(HostileServer(SERVER, hostility, secret=SECRET, host=host))

        yield start


@pytest.fixture
def reconcile(workdir: Path) -> Callable[..., CliResult]:
    """Run the CLI in ``workdir`` against ``server`` (None: no base URL)."""

    def call(server: HostileServer | None, *args: str, **env: str) -> CliResult:
        settings = {"RECONCILER_CLIENT_ID": CLIENT_ID, "RECONCILER_CLIENT_SECRET": SECRET}
        settings |= server.client_env() if server else {}
        return run_cli(*args, cwd=workdir, env=clean_env(**settings | env))

    return call


def assert_nothing_leaked(servers: list[HostileServer], *texts: str) -> None:
    tokens = [t for s in servers for t in s.tokens if len(t) >= 6]
    for text in texts:
        assert SECRET not in text and quote_plus(SECRET) not in text
        assert not JWT.search(text), JWT.search(text)
        for token in tokens:
            assert token not in text
            for part in token.split(".")[1:]:
                assert part not in text
        assert "Traceback" not in text


def files(workdir: Path, *names: str) -> list[str]:
    return [(workdir / n).read_text(encoding="utf-8") for n in names if (workdir / n).exists()]


# -- 1: redirects ---------------------------------------------------------------------


def _other_loopback_host() -> str:
    try:
        with socket.socket() as probe:
            probe.bind(("127.0.0.2", 0))
        return "127.0.0.2"
    except OSError:
        return "127.0.0.1"


@pytest.mark.parametrize("status", [307, 308])
def test_1_a_redirected_token_request_is_not_followed(
    hostile: Callable[..., HostileServer], reconcile: Callable[..., CliResult], status: int
) -> None:
    trap = hostile(host=_other_loopback_host())
    trap_url = f"{trap.url}/oauth/token"
    server = hostile(Hostility(token_redirect=trap_url, redirect_status=status))

    result = reconcile(server, "plan", "invites")

    assert result.returncode == 1
    assert trap.seen == [], "the form with the client secret went to the redirect target"
    assert len(server.calls("POST", "/oauth/token")) == 1  # not retried either
    assert not server.calls("GET")
    assert f"HTTP {status}" in result.stderr
    assert trap.url.removeprefix("http://") in result.stderr  # names where it pointed
    assert_nothing_leaked([server, trap], result.stdout, result.stderr)


# -- 2: an answer about another invite ----------------------------------------------------


def test_2_an_answer_about_another_invite_is_never_acted_on(
    hostile: Callable[..., HostileServer], reconcile: Callable[..., CliResult], workdir: Path
) -> None:
    server = hostile(Hostility(wrong_ids={"inv_acme": "inv_SOMEONE_ELSE"}))

    planned = reconcile(server, "plan", "invites")
    applied = reconcile(server, "apply", "--auto-approve", "--audit-log", "audit.jsonl", "invites")
    exported = reconcile(server, "export", "inv_acme", "inv_nunez", "--out", "export.yaml")

    for result in (planned, applied):
        assert result.returncode == 1
        assert re.search(r"inv_acme.*\n?.*inv_SOMEONE_ELSE", result.stdout + result.stderr)
    # Neither inv_acme (never PATCHed, never re-sent) nor the other invite is written.
    assert not [s for s in server.seen if s.method != "GET" and "inv_acme" in s.target]
    assert not [s for s in server.seen if s.method != "GET" and "SOMEONE" in s.target]
    assert server.invites["inv_SOMEONE_ELSE"]["email"] == "private@someone-else.example"
    assert server.invites["inv_sakura"]["email"] == "kyb@sakura.example"  # others went through
    assert exported.returncode == 1 and "nothing exported" in exported.stderr
    assert not (workdir / "export.yaml").exists()
    assert "private@someone-else.example" not in exported.stdout + exported.stderr


# -- 3: success: false ---------------------------------------------------------------------


def test_3_success_false_on_writes_is_a_failure_in_the_report_and_audit_log(
    hostile: Callable[..., HostileServer], reconcile: Callable[..., CliResult], workdir: Path
) -> None:
    server = hostile(Hostility(envelope_failure=("PATCH",)))

    result = reconcile(server, "apply", "--auto-approve", "--audit-log", "audit.jsonl", "invites")

    assert result.returncode == 1
    assert "success: false" in result.stdout + result.stderr
    entries = audit_log(workdir / "audit.jsonl")
    updates = [e for e in entries if e["operation"] == "update" and e["record"] == "outcome"]
    assert updates and all(e["outcome"] == "failed" for e in updates)
    assert not server.resends  # a failed update is never followed by its re-send


def test_3_success_false_on_resend_is_a_failed_resend(
    hostile: Callable[..., HostileServer], reconcile: Callable[..., CliResult], workdir: Path
) -> None:
    server = hostile(Hostility(envelope_failure=("RESEND",)))

    result = reconcile(server, "resend", "inv_acme", "--auto-approve", "--audit-log", "a.jsonl")

    assert result.returncode == 1
    assert "failed" in result.stdout and "unknown" not in result.stdout
    entries = audit_log(workdir / "a.jsonl")
    assert [e["record"] for e in entries] == ["attempt", "outcome"]
    assert entries[1]["outcome"] == "failed"


def test_3_success_false_on_reads_is_never_taken_for_the_current_state(
    hostile: Callable[..., HostileServer], reconcile: Callable[..., CliResult]
) -> None:
    server = hostile(Hostility(envelope_failure=("GET",)))

    result = reconcile(server, "apply", "--auto-approve", "invites")

    assert result.returncode == 1
    assert "Plan: 0 to update, 0 unchanged, 4 errors." in result.stdout
    assert not server.calls("PATCH") and not server.calls("POST")


# -- 4: Retry-After far beyond the retry budget ------------------------------------------


def test_4_a_huge_retry_after_ends_the_process_at_once(
    hostile: Callable[..., HostileServer], workdir: Path
) -> None:
    server = hostile(Hostility(retry_after="100000"))
    env = sandbox_env(server, RECONCILER_PARALLELISM="16")
    (workdir / "reconciler.yaml").write_text("retry_max_seconds: 60\n", encoding="utf-8")

    try:
        result = run_cli("plan", "invites", env=env, cwd=workdir, timeout=60)
    except subprocess.TimeoutExpired:
        pytest.fail("`reconcile plan` never exited: workers left waiting in the pacer")

    assert result.returncode == 1
    assert "429" in result.stderr and "asked to wait 100000 s" in result.stderr
    assert len(server.calls("GET")) <= 4  # no worker kept trying
    assert_nothing_leaked([server], result.stdout, result.stderr)


def test_4_an_http_date_retry_after_is_understood(
    hostile: Callable[..., HostileServer], reconcile: Callable[..., CliResult]
) -> None:
    server = hostile(Hostility(retry_after="Wed, 21 Oct 2099 07:28:00 GMT"))

    result = reconcile(server, "plan", "invites")

    assert result.returncode == 1
    assert re.search(r"asked to wait \d{9,} s", result.stderr), result.stderr


# -- 5: an answer that drips ---------------------------------------------------------------


@pytest.mark.parametrize(
    "hostility",
    [Hostility(drip_seconds=0.2), Hostility(header_drip_seconds=0.05)],
    ids=["body", "headers"],
)
def test_5_a_dripping_answer_ends_within_the_attempt_deadline(
    hostile: Callable[..., HostileServer], reconcile: Callable[..., CliResult], hostility: Hostility
) -> None:
    server = hostile(hostility)
    started = time.monotonic()

    result = reconcile(server, "plan", "--target", "inv_acme", "invites", RECONCILER_TIMEOUT="0.5")

    elapsed = time.monotonic() - started
    assert result.returncode == 1
    assert "no complete answer" in result.stderr and "within 0.5s" in result.stderr
    assert len(server.calls("GET")) == 2  # max_attempts: 2, each cut off at its deadline
    # Bounded: two half-second attempts in a three-second budget, not an endless drip.
    assert elapsed < 20, f"the run took {elapsed:.0f}s"


# -- 6: an enormous answer -----------------------------------------------------------------


@pytest.mark.parametrize("announced", [True, False], ids=["content-length", "no-length"])
def test_6_a_1000_mb_answer_is_refused_at_the_size_cap(
    hostile: Callable[..., HostileServer], reconcile: Callable[..., CliResult], announced: bool
) -> None:
    hostility = Hostility(huge_body=1000 * 1024 * 1024, huge_body_length_header=announced)
    server = hostile(hostility)

    result = reconcile(server, "plan", "invites")

    assert result.returncode == 1
    assert "larger than max_response_bytes" in result.stdout + result.stderr
    # Four invites read, each stopped near the 4 MiB cap: the rest was never taken in.
    time.sleep(0.2)  # let the server notice the hang-ups
    assert server.bytes_sent < 4 * 16 * 1024 * 1024, server.bytes_sent


def test_6_a_gzip_bomb_is_neither_asked_for_nor_inflated_past_the_cap(
    hostile: Callable[..., HostileServer], workdir: Path
) -> None:
    server = hostile(Hostility(gzip_bomb_mib=1000))  # 1 MB sent, 1000 MiB inflated
    env = sandbox_env(server)
    # A parent of its own, so the peak memory of its children is this run's alone.
    measured = (
        "import resource, subprocess, sys\n"
        "done = subprocess.run(sys.argv[1:], capture_output=True, text=True)\n"
        "print(done.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
        "print(done.stdout + done.stderr)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", measured, *RECONCILE, "plan", "invites"],
        env=env, cwd=workdir, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip

    first, output = result.stdout.split("\n", 1)
    code, peak_kib = map(int, first.split())
    assert code == 1, output
    assert "larger than max_response_bytes" in output
    assert peak_kib < 200 * 1024, f"peak {peak_kib // 1024} MiB"
    reads = [s for s in server.seen if s.method == "GET"]
    assert reads and {s.headers.get("Accept-Encoding") for s in reads} == {"identity"}
    assert_nothing_leaked([server], output)


# -- 7: a server that echoes secrets ------------------------------------------------------


def test_7_an_echoed_form_never_shows_the_client_secret(
    hostile: Callable[..., HostileServer], reconcile: Callable[..., CliResult]
) -> None:
    server = hostile(Hostility(echo_form_on_401=True))

    result = reconcile(server, "plan", "invites", "--verbose")

    assert result.returncode == 1
    assert "client_secret=[redacted]" in result.stderr
    assert_nothing_leaked([server], result.stdout, result.stderr)


def test_7_an_echoed_authorization_header_reaches_no_output_or_file(
    hostile: Callable[..., HostileServer], reconcile: Callable[..., CliResult], workdir: Path
) -> None:
    server = hostile(Hostility(echo_authorization=("GET",)))
    planned = reconcile(server, "plan", "invites", "--format", "markdown", "--out", "plan.json")
    as_json = reconcile(server, "plan", "invites", "--format", "json", "-v")
    server.hostility = Hostility(echo_authorization=("PATCH",))
    applied = reconcile(server, "apply", "--auto-approve", "--audit-log", "audit.jsonl", "invites")

    assert planned.returncode == applied.returncode == 1
    # Markdown shows brackets as entities inside <code>: a reader sees [redacted].
    assert "&#91;redacted&#93;" in planned.stdout
    assert "[redacted]" in files(workdir, "audit.jsonl")[0]
    assert len(server.tokens) >= 3
    outputs = [r.stdout + r.stderr for r in (planned, as_json, applied)]
    assert_nothing_leaked([server], *outputs, *files(workdir, "plan.json", "audit.jsonl"))


# -- 8: a token HTTP cannot carry ------------------------------------------------------------


@pytest.mark.parametrize(
    "token",
    ["eyJhbGciOi.tok\r\nX-Evil: 1.sig", "eyJhbGciOi.tökén€.sig", "eyJhbGciOi.tok en.sig"],
    ids=["crlf", "non-latin-1", "space"],
)
def test_8_an_uncarriable_token_is_refused_before_anything_is_sent(
    hostile: Callable[..., HostileServer], reconcile: Callable[..., CliResult], token: str
) -> None:
    server = hostile(Hostility(token_value=token))

    planned = reconcile(server, "plan", "invites")
    resent = reconcile(server, "resend", "inv_acme", "--auto-approve")

    for result in (planned, resent):
        assert result.returncode == 1
        assert "cannot be sent in an HTTP header" in result.stdout + result.stderr
        assert "Traceback" not in result.stderr
    assert "unknown" not in resent.stdout and "no request was sent" in resent.stderr
    assert not server.calls("GET") and not server.calls("POST") and not server.resends
    assert len(server.calls("POST", "/oauth/token")) == 2  # once per run: never retried


# -- 9: credentials in the base URL -------------------------------------------------------------


@pytest.mark.parametrize(
    "base_url",
    [
        "ftp://user:SECRET-IN-URL@127.0.0.1/api",
        "https://user:SECRET-IN-URL@api.example.com/api",
        "https://api.example.com/api?access_token=SECRET-IN-URL",
    ],
)
def test_9_a_base_url_with_credentials_is_refused_without_echoing_them(
    reconcile: Callable[..., CliResult], base_url: str
) -> None:
    result = reconcile(None, "plan", "invites", RECONCILER_BASE_URL=base_url)

    assert result.returncode == 1
    assert "SECRET-IN-URL" not in result.stdout + result.stderr
    assert "/api" in result.stderr and "base_url" in result.stderr


def test_a_well_behaved_server_still_converges(
    hostile: Callable[..., HostileServer], reconcile: Callable[..., CliResult], workdir: Path
) -> None:
    # The control: the same server with no hostility set behaves like the platform.
    server = hostile()

    applied = reconcile(server, "apply", "--auto-approve", "--audit-log", "audit.jsonl", "invites")
    planned = reconcile(server, "plan", "invites")

    assert applied.returncode == 0, applied.stdout + applied.stderr
    assert server.resends == {"inv_acme": 1, "inv_sakura": 1}
    assert "Plan: 0 to update, 4 unchanged, 0 errors." in planned.stdout
    assert_nothing_leaked([server], applied.stdout, applied.stderr, *files(workdir, "audit.jsonl"))


# -- invite values of the wrong type or size (attack 13, 18) ---------------------------

_BAD_VALUES = {
    "name an object": ("name", {"first": "Acme"}, "an object, not a string"),
    "name a number": ("name", 42, "a number (42), not a string"),
    "name NaN": ("name", float("nan"), "a number (nan)"),
    "name 1e999": ("name", float("inf"), "a number (inf)"),
    "name a long list": ("name", ["x"] * 50_000, "a list, not a string"),
    "name too long": ("name", "A" * 5_000, "5,000 characters"),
    "groups NaN item": ("groups", ["emea", float("nan")], "item 1 is a number (nan)"),
    "groups 150,000 items": ("groups", [f"g{i}" for i in range(150_000)], "MAX_SET_ITEMS"),
    "contact with a number": ("primaryContact", {"name": 7}, "`name` is a number (7)"),
}


@pytest.mark.parametrize(("field", "value", "said"), _BAD_VALUES.values(), ids=_BAD_VALUES)
def test_an_invite_value_of_the_wrong_type_or_size_leaves_that_invite_alone(
    hostile: Callable[..., HostileServer],
    reconcile: Callable[..., CliResult],
    workdir: Path,
    field: str,
    value: object,
    said: str,
) -> None:
    server = hostile()
    server.invites["inv_acme"][field] = value

    planned = reconcile(server, "plan", "invites", "--out", "plan.json")
    applied = reconcile(server, "apply", "--auto-approve", "--audit-log", "audit.jsonl", "invites")
    exported = reconcile(server, "export", "inv_acme", "--out", "export.yaml")

    for result in (planned, applied):
        assert result.returncode == 1
        shown = result.stdout + result.stderr
        assert re.search(rf"inv_acme.*`{field}`.*{re.escape(said)}", shown), shown
    assert not [s for s in server.seen if s.method != "GET" and "inv_acme" in s.target]
    assert server.invites["inv_sakura"]["email"] == "kyb@sakura.example"  # others went through
    assert server.resends["inv_sakura"] == 1
    plan_text = (workdir / "plan.json").read_text(encoding="utf-8")
    json.loads(plan_text, parse_constant=lambda name: pytest.fail(f"{name} in the plan"))
    assert "inv_sakura" in plan_text
    assert exported.returncode == 1 and "nothing exported" in exported.stderr
    assert not (workdir / "export.yaml").exists()


# -- --out onto something that is not a regular file (attack 26, 51) -------------------


def test_plan_out_onto_a_fifo_is_refused_before_any_request(
    hostile: Callable[..., HostileServer], reconcile: Callable[..., CliResult], workdir: Path
) -> None:
    server = hostile()
    fifo = workdir / "pipe\x1b[31m"  # a device node in real life: /dev/null as root
    os.mkfifo(fifo)

    result = reconcile(server, "plan", "invites", "--out", str(fifo))

    assert result.returncode == 1
    assert "pipe\\x1b[31m: cannot write plan file: it is a FIFO" in result.stderr
    assert server.seen == []  # not even a token request
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


def test_plan_out_onto_a_symlink_replaces_the_link_not_its_target(
    hostile: Callable[..., HostileServer], reconcile: Callable[..., CliResult], workdir: Path
) -> None:
    (workdir / "kept.json").write_text("kept\n", encoding="utf-8")
    (workdir / "plan.json").symlink_to("kept.json")

    result = reconcile(hostile(), "plan", "invites", "--out", "plan.json")

    assert result.returncode == 0, result.stderr
    assert not (workdir / "plan.json").is_symlink()
    assert json.loads((workdir / "plan.json").read_text(encoding="utf-8"))["changes"]
    assert (workdir / "kept.json").read_text(encoding="utf-8") == "kept\n"


def test_export_out_never_writes_through_a_symlink(
    hostile: Callable[..., HostileServer], reconcile: Callable[..., CliResult], workdir: Path
) -> None:
    server = hostile()
    (workdir / "managed.yaml").write_text("invites: []\n", encoding="utf-8")
    (workdir / "linked.yaml").symlink_to("managed.yaml")
    (workdir / "dangling.yaml").symlink_to("elsewhere.yaml")

    forced = reconcile(server, "export", "inv_SOMEONE_ELSE", "--out", "linked.yaml", "--force")
    dangling = reconcile(server, "export", "inv_SOMEONE_ELSE", "--out", "dangling.yaml", "--force")

    assert (forced.returncode, dangling.returncode) == (0, 0), forced.stderr + dangling.stderr
    assert (workdir / "managed.yaml").read_text(encoding="utf-8") == "invites: []\n"
    assert not (workdir / "elsewhere.yaml").exists()
    for name in ("linked.yaml", "dangling.yaml"):
        assert not (workdir / name).is_symlink()
        assert "id: inv_SOMEONE_ELSE" in (workdir / name).read_text(encoding="utf-8")


# -- gateways in front of the API (nginx-like HTML pages: a body too large, upstream down) --


def test_a_413_from_a_gateway_says_the_body_was_too_large_and_is_not_retried(
    hostile: Callable[..., HostileServer], reconcile: Callable[..., CliResult], workdir: Path
) -> None:
    server = hostile(Hostility(html_errors={"PATCH": 413}))

    result = reconcile(server, "apply", "--auto-approve", "invites")

    assert result.returncode == 1
    # One per changed invite (acme and sakura): none retried.
    assert sorted(c.target.rsplit("/", 1)[1] for c in server.calls("PATCH")) == [
        "inv_acme",
        "inv_sakura",
    ]
    lines = [line for line in result.stderr.splitlines() if line.startswith("error: inv_")]
    assert lines and all("HTTP 413: the request body (" in line for line in lines)
    assert all(
        "was refused as too large, by the server or a proxy or gateway in front of it: "
        "Request Entity Too Large (an HTML page, probably from a proxy or gateway)" in line
        for line in lines
    )
    advice = "a proxy or gateway in front of the API limits request bodies; ask its operators"
    assert all(line.endswith(advice) for line in lines)
    assert "requestId" not in result.stderr
    assert_nothing_leaked([server], result.stdout, result.stderr)


def test_a_502_on_the_token_request_names_the_token_request_and_no_request_id(
    hostile: Callable[..., HostileServer], reconcile: Callable[..., CliResult]
) -> None:
    server = hostile(Hostility(html_errors={"POST": 502}))

    result = reconcile(server, "plan", "invites")

    assert result.returncode == 1
    assert result.stderr.strip().splitlines()[-1] == (
        "error: stopped reading invites: HTTP 502: no token from the token request "
        "(POST /oauth/token): Bad Gateway (an HTML page, probably from a proxy or "
        "gateway) (gave up after 2 attempts)"
    )
    assert not server.calls("GET")
    assert "requestId" not in result.stderr
