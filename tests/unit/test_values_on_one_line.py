"""Text values are one line: a `|` block's line break never reaches the platform.

`name: |` followed by the name on the next line reads as "Acme Holdings Ltd\\n";
before the schema's `line` rule it was planned and sent with the line break.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from conftest import run_cli

from reconciler.desired.state import load_desired_state
from reconciler.errors import InputError, SourceError

WriteYaml = Callable[[str, str], Path]

BLOCKS = """\
invites:
  - id: inv_8f2k1
    name: |
      Acme Holdings Ltd
    primaryContact:
      name: >
        Jane Doe
      email: jane@acme.example
    groups: [emea, "enterprise\\tEU", "vip\\u0085"]
"""


def problems(path: Path) -> list[SourceError]:
    try:
        load_desired_state([str(path)])
    except InputError as error:
        return error.problems
    return []


def test_a_block_scalar_name_is_refused_where_it_was_written(write_yaml: WriteYaml) -> None:
    path = write_yaml("invites.yaml", BLOCKS)

    found = [(p.line, p.column, p.message) for p in problems(path)]

    assert found == [
        (
            3,
            11,
            "`name`: 'Acme Holdings Ltd\\n' holds a line break; write the value on one "
            "line, plain or quoted",
        ),
        (
            6,
            13,
            "`primaryContact.name`: 'Jane Doe\\n' holds a line break; write the value on "
            "one line, plain or quoted",
        ),
        (9, 20, "`groups`: 'enterprise\\tEU' holds a tab; use spaces"),
        (9, 38, "`groups`: 'vip\\x85' holds control character U+0085; remove it"),
    ]


def test_names_in_any_script_are_one_line_text(write_yaml: WriteYaml) -> None:
    path = write_yaml(
        "invites.yaml",
        "invites:\n"
        "  - id: inv_1\n"
        "    name: Müller & Søn GmbH — Zürich\n"
        "  - id: inv_2\n"
        "    name: 株式会社サンプル 🚀\n"
        "  - id: inv_3\n"
        "    name: شركة المثال\n"
        "    primaryContact: {name: Zoë O'Brien-Ñúñez, email: zoe@example.com}\n",
    )

    assert problems(path) == []


def test_validate_exits_1_and_plan_sends_nothing(write_yaml: WriteYaml, tmp_path: Path) -> None:
    write_yaml("invites/a.yaml", BLOCKS)

    for args in (("validate",), ("plan", "--sandbox")):
        result = run_cli(*args, cwd=tmp_path)
        assert result.returncode == 1
        assert result.stderr.splitlines()[0].startswith("invites/a.yaml:3:11: `name`:")
        assert result.stderr.splitlines()[-1] == "Found 4 problems; nothing was sent."
        assert "Acme Holdings Ltd" not in result.stdout
