"""`reconcile validate` as a user runs it: the installed command, real files, real streams."""

from __future__ import annotations

import json
import re
import socket
from collections.abc import Callable
from pathlib import Path

import pytest
from support.cli import CliRun, run_cli, run_cli_process
from support.helpers import EXAMPLES, REPO, clean_env

import reconciler

pytestmark = pytest.mark.e2e


def count_invites(directory: Path) -> tuple[int, int]:
    """Invites and files under ``directory``, counted from the text, not by the loader."""
    files = sorted(directory.rglob("*.yaml")) + sorted(directory.rglob("*.yml"))
    entries = sum(len(re.findall(r"^\s*- id:", f.read_text("utf-8"), re.M)) for f in files)
    return entries, len(files)


def dead_port() -> int:
    """A loopback port nothing listens on."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def assert_no_traceback(result: CliRun) -> None:
    assert "Traceback" not in result.stdout
    assert "Traceback" not in result.stderr


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def test_examples_validate_and_the_count_is_reported() -> None:
    invites, files = count_invites(EXAMPLES)
    assert invites > 0 and files > 0

    result = run_cli("validate", str(EXAMPLES))

    assert result.returncode == 0, result.stderr
    assert f"{invites} invites in {files} files checked" in result.stdout
    assert_no_traceback(result)


def test_bad_directory_lists_every_problem_with_its_position(tmp_path: Path) -> None:
    write(
        tmp_path / "invites" / "emea.yaml",
        "invites:\n"
        "  - id: inv_8f2k1\n"
        "    name: Acme Holdings Ltd\n"
        "    phone: +442079460000\n"
        "    emial: compliance@acme.example\n",
    )
    write(
        tmp_path / "invites" / "apac" / "japan.yml",
        "invites:\n  - id: inv_8f2k1\n    name: 株式会社サクラ商事\n    name: Sakura\n",
    )
    (tmp_path / "invites" / "latin1.yaml").write_bytes(
        "invites:\n  - id: inv_3m9q7\n    name: Müller\n".encode("latin-1")
    )
    write(tmp_path / "invites" / "syntax.yaml", "invites:\n  - id: inv_x\n   name: A\n")

    result = run_cli("validate", "invites", cwd=tmp_path)

    assert result.returncode == 1
    assert_no_traceback(result)
    assert "OK" not in result.stdout
    lines = result.stderr.splitlines()
    expected = [
        "invites/apac/japan.yml:4:5: duplicate key `name`",
        # apac/japan.yml is read first (sorted), so the entry in emea.yaml is the repeat.
        "invites/emea.yaml:2:5: invite id `inv_8f2k1` is already defined at "
        "invites/apac/japan.yml:2",
        "invites/emea.yaml:4:12: `phone` must be text",
        "invites/emea.yaml:5:5: unknown field `emial`; did you mean `email`?",
        "invites/latin1.yaml:3:12: not valid UTF-8",
        "invites/syntax.yaml:3:4:",
    ]
    assert len(lines) == len(expected) + 1, result.stderr
    for line, start in zip(lines, expected, strict=False):
        assert line.startswith(start), (line, start)
    assert "put it in quotes" in lines[2]
    assert "line 3" in lines[0]
    assert "6 problem" in lines[-1]


def test_control_character_is_reported_not_a_traceback(tmp_path: Path) -> None:
    write(tmp_path / "invites" / "a.yaml", "invites:\n  - id: inv_8f2k1\n    name: Acme\x0c Ltd\n")

    result = run_cli("validate", "invites", cwd=tmp_path)

    assert result.returncode == 1
    assert_no_traceback(result)
    assert result.stderr.startswith("invites/a.yaml:3:15: ")


ONE = {"invites/a.yaml": "invites:\n  - id: inv_8f2k1\n    name: Acme\n"}


@pytest.mark.parametrize(
    ("files", "args", "said"),
    [
        (ONE, ("invites",), "1 invite in 1 file checked"),
        # Without a path: ./invites, every file under it.
        (
            {"invites/a.yaml": "invites:\n  - id: inv_a\n  - id: inv_b\n"}
            | {"invites/more/b.yml": "invites:\n  - id: inv_c\n"},
            (),
            "3 invites in 2 files checked",
        ),
        # The config's paths, and only those: ./invites would fail.
        (
            {"reconciler.yaml": "paths:\n  - desired/emea\n  - desired/apac.yaml\n"}
            | {"desired/emea/a.yaml": "invites:\n  - id: inv_a\n  - id: inv_b\n"}
            | {"desired/apac.yaml": "invites:\n  - id: inv_c\n"}
            | {"desired/ignored.yaml": "invites:\n  - id: inv_c\n", "invites/x.yaml": "x: [\n"},
            (),
            "3 invites in 2 files checked",
        ),
        # ... relative to the config file.
        (
            {"gitops/reconciler.yaml": "paths: [invites]\n"}
            | {"gitops/invites/a.yaml": "invites:\n  - id: inv_a\n"},
            ("--config", "gitops/reconciler.yaml"),
            "1 invite in 1 file checked",
        ),
    ],
    ids=["a-directory", "without-path", "config-paths", "config-relative"],
)
def test_validate_reads_what_it_is_given_and_counts_it(
    tmp_path: Path, files: dict[str, str], args: tuple[str, ...], said: str
) -> None:
    for name, text in files.items():
        write(tmp_path / name, text)
    env = clean_env()
    assert not any(k.startswith("RECONCILER_") for k in env)  # no credentials needed

    result = run_cli("validate", *args, env=env, cwd=tmp_path)

    assert result.returncode == 0, result.stderr
    assert said in result.stdout


def test_validate_works_offline_even_with_an_unreachable_api_configured(tmp_path: Path) -> None:
    write(tmp_path / "invites" / "a.yaml", ONE["invites/a.yaml"])
    port = dead_port()
    env = clean_env(
        RECONCILER_BASE_URL=f"http://127.0.0.1:{port}",
        RECONCILER_CLIENT_ID="client",
        RECONCILER_CLIENT_SECRET="secret",
        HTTP_PROXY=f"http://127.0.0.1:{port}",
        HTTPS_PROXY=f"http://127.0.0.1:{port}",
    )

    result = run_cli("validate", "invites", env=env, cwd=tmp_path, timeout=30)

    assert result.returncode == 0, result.stderr
    assert "1 invite in 1 file checked" in result.stdout
    assert "secret" not in result.stdout + result.stderr


def test_without_path_and_without_invites_directory_says_what_is_missing(tmp_path: Path) -> None:
    result = run_cli("validate", cwd=tmp_path)

    assert result.returncode == 1
    assert_no_traceback(result)
    assert result.stderr.startswith("invites:")
    assert "no such file or directory" in result.stderr


@pytest.mark.parametrize(
    ("args", "runner"),
    [
        # The installed script's exit status once; the same run() in this process after.
        pytest.param(("validate", "--no-such-option"), run_cli_process, id="unknown-option"),
        pytest.param(("validate", "--config"), run_cli, id="missing-option-value"),
        pytest.param(("valdiate", "invites"), run_cli, id="unknown-command"),
    ],
)
def test_usage_error_exits_1_never_2(
    tmp_path: Path, args: tuple[str, ...], runner: Callable[..., CliRun]
) -> None:
    result = runner(*args, cwd=tmp_path)

    assert result.returncode == 1
    assert_no_traceback(result)
    assert "Error:" in result.stderr
    assert result.stdout == ""


def test_installed_package_carries_the_schema_and_the_examples(tmp_path: Path) -> None:
    package = Path(reconciler.__file__).resolve().parent
    if package == REPO / "reconciler":
        pytest.skip(
            f"reconciler is imported from the source checkout ({package}, an editable "
            "install): resources come from the repository root, not from _bundled/; "
            "this runs where the package is installed non-editable (CI)"
        )
    bundled = package / "_bundled"
    schema = bundled / "schemas" / "invites.schema.json"
    examples = sorted((bundled / "examples" / "invites").glob("*.yaml"))

    assert schema.is_file()
    assert examples, f"no example invites under {bundled}"
    # The copies are the ones in the repository, not stale ones.
    assert json.loads(schema.read_text("utf-8")) == json.loads(
        (REPO / "schemas" / "invites.schema.json").read_text("utf-8")
    )
    assert [p.name for p in examples] == sorted(p.name for p in EXAMPLES.glob("*.yaml"))
    invites, files = count_invites(bundled / "examples" / "invites")

    # Run from elsewhere, so nothing can be found through the checkout.
    result = run_cli_process("validate", str(bundled / "examples" / "invites"), cwd=tmp_path)

    assert result.returncode == 0, result.stderr
    assert f"{invites} invites in {files} files checked" in result.stdout


@pytest.mark.parametrize(
    ("name", "text"),
    [
        pytest.param("brackets.yaml", "invites: " + "[" * 30000 + "\n", id="30000-brackets"),
        pytest.param("dashes.yaml", "invites:\n" + "- " * 100000 + "x\n", id="100000-dashes"),
    ],
)
def test_deeply_nested_file_exits_1_with_a_message_not_a_crash(
    tmp_path: Path, name: str, text: str
) -> None:
    # These once killed the interpreter (exit 139): only a real process shows that.
    write(tmp_path / name, text)

    result = run_cli("validate", name, cwd=tmp_path)

    assert result.returncode == 1
    assert_no_traceback(result)
    assert re.match(
        rf"{name}:\d+:\d+: nested too deeply \(limit 100\)$", result.stderr.splitlines()[0]
    )


def test_yaml_bomb_exits_1_at_once(tmp_path: Path) -> None:
    lines = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for level in range(1, 9):
        previous, name = "abcdefghi"[level - 1], "abcdefghi"[level]
        lines.append(f"{name}: &{name} [" + ",".join([f"*{previous}"] * 9) + "]")
    write(
        tmp_path / "bomb.yaml", "invites:\n  - id: inv_1\n" + "".join(f"    {x}\n" for x in lines)
    )

    result = run_cli("validate", "bomb.yaml", cwd=tmp_path, timeout=30)

    assert result.returncode == 1
    assert_no_traceback(result)
    assert result.stderr.startswith("bomb.yaml:8:12: aliases expand to more than")
