"""Top-level `x-` keys of an invite file hold templates (Compose's convention) and every
command ignores them (issue 39, row 3): validate, plan, export beside them, adopt."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from support.cli import run_cli
from support.helpers import sandbox_env

from reconciler.files import invite_schema_path
from reconciler.sandbox import Sandbox

pytestmark = pytest.mark.e2e

TEMPLATED = """\
x-emea: &emea                     # a template
  groups: [emea, enterprise]
  addOns: [edd]
x-notes: anything at all, never read
invites:
  - id: inv_8f2k1
    <<: *emea
    name: Acme Holdings Ltd
    email: compliance@acme.example
"""


def test_validate_plan_and_adopt_ignore_x_keys(
    start_sandbox: Callable[..., Sandbox], tmp_path: Path
) -> None:
    server = start_sandbox()
    (tmp_path / "invites").mkdir()
    file = tmp_path / "invites" / "emea.yaml"
    file.write_text(TEMPLATED, encoding="utf-8")
    env = sandbox_env(server)

    assert run_cli("validate", cwd=tmp_path, env=env).returncode == 0
    plan = run_cli("plan", cwd=tmp_path, env=env)
    assert plan.returncode == 0, plan.stderr
    assert 'email: "onboarding@acme.example" -> "compliance@acme.example"' in plan.stdout
    assert "groups" not in plan.stdout  # the template's values are the platform's

    adopt = run_cli("adopt", cwd=tmp_path, env=env)
    assert adopt.returncode == 0, adopt.stderr
    assert file.read_text(encoding="utf-8") == TEMPLATED.replace(
        "compliance@acme.example", "onboarding@acme.example"
    )


def test_the_shipped_schema_allows_x_keys_at_the_top_level_only() -> None:
    schema = json.loads(invite_schema_path().read_text(encoding="utf-8"))
    assert schema["patternProperties"] == {"^x-": {}}
    assert schema["additionalProperties"] is False
    assert "patternProperties" not in json.dumps(schema["properties"])
