"""`reconcile export --ids-from FILE|-` against the sandbox over HTTP: ids from a file or a
pipe, and an unknown id among several listed while the others are exported (exit 1)."""

from __future__ import annotations

from pathlib import Path

import yaml
from support.cli import run_cli, run_cli_process
from support.helpers import sandbox_env

from reconciler.sandbox import Sandbox

IDS = """\
# copied from the platform's console
inv_6p3j9

inv_1v5x7   # Kiwi Ledger
"""


def _ids(path: Path) -> list[str]:
    return [entry["id"] for entry in yaml.safe_load(path.read_text(encoding="utf-8"))["invites"]]


def test_ids_from_a_file_with_ids_given_as_arguments_each_once(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    (tmp_path / "ids.txt").write_text(IDS, encoding="utf-8")
    result = run_cli(
        "export", "inv_8d2s4", "inv_6p3j9", "--ids-from", "ids.txt", "--out", "invites/a.yaml",
        cwd=tmp_path, env=sandbox_env(sandbox),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert _ids(tmp_path / "invites" / "a.yaml") == ["inv_8d2s4", "inv_6p3j9", "inv_1v5x7"]
    assert "Exported 3 invites to invites/a.yaml" in result.stderr
    assert len(sandbox.stats.calls("GET")) == 3  # inv_6p3j9 read once


def test_ids_from_stdin_through_a_pipe(sandbox: Sandbox, tmp_path: Path) -> None:
    result = run_cli_process(
        "export", "--ids-from", "-", "--out", "a.yaml",
        cwd=tmp_path, env=sandbox_env(sandbox), input=IDS,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert _ids(tmp_path / "a.yaml") == ["inv_6p3j9", "inv_1v5x7"]


def test_one_unknown_id_among_three_is_named_and_the_others_are_exported(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    (tmp_path / "ids.txt").write_text("inv_6p3j9\ninv_nope1\ninv_1v5x7\n", encoding="utf-8")
    env = sandbox_env(sandbox)
    result = run_cli("export", "--ids-from", "ids.txt", "--out", "a.yaml", cwd=tmp_path, env=env)
    assert result.returncode == 1
    assert _ids(tmp_path / "a.yaml") == ["inv_6p3j9", "inv_1v5x7"]
    lines = result.stderr.splitlines()
    assert "error: not found on the platform, so not exported (the 2 other invites were):" in lines
    (named,) = [line for line in lines if "inv_nope1" in line]
    assert named.startswith("  inv_nope1: HTTP 404: ") and "(requestId " in named
    # To stdout: the two invites' YAML, the unknown one on stderr, exit 1 as well.
    shown = run_cli("export", "inv_6p3j9", "inv_nope1", "inv_1v5x7", cwd=tmp_path, env=env)
    assert shown.returncode == 1
    assert [e["id"] for e in yaml.safe_load(shown.stdout)["invites"]] == ["inv_6p3j9", "inv_1v5x7"]
    assert "inv_nope1: HTTP 404" in shown.stderr and "inv_nope1" not in shown.stdout


def test_only_unknown_ids_export_nothing_and_say_where_ids_come_from(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    result = run_cli(
        "export", "inv_nope1", "--out", "a.yaml", cwd=tmp_path, env=sandbox_env(sandbox)
    )
    assert result.returncode == 1
    assert "nothing exported" in result.stderr and "platform's console" in result.stderr
    assert not (tmp_path / "a.yaml").exists()


def test_force_never_drops_an_entry_whose_id_the_platform_does_not_know(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    before = "invites:\n  - id: inv_6p3j9\n    name: Old\n  - id: inv_nope1\n    name: Gone\n"
    target = tmp_path / "a.yaml"
    target.write_text(before, encoding="utf-8")
    result = run_cli(
        "export", "inv_6p3j9", "inv_nope1", "--out", "a.yaml", "--force",
        cwd=tmp_path, env=sandbox_env(sandbox),
    )  # fmt: skip
    assert result.returncode == 1
    assert "a.yaml defines inv_nope1, which the platform does not know" in result.stderr
    assert target.read_text(encoding="utf-8") == before


def test_a_bad_id_in_the_file_is_named_at_its_line_before_any_request(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    (tmp_path / "ids.txt").write_text("inv_6p3j9\ninv 1v5x7\n", encoding="utf-8")
    result = run_cli("export", "--ids-from", "ids.txt", cwd=tmp_path, env=sandbox_env(sandbox))
    assert result.returncode == 1
    assert "ids.txt:2: 'inv 1v5x7'" in result.stderr
    assert sandbox.stats.calls("GET") == []


def test_a_list_holding_ids_already_managed_exports_the_others_with_skip_defined(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    # A list from the console holds the invites already in git too: refused whole without
    # the option, the others exported with it, each one left out named, and never read.
    env = sandbox_env(sandbox)
    (tmp_path / "ids.txt").write_text(IDS, encoding="utf-8")
    first = run_cli("export", "inv_6p3j9", "--out", "invites/a.yaml", cwd=tmp_path, env=env)
    assert first.returncode == 0, first.stderr

    refused = run_cli(
        "export", "--ids-from", "ids.txt", "--out", "invites/b.yaml", cwd=tmp_path, env=env
    )
    assert refused.returncode == 1
    assert "--skip-defined exports the others" in refused.stderr
    assert not (tmp_path / "invites" / "b.yaml").exists()

    reads = len(sandbox.stats.calls("GET"))
    result = run_cli(
        "export", "--ids-from", "ids.txt", "--out", "invites/b.yaml", "--skip-defined",
        cwd=tmp_path, env=env,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert _ids(tmp_path / "invites" / "b.yaml") == ["inv_1v5x7"]
    assert (
        "note: left out, already defined in your invite files (1): "
        "inv_6p3j9 (at invites/a.yaml:6)" in result.stderr
    )
    assert len(sandbox.stats.calls("GET")) == reads + 1

    again = run_cli(
        "export", "inv_6p3j9", "--out", "invites/c.yaml", "--skip-defined", cwd=tmp_path, env=env
    )
    assert again.returncode == 0, again.stderr
    assert "Nothing to export: every id given is defined in your invite files." in again.stderr
    assert not (tmp_path / "invites" / "c.yaml").exists()
