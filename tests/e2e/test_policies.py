"""Policies and the built-in checks end to end: the real CLI, the sandbox over HTTP.

An error policy stops `plan` before any request; a warning is shown and passes; a policy
that is not a JSON Schema is a configuration problem at its line; the built-in duplicate
checks; the annotations and the Code Quality entry of a violation at its line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.cli import run_cli, run_cli_process
from support.helpers import clean_env, sandbox_env
from support.invites import ACME

US_NEEDS_EIN = """\
policies:
  - name: us-needs-ein
    message: invites in group `us` must require the EIN confirmation letter
    schema:
      if: {properties: {groups: {contains: {const: us}}}, required: [groups]}
      then: {properties: {attachments: {contains: {const: ein-letter}}}, required: [attachments]}
"""
NO_FREE_MAIL = """\
policies:
  - name: no-free-mail
    severity: warning
    message: the invitee's e-mail should not be a free-mail address
    schema: {properties: {email: {not: {pattern: "@(gmail|yahoo|outlook)\\\\."}}}}
"""
# The entry of ACME as written by hand, so each field's line is known.
ENTRY = """\
invites:
  - id: inv_acme
    name: Acme Holdings Ltd
    email: {email}
    groups: [{groups}]
    attachments: [proof-of-address]
"""


def _project(tmp_path: Path, config: str, **fields: str) -> Path:
    (tmp_path / "reconciler.yaml").write_text(config, encoding="utf-8")
    (tmp_path / "invites").mkdir()
    values = {"email": "old@acme.example", "groups": "emea, enterprise", **fields}
    (tmp_path / "invites" / "acme.yaml").write_text(ENTRY.format(**values), encoding="utf-8")
    return tmp_path


def test_an_error_policy_stops_plan_before_any_request(start_sandbox, tmp_path):
    server = start_sandbox([ACME])
    _project(tmp_path, US_NEEDS_EIN, groups="us")
    done = run_cli("plan", cwd=tmp_path, env=sandbox_env(server))
    assert done.returncode == 1
    assert (
        "invites/acme.yaml:6:18: policy us-needs-ein: invites in group `us` must require "
        "the EIN confirmation letter" in done.stderr
    )
    assert "Found 1 problem; nothing was sent." in done.stderr
    assert server.stats.requests == []  # not even a token


def test_a_warning_policy_is_shown_and_the_plan_goes_on(start_sandbox, tmp_path):
    server = start_sandbox([ACME])
    _project(tmp_path, NO_FREE_MAIL, email="old@gmail.com")
    done = run_cli("plan", cwd=tmp_path, env=sandbox_env(server))
    assert done.returncode == 0, done.stderr
    assert (
        "invites/acme.yaml:4:12: warning: policy no-free-mail: the invitee's e-mail should "
        "not be a free-mail address" in done.stderr
    )
    assert 'email: "old@acme.example" -> "old@gmail.com"' in done.stdout
    validate = run_cli("validate", cwd=tmp_path, env=clean_env())
    assert validate.returncode == 0
    assert "warning: policy no-free-mail" in validate.stderr


def test_a_policy_that_is_not_a_json_schema_is_a_configuration_problem_at_its_line(tmp_path):
    config = US_NEEDS_EIN.replace("{const: us}", "{const: us, minItems: many}")
    _project(tmp_path, config)
    done = run_cli("validate", cwd=tmp_path, env=clean_env())
    assert done.returncode == 1
    assert done.stderr.startswith("reconciler.yaml:5:")
    assert "policy us-needs-ein" in done.stderr or "minItems" in done.stderr
    assert "Traceback" not in done.stderr


def test_the_built_in_duplicate_checks_warn(tmp_path):
    (tmp_path / "invites").mkdir()
    (tmp_path / "invites" / "a.yaml").write_text(
        "invites:\n"
        "  - id: inv_1\n    name: Acme Ltd\n    email: jane@acme.example\n"
        "  - id: inv_2\n    name: ACME  ltd\n    email: Jane@acme.example\n",
        encoding="utf-8",
    )
    done = run_cli("validate", cwd=tmp_path, env=clean_env())
    assert done.returncode == 0, done.stderr
    assert (
        "invites/a.yaml:6:11: warning: duplicate-name: business name 'ACME  ltd' is the same "
        "as the one at invites/a.yaml:2" in done.stderr
    )
    assert (
        "invites/a.yaml:7:12: warning: duplicate-email: 'Jane@acme.example' is also the "
        "e-mail of the invite at invites/a.yaml:2" in done.stderr
    )
    # Raised to an error by name, or turned off.
    (tmp_path / "reconciler.yaml").write_text(
        "checks: {duplicate-name: error, duplicate-email: off}\n", encoding="utf-8"
    )
    done = run_cli("validate", cwd=tmp_path, env=clean_env())
    assert done.returncode == 1
    assert "invites/a.yaml:6:11: duplicate-name:" in done.stderr
    assert "duplicate-email" not in done.stderr


def test_a_violation_is_annotated_and_in_the_code_quality_report_at_its_line(tmp_path):
    _project(tmp_path, US_NEEDS_EIN, groups="us")
    report = tmp_path / "cq.json"
    done = run_cli(
        "validate",
        "--codequality",
        str(report),
        cwd=tmp_path,
        env=clean_env(GITHUB_ACTIONS="true"),
    )
    assert done.returncode == 1
    assert (
        "::error file=invites/acme.yaml,line=6,col=18,title=invite-reconciler::policy "
        "us-needs-ein: invites in group `us` must require the EIN confirmation letter"
    ) in done.stderr.splitlines()
    [entry] = json.loads(report.read_text(encoding="utf-8"))
    assert entry["location"] == {"path": "invites/acme.yaml", "lines": {"begin": 6}}
    assert entry["severity"] == "major"
    assert entry["description"].startswith("policy us-needs-ein: ")


def test_a_warning_is_a_warning_annotation_and_a_minor_code_quality_entry(tmp_path):
    _project(tmp_path, NO_FREE_MAIL, email="jane@yahoo.com")
    report = tmp_path / "cq.json"
    done = run_cli(
        "validate", "--codequality", str(report), cwd=tmp_path, env=clean_env(GITHUB_ACTIONS="true")
    )
    assert done.returncode == 0, done.stderr
    assert any(
        line.startswith("::warning file=invites/acme.yaml,line=4,col=12,")
        for line in done.stderr.splitlines()
    )
    [entry] = json.loads(report.read_text(encoding="utf-8"))
    assert (entry["severity"], entry["location"]["lines"]["begin"]) == ("minor", 4)


HOSTILE = {
    "a $ref to a URL": (
        '{name: p, message: m, schema: {$ref: "http://127.0.0.1:9/x.json"}}',
        "1:43: policy p: `schema` cannot be used: `$ref` may only point inside the policy",
    ),
    "a $ref to a file": (
        '{name: p, message: m, schema: {properties: {email: {$ref: "/etc/passwd"}}}}',
        "1:64: policy p: `schema` cannot be used: `$ref` may only point inside the policy",
    ),
    "a $id that would move the base": (
        '{name: p, message: m, schema: {$id: "http://127.0.0.1:9/", $ref: "#/x"}}',
        "policy p: `schema` cannot be used: `$id` is not allowed",
    ),
    "a $ref to itself, without end": (
        '{name: p, message: m, schema: {$ref: "#"}}',
        "1:43: policy p: `schema` cannot be used: `$ref` leads back into a schema it stands "
        "in (a loop)",
    ),
    "a $ref to nothing": (
        '{name: p, message: m, schema: {$ref: "#/$defs/nope"}}',
        "1:43: policy p: `schema` cannot be used: `$ref` points at nothing in the policy",
    ),
    "$refs that double at each step": (
        "{name: p, message: m, schema: {$ref: '#/$defs/a0', $defs: {"
        + ", ".join(
            f"a{i}: {{allOf: [{{$ref: '#/$defs/a{i + 1}'}}, {{$ref: '#/$defs/a{i + 1}'}}]}}"
            for i in range(20)
        )
        + ", a20: {}}}}",
        "1:34: policy p: `schema` cannot be used: its `$ref`s expand it to more than 5,000",
    ),
    "a $dynamicRef": (
        '{name: p, message: m, schema: {$dynamicRef: "#meta"}}',
        "policy p: `schema` cannot be used: `$dynamicRef` is not allowed in a policy",
    ),
    "a back-reference RE2 cannot run": (
        '{name: p, message: m, schema: {properties: {name: {pattern: "(a)\\\\1"}}}}',
        "policy p: `schema` cannot be used: `pattern` cannot be run in linear time",
    ),
    "control characters in a message": (
        '{name: p, message: "a\\e]0;owned\\a b", schema: true}',
        "`message`: 'a\\x1b]0;owned\\x07 b' holds control character U+001B; remove it",
    ),
    "workflow-command text in a name": (
        '{name: "::stop-commands::x", message: m, schema: true}',
        "`name`: '::stop-commands::x' does not match",
    ),
}


@pytest.mark.parametrize(("policy", "said"), HOSTILE.values(), ids=HOSTILE.keys())
def test_a_hostile_policy_is_refused_at_its_place_and_fetches_nothing(tmp_path, policy, said):
    _project(tmp_path, f"policies: [{policy}]\n")
    done = run_cli("validate", cwd=tmp_path, env=clean_env(GITHUB_ACTIONS="true"))
    assert done.returncode == 1
    assert said in done.stderr
    assert "Traceback" not in done.stderr
    assert "\x1b" not in done.stderr and "\x07" not in done.stderr
    assert not any(line.startswith("::stop-commands") for line in done.stderr.splitlines())


def test_a_backtracking_pattern_runs_in_linear_time(tmp_path):
    # ^(a+)+$ against 30 a's and a b: 2**30 steps for a backtracking engine; RE2 is linear.
    config = (
        "policies: [{name: no-runs, message: m, "
        'schema: {properties: {name: {pattern: "^(a+)+$"}}}}]\n'
    )
    _project(tmp_path, config)
    text = (tmp_path / "invites" / "acme.yaml").read_text(encoding="utf-8")
    (tmp_path / "invites" / "acme.yaml").write_text(
        text.replace("Acme Holdings Ltd", "a" * 30 + "b"), encoding="utf-8"
    )
    done = run_cli("validate", cwd=tmp_path, env=clean_env())
    assert done.returncode == 1
    assert "invites/acme.yaml:3:11: policy no-runs: m" in done.stderr


def test_a_message_with_workflow_command_text_stays_inside_its_annotation(tmp_path):
    config = US_NEEDS_EIN.replace(
        "message: invites in group `us` must require the EIN confirmation letter",
        'message: "%0A::error file=x::forged ##[set-output name=a;]b"',
    )
    _project(tmp_path, config, groups="us")
    done = run_cli("validate", cwd=tmp_path, env=clean_env(GITHUB_ACTIONS="true"))
    assert done.returncode == 1
    lines = done.stderr.splitlines()
    commands = [line for line in lines if line.startswith("::")]
    assert len(commands) == 1
    assert "%250A::error file=x::forged" in commands[0]
    assert not any("##[" in line for line in lines)


def test_a_huge_policy_is_refused_before_it_is_checked(tmp_path):
    properties = ", ".join(f"f{i}: {{pattern: a}}" for i in range(3000))
    _project(
        tmp_path, f"policies: [{{name: p, message: m, schema: {{properties: {{{properties}}}}}}}]\n"
    )
    done = run_cli("validate", cwd=tmp_path, env=clean_env())
    assert done.returncode == 1
    assert "reconciler.yaml:1:1: `policies` hold more than 2,000 values" in done.stderr


def test_warnings_and_errors_go_to_the_job_summary_too(tmp_path):
    _project(tmp_path, NO_FREE_MAIL, email="jane@yahoo.com")
    summary = tmp_path / "summary.md"
    env = clean_env(GITHUB_ACTIONS="true", GITHUB_STEP_SUMMARY=str(summary))
    done = run_cli("validate", cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr
    text = summary.read_text(encoding="utf-8")
    assert "**invite-reconciler**: 1 warning in the invite files" in text
    assert "| warning | <code>invites/acme.yaml:4:12</code> | <code>policy no-free-mail: " in text


def test_a_value_python_cannot_check_is_a_problem_at_its_place_never_a_traceback(tmp_path):
    # Issue 51, row 12: jsonschema's `format: regex` runs `re.compile` on the name:
    # `a{99999999999}` ended validate in OverflowError's traceback, and `[[a]` printed
    # "FutureWarning: Possible nested set" and its own source line, as the policy's own
    # `[[:alpha:]]` (a class in RE2) did when the policy was checked.
    config = (
        "policies:\n"
        '  - {name: letters, message: m, schema: {properties: {name: {pattern: "[[:alpha:]]"}}}}\n'
        "  - name: name-is-regex\n"
        "    message: the name must be a pattern\n"
        "    schema: {properties: {name: {format: regex}}}\n"
    )
    _project(tmp_path, config)
    path = tmp_path / "invites" / "acme.yaml"
    text = path.read_text(encoding="utf-8").replace("Acme Holdings Ltd", '"a{99999999999}"')
    path.write_text(text + '  - id: inv_beta\n    name: "[[a]"\n', encoding="utf-8")
    # A process of its own: pytest would catch the warning in this one.
    done = run_cli_process("validate", cwd=tmp_path, env=clean_env())
    assert done.returncode == 1, done.stderr
    assert done.stderr.splitlines() == [
        "invites/acme.yaml:3:11: policy name-is-regex: the name must be a pattern",
        "Found 1 problem.",
    ]
