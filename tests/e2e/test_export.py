"""`reconcile export --out`: never a file's other invites dropped, never under a file. (A
directory made for it, a file of its own invite replaced: test_files_written.py.)"""

from __future__ import annotations

from pathlib import Path

from support.cli import run_cli
from support.helpers import sandbox_env

from reconciler.sandbox import Sandbox

TWO = """\
invites:
  - id: inv_6p3j9   # ours
    name: Old Name
  - id: inv_1v5x7
    name: Kiwi Ledger Ltd
  - id: inv_8d2s4
    name: Seoul
"""


def test_export_refuses_an_out_under_a_file(sandbox: Sandbox, tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x\n", encoding="utf-8")
    result = run_cli(
        "export", "inv_6p3j9", "--out", "file/new.yaml", cwd=tmp_path, env=sandbox_env(sandbox)
    )
    assert result.returncode == 1
    assert "Not a directory" in result.stderr and "Traceback" not in result.stderr
    assert sandbox.stats.calls("GET") == []


def test_force_over_a_file_with_other_invites_is_refused_and_points_at_adopt(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    target = tmp_path / "apac.yaml"
    target.write_text(TWO, encoding="utf-8")
    env = sandbox_env(sandbox)
    result = run_cli("export", "inv_6p3j9", "--out", "apac.yaml", "--force", cwd=tmp_path, env=env)
    assert result.returncode == 1
    assert "apac.yaml defines 2 other invites (inv_1v5x7, inv_8d2s4)" in result.stderr
    assert "reconcile adopt apac.yaml" in result.stderr
    assert target.read_text(encoding="utf-8") == TWO
    assert sandbox.stats.calls("GET") == []
    # Without --force, the refusal names adopt too.
    plain = run_cli("export", "inv_6p3j9", "--out", "apac.yaml", cwd=tmp_path, env=env)
    assert plain.returncode == 1 and "reconcile adopt apac.yaml" in plain.stderr


def test_an_out_path_with_an_invisible_character_is_shown_escaped(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    out = "new\u202efile.yaml"  # a right-to-left override: the path would read reversed
    result = run_cli("export", "inv_6p3j9", "--out", out, cwd=tmp_path, env=sandbox_env(sandbox))
    assert result.returncode == 0, result.stderr
    assert (tmp_path / out).is_file()
    assert "\u202e" not in result.stderr
    assert "Exported 1 invite to new" in result.stderr


def test_export_to_stdout_notes_the_schema_line_only_while_the_schema_is_missing(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    env = sandbox_env(sandbox)
    missing = run_cli("export", "inv_6p3j9", cwd=tmp_path, env=env)
    assert missing.returncode == 0, missing.stderr
    assert "note: the $schema line points at ../schemas/invites.schema.json" in missing.stderr
    (tmp_path / "schemas").mkdir()
    saved = run_cli("schema", cwd=tmp_path, env=env)
    (tmp_path / "schemas" / "invites.schema.json").write_text(saved.stdout, encoding="utf-8")
    present = run_cli("export", "inv_6p3j9", cwd=tmp_path, env=env)
    assert present.returncode == 0, present.stderr
    assert "$schema" not in present.stderr
    assert "$schema=../schemas/invites.schema.json" in present.stdout
    assert "\n  - id: inv_6p3j9\n" in present.stdout  # a valid id passes the id check
