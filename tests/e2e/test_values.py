"""End to end: values as written. One test (or a few) per row of the "values" table.

The real CLI against a platform on 127.0.0.1 (support/hostile_server.py, which records
every request body) with real-world data: what the platform receives is exactly what
the files say (in NFC), what a reviewer sees is exactly what will be sent, redaction
touches only what a server said and only the secrets this run holds, nothing
invisible passes validate or prints raw, and an export validates and plans clean.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote_plus

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from support.cli import CliResult, run_cli
from support.helpers import audit_log, clean_env
from support.hostile_server import CLIENT_ID, HostileServer, Hostility

pytestmark = pytest.mark.e2e

SECRET = "values-s3cret/+&=XYZ"
TOKEN = "eyJhbGciOiJIUzI1NiJ9.dmFsdWVzLXRva2Vu.c2lnbmF0dXJlLXZhbHVlcw"
QUICK = "max_attempts: 2\nretry_max_seconds: 3\nparallelism: 4\n"

FLAG = {
    "id": "inv_flag",
    "status": "pending",
    "name": "Flag Bearer Ltd.",
    "email": "old@flag.example",
    "primaryContact": {"name": "Torch Bearer 2 Team", "email": "torch@flag.example"},
    "groups": ["emea"],
}
CAFE = {"id": "inv_cafe", "status": "pending", "name": "Caf\u00e9 Ltd", "email": "kyb@cafe.example"}
ECHO: dict[str, Any] = {
    "id": "inv_echo",
    "status": "pending",
    "name": "Echo GmbH",
    "email": "kyb@echo.example",
    "primaryContact": {
        "name": "Jane Doe",
        "email": "jane@echo.example",
        "title": f"you sent {SECRET}",
        "note": f"Authorization: Bearer {TOKEN}",
        f"echo-{SECRET}": "a sub-field named after the secret",
    },
}


@pytest.fixture
def server() -> Iterator[HostileServer]:
    invites = [json.loads(json.dumps(i)) for i in (FLAG, CAFE, ECHO)]
    with HostileServer(invites, Hostility(token_value=TOKEN), secret=SECRET) as running:
        yield running


@pytest.fixture
def work(tmp_path: Path) -> Path:
    (tmp_path / "invites").mkdir()
    (tmp_path / "reconciler.yaml").write_text(QUICK, encoding="utf-8")
    return tmp_path


def reconcile(server: HostileServer | None, work: Path, *args: str, **env: str) -> CliResult:
    values = {"RECONCILER_CLIENT_ID": CLIENT_ID, "RECONCILER_CLIENT_SECRET": SECRET, **env}
    if server is not None:
        values["RECONCILER_BASE_URL"] = server.url
    return run_cli(*args, cwd=work, env=clean_env(**values))


def write(work: Path, text: str, name: str = "invites/business.yaml") -> Path:
    path = work / name
    path.write_text(text, encoding="utf-8")
    return path


def patches(server: HostileServer) -> list[dict[str, Any]]:
    return [json.loads(s.body) for s in server.calls("PATCH")]


def no_secret_in(*texts: str) -> None:
    for text in texts:
        assert SECRET not in text and quote_plus(SECRET) not in text
        assert TOKEN not in text and "dmFsdWVzLXRva2Vu" not in text
        assert "Traceback" not in text


def audit_updates(work: Path) -> list[dict[str, Any]]:
    records = audit_log(work / "audit.jsonl")
    return [r for r in records if r["record"] == "attempt" and r["operation"] == "update"]


# -- 1: ordinary words are never redacted ----------------------------------------------


def test_1_a_name_with_bearer_is_exported_planned_sent_and_logged_as_written(
    server: HostileServer, work: Path
) -> None:
    exported = reconcile(server, work, "export", "inv_flag", "--out", "invites/flag.yaml")
    assert exported.returncode == 0, exported.stderr
    text = (work / "invites/flag.yaml").read_text(encoding="utf-8")
    assert "name: Flag Bearer Ltd.\n" in text and "name: Torch Bearer 2 Team\n" in text
    assert "redacted" not in text

    assert reconcile(None, work, "validate").returncode == 0
    clean = reconcile(server, work, "plan", "--detailed-exitcode")
    assert clean.returncode == 0, clean.stdout + clean.stderr

    edited = text.replace("name: Flag Bearer Ltd.", "name: Flag Bearer Holdings 2 Ltd.")
    edited = edited.replace("Torch Bearer 2 Team", "Torch Bearer 3 Team")
    write(work, edited, "invites/flag.yaml")
    planned = reconcile(server, work, "plan")
    assert 'name: "Flag Bearer Ltd." -> "Flag Bearer Holdings 2 Ltd."' in planned.stdout
    assert 'primaryContact.name: "Torch Bearer 2 Team" -> "Torch Bearer 3 Team"' in planned.stdout
    assert "redacted" not in planned.stdout

    applied = reconcile(server, work, "apply", "--auto-approve", "--audit-log", "audit.jsonl")
    assert applied.returncode == 0, applied.stdout + applied.stderr
    (body,) = patches(server)
    assert body["name"] == "Flag Bearer Holdings 2 Ltd."
    assert body["primaryContact"]["name"] == "Torch Bearer 3 Team"
    (attempt,) = audit_updates(work)
    assert attempt["fields"]["name"] == {
        "before": "Flag Bearer Ltd.",
        "after": "Flag Bearer Holdings 2 Ltd.",
    }


def test_1_the_drift_check_sees_a_real_change_between_two_bearer_names(
    server: HostileServer, work: Path
) -> None:
    write(work, "invites:\n  - id: inv_flag\n    name: Flag Bearer Holdings 2 Ltd.\n")
    assert reconcile(server, work, "plan", "--out", "plan.json").returncode == 0
    server.invites["inv_flag"]["name"] = "Flag Bearer Co."  # changed by hand since review
    applied = reconcile(server, work, "apply", "--plan", "plan.json")
    assert applied.returncode == 1
    assert '`name` was "Flag Bearer Ltd." when planned, is now "Flag Bearer Co."' in (
        applied.stderr
    )
    assert patches(server) == []


# -- 2: unmanaged sub-fields echoing the secret or the token ------------------------------

ECHO_YAML = """\
invites:
  - id: inv_echo
    primaryContact:
      name: Jane Q. Doe
      email: jane@echo.example
"""


def test_2_unmanaged_sub_fields_echoing_secrets_are_redacted_in_every_output(
    server: HostileServer, work: Path
) -> None:
    write(work, ECHO_YAML)
    as_json = reconcile(server, work, "plan", "--format", "json")
    saved = reconcile(server, work, "plan", "--out", "plan.json")
    markdown = reconcile(server, work, "plan", "--format", "markdown")
    shown = reconcile(None, work, "show", "plan.json", "--format", "json")
    for result in (as_json, saved, markdown, shown):
        assert result.returncode == 0, result.stderr
    plan_file = (work / "plan.json").read_text(encoding="utf-8")
    outputs = [as_json.stdout, saved.stdout, markdown.stdout, shown.stdout, plan_file]
    no_secret_in(*outputs, *(r.stderr for r in (as_json, saved, markdown, shown)))
    (change,) = json.loads(plan_file)["changes"]
    for part in ("before", "after", "patch"):
        contact = change[part]["primaryContact"]
        assert contact["title"] == "you sent [redacted]"
        assert contact["note"] == "Authorization: Bearer [redacted]"
        assert contact["echo-[redacted]"] == "a sub-field named after the secret"
    assert change["patch"]["primaryContact"]["name"] == "Jane Q. Doe"  # the file's, as written

    # Applied, the platform keeps its own values of the sub-fields the file leaves out.
    applied = reconcile(server, work, "apply", "--plan", "plan.json", "--audit-log", "audit.jsonl")
    assert applied.returncode == 0, applied.stdout + applied.stderr
    (body,) = patches(server)
    assert body["primaryContact"] == {**ECHO["primaryContact"], "name": "Jane Q. Doe"}
    audit = (work / "audit.jsonl").read_text(encoding="utf-8")
    no_secret_in(applied.stdout, applied.stderr, audit)
    (attempt,) = audit_updates(work)
    assert attempt["fields"]["primaryContact"]["after"]["name"] == "Jane Q. Doe"
    assert attempt["fields"]["primaryContact"]["after"]["title"] == "you sent [redacted]"


def test_2_a_plain_apply_sends_the_servers_unmanaged_values_too(
    server: HostileServer, work: Path
) -> None:
    write(work, ECHO_YAML)
    applied = reconcile(server, work, "apply", "--auto-approve")
    assert applied.returncode == 0, applied.stdout + applied.stderr
    no_secret_in(applied.stdout, applied.stderr)
    (body,) = patches(server)
    assert body["primaryContact"] == {**ECHO["primaryContact"], "name": "Jane Q. Doe"}


# -- 3: one normal form ----------------------------------------------------------------

CAFE_NFD = "invites:\n  - id: inv_cafe\n    name: Cafe\u0301 Ltd\n    resendOnChange: true\n"


def test_3_nfd_in_the_file_and_nfc_on_the_platform_is_no_change(
    server: HostileServer, work: Path
) -> None:
    write(work, CAFE_NFD)
    planned = reconcile(server, work, "plan", "--detailed-exitcode")
    assert planned.returncode == 0, planned.stdout
    assert "No changes." in planned.stdout
    for _ in range(3):
        assert reconcile(server, work, "apply", "--auto-approve").returncode == 0
    assert patches(server) == [] and server.resends["inv_cafe"] == 0


def test_3_text_is_sent_in_nfc(server: HostileServer, work: Path) -> None:
    write(work, CAFE_NFD.replace("Ltd", "Holdings"))
    assert reconcile(server, work, "apply", "--auto-approve").returncode == 0
    (raw,) = [s.body for s in server.calls("PATCH")]
    assert json.loads(raw)["name"].encode("utf-8") == "Caf\u00e9 Holdings".encode()
    # And the plan showed two sides that differ visibly, never "Café Ltd" -> "Café Ltd".
    assert server.resends["inv_cafe"] == 1


# -- 4, 5: nothing invisible -----------------------------------------------------------

INVISIBLE = [
    "\u206f",
    "\u034f",
    "\ufe00",
    "\ufe0f",
    "\u180b",
    "\u180f",
    "\u200b",
    "\u00a0",
    "\u1160",
    "\u2028",
    "\u2029",
    "\u202e",
    "\ufeff",
    "\U000e0041",
]


@pytest.mark.parametrize("char", INVISIBLE, ids=lambda c: f"U+{ord(c):04X}")
def test_4_5_an_invisible_character_in_a_text_value_is_refused_before_any_request(
    server: HostileServer, work: Path, char: str
) -> None:
    escaped = f"\\U{ord(char):08X}" if ord(char) > 0xFFFF else f"\\u{ord(char):04X}"
    write(
        work,
        "invites:\n"
        "  - id: inv_flag\n"
        f'    email: "jane{escaped}@acme.example"\n'
        "    primaryContact:\n"
        f'      name: "Jane{escaped}Doe"\n'
        "      email: j@acme.example\n",
    )
    for command in ("validate", "plan"):
        result = reconcile(server, work, command)
        assert result.returncode == 1
        assert "business.yaml:3:12: `email`: 'jane" in result.stderr
        assert "business.yaml:5:13: `primaryContact.name`: 'Jane" in result.stderr
        assert f"U+{ord(char):04X}" in result.stderr
        assert char not in result.stderr and char not in result.stdout
    assert server.seen == []


def test_4_joiners_are_allowed_in_names_and_shown_as_escapes(
    server: HostileServer, work: Path
) -> None:
    write(work, 'invites:\n  - id: inv_flag\n    name: "علی\\u200cرضا Ltd"\n')
    assert reconcile(None, work, "validate").returncode == 0
    planned = reconcile(server, work, "plan")
    assert '-> "علی\\u200cرضا Ltd"' in planned.stdout and "\u200c" not in planned.stdout
    assert reconcile(server, work, "apply", "--auto-approve").returncode == 0
    assert patches(server) == [{"name": "علی\u200cرضا Ltd"}]


def test_4_a_server_value_differing_only_by_an_invisible_character_never_looks_equal(
    server: HostileServer, work: Path
) -> None:
    server.invites["inv_flag"]["email"] = "old\u200b@flag.example"
    write(work, "invites:\n  - id: inv_flag\n    email: old@flag.example\n")
    planned = reconcile(server, work, "plan", "--format", "markdown")
    text = reconcile(server, work, "plan")
    assert 'email: "old\\u200b@flag.example" -> "old@flag.example"' in text.stdout
    assert "\u200b" not in planned.stdout + text.stdout


# -- 6: field names ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("names", "said"),
    [
        ("{phone: email}", "`email` is already the wire name of `email`"),
        ("{name: status}", "`status` is a read-only field of the invite"),
    ],
)
def test_6_field_names_that_clash_are_refused_before_any_request(
    server: HostileServer, work: Path, names: str, said: str
) -> None:
    write(work, "invites:\n  - id: inv_flag\n    phone: '+442079460000'\n")
    (work / "reconciler.yaml").write_text(QUICK + f"field_names: {names}\n", encoding="utf-8")
    result = reconcile(server, work, "apply", "--auto-approve")
    assert result.returncode == 1
    assert "reconciler.yaml:4:" in result.stderr and said in result.stderr
    assert server.seen == []


# -- 7: an export validates and plans clean ----------------------------------------------


def test_7_an_export_of_what_a_file_cannot_hold_validates_and_plans_clean(
    server: HostileServer, work: Path
) -> None:
    server.invites["inv_flag"].update(
        phone="12345",  # not E.164
        name="Flag\u200bBearer",  # invisible
        primaryContact={"name": "Jane", "email": "j@flag.example", "phone": None, "title": "CFO"},
    )
    exported = reconcile(server, work, "export", "inv_flag", "inv_echo", "--out", "invites/x.yaml")
    assert exported.returncode == 0, exported.stderr
    text = (work / "invites/x.yaml").read_text(encoding="utf-8")
    assert "None" not in text and "title:" not in text and "redacted" not in text
    assert "# `phone` left out: '12345' is not E.164" in text
    assert "# `name` left out: 'Flag\\u200bBearer' holds U+200B" in text
    assert "# `primaryContact` sub-fields `title` left out" in text
    assert "# `primaryContact` left out: the server's value holds the client secret" in text
    no_secret_in(text, exported.stderr)
    assert reconcile(None, work, "validate").returncode == 0
    planned = reconcile(server, work, "plan", "--detailed-exitcode")
    assert planned.returncode == 0, planned.stdout + planned.stderr
    assert reconcile(server, work, "apply", "--auto-approve").returncode == 0
    assert patches(server) == []


# -- 8: a secret too short to redact -------------------------------------------------------


def test_8_a_client_secret_shorter_than_the_floor_is_refused_at_start(
    server: HostileServer, work: Path
) -> None:
    write(work, "invites:\n  - id: inv_flag\n    name: Flag Bearer Ltd.\n")
    done = run_cli(
        "plan",
        cwd=work,
        env=clean_env(
            RECONCILER_BASE_URL=server.url,
            RECONCILER_CLIENT_ID=CLIENT_ID,
            RECONCILER_CLIENT_SECRET="s3cr",
        ),
    )
    assert done.returncode == 1
    assert "RECONCILER_CLIENT_SECRET is shorter than 6 characters" in done.stderr
    assert "s3cr" not in done.stderr.replace("RECONCILER_CLIENT_SECRET", "")
    assert "Traceback" not in done.stderr
    assert server.seen == []


# -- 9: bounded server keys -----------------------------------------------------------------


def test_9_very_long_contact_keys_leave_that_invite_alone_quickly(
    server: HostileServer, work: Path
) -> None:
    long_keys = {f"{i:02}" + "k" * 50_000: "v" for i in range(17)}
    server.invites["inv_echo"]["primaryContact"] = {
        "name": "J",
        "email": "j@e.example",
        **long_keys,
    }
    write(
        work,
        "invites:\n"
        "  - id: inv_echo\n    primaryContact: {name: K, email: k@e.example}\n"
        "  - id: inv_flag\n    name: Flag Bearer 9 Ltd.\n",
    )
    started = time.monotonic()
    planned = reconcile(server, work, "plan")
    assert time.monotonic() - started < 20
    assert planned.returncode == 1
    assert re.search(
        r"`primaryContact` has a field named `00k+…` of 50,002 characters", planned.stdout
    )
    assert 'name: "Flag Bearer Ltd." -> "Flag Bearer 9 Ltd."' in planned.stdout
    assert len(planned.stdout) + len(planned.stderr) < 10_000  # what is shown, not what was sent


# -- the property: any text value, exported, validated, planned, sent ------------------------

# Text as it comes: any character, with the troublesome ones made likely.
_TRICKY = st.sampled_from(
    [
        "Bearer ",
        "Flag Bearer Ltd.",
        "e\u0301",
        "\u00e9",
        "\u1100\u1161",  # Hangul jamo that NFC composes
        "\u200c",
        "\u200d",
        "\u200b",
        "\u00a0",
        "\u3000",
        "\u2028",
        "\ufe0f",
        "\U0001f469\u200d\U0001f4bb",
        "'",
        '"',
        "#",
        ": ",
        "- ",
        "&a *b !c",
        "NO",
        "12:30",
        "null",
        "~",
        "\\",
        SECRET,
    ]
)
TEXT = st.lists(st.one_of(_TRICKY, st.text(max_size=8)), max_size=6).map("".join)


@pytest.fixture(scope="module")
def platform() -> Iterator[tuple[HostileServer, Any]]:
    from reconciler.api.client import ApiClient
    from reconciler.settings.config import Settings

    invite = {"id": "inv_prop", "status": "pending", "name": "Before Ltd"}
    with HostileServer([invite], Hostility(token_value=TOKEN), secret=SECRET) as running:
        settings = Settings(base_url=running.url, client_id=CLIENT_ID, client_secret=SECRET)
        with ApiClient(settings) as client:
            yield running, client


def _holdable(text: str) -> bool:
    """What validate must accept as a business name: 1-200 characters, no control
    character, nothing NOT_IN_TEXT refuses."""
    from reconciler.safetext import NOT_IN_TEXT

    controls = any(ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F for c in text)
    return 1 <= len(text) <= 200 and not controls and NOT_IN_TEXT.search(text) is None


@pytest.mark.real
@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(value=TEXT, raw=st.booleans())
def test_any_text_value_exports_validates_plans_clean_and_is_sent_byte_for_byte(
    platform: tuple[HostileServer, Any], value: str, raw: bool
) -> None:
    import unicodedata

    import yaml

    from reconciler.commands.export import render_export
    from reconciler.desired.state import load_text
    from reconciler.plan.make import compare_invite

    server, client = platform
    server.invites["inv_prop"]["name"] = value
    server.invites["inv_prop"]["primaryContact"] = {"name": value, "email": "c@p.example"}
    current = client.get_invite("inv_prop")  # over HTTP, checked as every read is

    # Exported, it validates and plans clean, whatever the server held.
    text = render_export([current], server.url, "invites.schema.json")
    assert SECRET not in text
    (desired,), problems = load_text(text, "export.yaml")
    assert problems == []
    assert compare_invite(desired.fields, current.fields) == {}

    # Written in a file, it is accepted exactly when it is a name a file may hold ...
    # (raw: non-ASCII characters written as they are, as people type them; else escaped)
    entry = {"invites": [{"id": "inv_prop", "name": value}]}
    written = yaml.safe_dump(entry, width=10**6, allow_unicode=raw)
    # PyYAML's dumper writes a raw NEL (U+0085) in quotes, where YAML 1.1 reads it as
    # a line break: such a file does not hold the value, so it says nothing about it.
    assume(yaml.safe_load(written)["invites"][0]["name"] == value)
    invites, problems = load_text(written, "business.yaml")
    if not _holdable(value):
        assert problems, f"validate let {value!r} through"
        return
    assert problems == [], problems
    # ... and a PATCH carries it byte for byte, in NFC, never redacted.
    server.invites["inv_prop"]["name"] = (
        "Something Else Ltd" if value != "Something Else Ltd" else "x"
    )
    patch = compare_invite(invites[0].fields, client.get_invite("inv_prop").fields)
    client.write_invite("inv_prop", patch)
    body = json.loads(server.calls("PATCH")[-1].body)
    assert body == {"name": unicodedata.normalize("NFC", value)}
    assert body["name"].encode("utf-8") == unicodedata.normalize("NFC", value).encode("utf-8")
