"""`policies` and `checks` in reconciler.yaml: compiled when the file is read, and every
problem with one a configuration problem placed in the file."""

from __future__ import annotations

from pathlib import Path

import pytest

from reconciler.errors import InputError
from reconciler.settings.config import load_settings
from reconciler.settings.config_file import MAX_POLICY_VALUES


def _load(tmp_path: Path, text: str) -> object:
    path = tmp_path / "reconciler.yaml"
    path.write_text(text, encoding="utf-8")
    return load_settings(str(path), env={})


def _problems(tmp_path: Path, text: str) -> list[str]:
    with pytest.raises(InputError) as caught:
        _load(tmp_path, text)
    return [str(p).split("reconciler.yaml:", 1)[1] for p in caught.value.problems]


def test_no_policies_no_compiled_rules_and_the_built_in_checks_warn(tmp_path: Path) -> None:
    settings = load_settings(None, env={})
    assert settings.rules.policies is None
    assert {settings.rules.level(c) for c in ("duplicate-name", "surrounding-space")} == {"warning"}


def test_policies_are_compiled_with_their_severity(tmp_path: Path) -> None:
    settings = _load(
        tmp_path,
        "policies:\n"
        "  - {name: a, message: m, schema: {required: [email]}}\n"
        "  - {name: b, message: m, severity: warning, schema: true}\n"
        "checks: {duplicate-email: error, surrounding-space: off}\n",
    )
    rules = settings.rules  # type: ignore[attr-defined]
    assert [(p.policy.name, p.policy.severity) for p in rules.policies.compiled] == [
        ("a", "error"),
        ("b", "warning"),
    ]
    assert (rules.level("duplicate-email"), rules.level("surrounding-space")) == ("error", "off")
    assert rules.level("duplicate-name") == "warning"


PROBLEMS = {
    "an unknown key": (
        "policies:\n  - {name: a, message: m, schema: {}, when: always}\n",
        ["2:39: unknown field `when`; allowed: message, name, schema, severity"],
    ),
    "no message": (
        "policies:\n  - {name: a, schema: {}}\n",
        ["2:5: item 1 of `policies` is missing required field `message`"],
    ),
    "a keyword of the wrong kind": (
        "policies:\n  - name: a\n    message: m\n"
        "    schema: {properties: {groups: {minItems: -1}}}\n",
        ["4:46: `schema.properties.groups.minItems` must be at least 0"],
    ),
    "a pattern Python's re cannot compile": (  # OverflowError in jsonschema's check
        "policies:\n  - name: a\n    message: m\n"
        '    schema: {properties: {name: {pattern: "a{99999999999}"}}}\n',
        ["4:43: `schema.properties.name.pattern`: 'a{99999999999}' is not a valid regex"],
    ),
    "a patternProperties name Python's re cannot compile": (
        "policies:\n  - name: a\n    message: m\n"
        '    schema: {patternProperties: {"a{99999999999}": true}}\n',
        ["4:33: `schema.patternProperties`: 'a{99999999999}' is not a valid regex"],
    ),
    "two policies of one name": (
        "policies:\n  - {name: a, message: m, schema: {}}\n  - {name: a, message: m, schema: {}}\n",
        ["3:12: policy `a` is already defined (item 1 of `policies`); give each its own name"],
    ),
    # Worded as RECONCILER_BASE_URL's (cli.md), not as the pattern it does not match.
    "a base_url without its scheme": (
        "base_url: api.example.com\nparallelism: x\n",
        [
            "1:11: `base_url`: 'api.example.com' has no scheme; "
            "did you mean 'https://api.example.com'?",
            "2:14: `parallelism` must be a whole number, not text",
        ],
    ),
    "a loopback base_url without its scheme": (
        "base_url: localhost:8787\n",
        ["1:11: `base_url`: 'localhost:8787' has no scheme; did you mean 'http://localhost:8787'?"],
    ),
    "a base_url no URL meant can be told of": (
        "base_url: api example\n",
        ["1:11: `base_url`: 'api example' does not match `^https?://\\S+$(?!\\n)`"],
    ),
    "an unknown check": (
        "checks: {duplicate-names: error}\n",
        ["1:10: unknown field `duplicate-names`; did you mean `duplicate-name`?"],
    ),
}


@pytest.mark.parametrize(("text", "said"), PROBLEMS.values(), ids=PROBLEMS.keys())
def test_each_problem_is_placed_in_the_file(tmp_path: Path, text: str, said: list[str]) -> None:
    assert _problems(tmp_path, text) == said


def test_all_policies_together_are_bounded(tmp_path: Path) -> None:
    enum = ", ".join(f"v{i}" for i in range(MAX_POLICY_VALUES))
    text = f"policies:\n  - {{name: a, message: m, schema: {{enum: [{enum}]}}}}\n"
    [said] = _problems(tmp_path, text)
    assert said.startswith(f"1:1: `policies` hold more than {MAX_POLICY_VALUES:,} values")


# Kept beside the rules for a reader, under a keyword no check reads as a schema:
# jsonschema never looks inside `x-shared`, so a `$ref` may not point into it.
SHARED_NOTE = (
    "policies:\n"
    "  - name: business-email\n"
    "    message: the invitee's e-mail should be the business's own\n"
    "    schema:\n"
    "      x-shared:\n"
    "        e-mail:  # Müller & Söhne's rule, kept for reference\n"
    "          pattern: '@(gmail|yahoo)\\.'\n"
    "      properties:\n"
    "        email:\n"
    "          not: {$ref: '#/x-shared/e-mail'}\n"
)


def test_a_ref_to_an_object_under_an_unknown_keyword_is_refused_at_the_ref(tmp_path: Path) -> None:
    assert _problems(tmp_path, SHARED_NOTE) == [
        "10:17: policy business-email: `schema` cannot be used: `$ref` points at a value "
        "(an object no check reads as a schema) in the policy, not at a schema (one that "
        "`$defs`, `properties`, `allOf` or another keyword of schemas holds)"
    ]


def _shared_notes(levels: int) -> str:
    """A policy whose `x-notes` nest ``levels`` objects, one inside another."""
    notes = "{}"
    for level in range(levels - 1, 0, -1):
        notes = f"{{note-{level}: {notes}}}"
    return (
        "policies:\n"
        "  - name: business-email\n"
        "    message: the invitee's e-mail should be the business's own\n"
        "    schema:\n"
        f"      x-notes: {notes}\n"
        "      properties:\n"
        "        email: {not: {pattern: '@(gmail|yahoo)\\.'}}\n"
    )


def test_notes_nested_past_50_under_an_unknown_keyword_are_refused_at_the_schema(tmp_path) -> None:
    # Not a schema, so no place of its own to name: the policy's `schema` is blamed, in the
    # file, not a traceback.
    settings = _load(tmp_path, _shared_notes(49))
    compiled = settings.rules.policies.compiled  # type: ignore[attr-defined]
    assert [p.policy.name for p in compiled] == ["business-email"]
    assert _problems(tmp_path, _shared_notes(50)) == [
        "4:5: policy business-email: `schema` cannot be used: it nests too deeply to be "
        "followed (more than 50 schemas one inside another, its `$ref`s followed); an invite "
        "entry nests three levels, and no rule needs so many"
    ]


@pytest.mark.parametrize(
    ("env", "source"),
    [
        ({}, "base_url in {path}"),
        ({"RECONCILER_BASE_URL": "https://api.example"}, "RECONCILER_BASE_URL"),
    ],
)
def test_a_host_not_reached_names_what_set_base_url(
    tmp_path: Path, env: dict[str, str], source: str
) -> None:
    import requests

    from reconciler.api.network import transport_error

    path = tmp_path / "reconciler.yaml"
    path.write_text("base_url: https://api.example\n", encoding="utf-8")
    settings = load_settings(str(path), env=env)
    refused = requests.ConnectionError(ConnectionRefusedError(111, "refused"))
    said = str(transport_error(refused, "api.example", 30, None, settings.base_url_source))
    assert said == (
        f"could not connect to api.example (connection refused); check {source.format(path=path)}"
    )
