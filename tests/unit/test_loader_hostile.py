"""Hostile invite and config files (issue 11, rows 1-5): refused with a placed message, exit 1.

Each file is what an attacker or an unlucky merge could put in a pull request;
the run must end with `path:line:col: message` lines and exit code 1, never a
traceback, a crash, minutes of CPU or gigabytes of memory.
"""

from __future__ import annotations

import tracemalloc
from collections.abc import Callable
from pathlib import Path

import pytest

from reconciler.cli import run
from reconciler.desired.state import load_desired_state, load_file, load_text
from reconciler.errors import InputError, SourceError
from reconciler.schema.check import invite_validators
from reconciler.settings.config import load_settings
from reconciler.yamlload.builder import DEPTH_LIMIT

WriteYaml = Callable[[str, str], Path]


def billion_laughs(levels: int = 9) -> str:
    """The classic: each level lists the previous one nine times (9**9 "lol"s at level 9)."""
    names = "abcdefghi"
    lines = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for level in range(1, levels):
        aliases = ",".join([f"*{names[level - 1]}"] * 9)
        lines.append(f"{names[level]}: &{names[level]} [{aliases}]")
    return "invites:\n  - id: inv_1\n" + "".join(f"    {line}\n" for line in lines)


def reconcile(*args: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, list[str]]:
    code = run(list(args))
    return code, capsys.readouterr().err.splitlines()


def only(problems: list[SourceError]) -> SourceError:
    assert len(problems) == 1, "\n".join(map(str, problems))
    return problems[0]


# -- 1: alias expansion is bounded ------------------------------------------------------


def test_billion_laughs_is_refused_at_the_alias_that_crosses_the_bound(
    write_yaml: WriteYaml, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_yaml("bomb.yaml", billion_laughs())
    assert len(path.read_bytes()) < 600  # the 524-byte file of the report, give or take

    tracemalloc.start()
    try:
        code, err = reconcile("validate", str(path), capsys=capsys)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()

    assert code == 1
    # Line 8 holds level f (9**6 "lol"s): its first alias crosses 100,000 values.
    assert err[0].startswith(f"{path}:8:12: aliases expand to more than")
    assert peak < 20 * 2**20  # nothing was expanded: it was 4 GB


def test_an_anchor_shared_by_hundreds_of_invites_still_loads(write_yaml: WriteYaml) -> None:
    entries = "".join(
        f"  - id: inv_{n:03d}\n    name: Société Nº{n}\n    groups: *emea\n" for n in range(1, 400)
    )
    path = write_yaml(
        "shared.yaml",
        "invites:\n  - id: inv_000\n    name: Müller GmbH\n"
        "    groups: &emea [emea, enterprise, priority]\n" + entries,
    )

    state = load_desired_state([str(path)])

    assert len(state.invites) == 400
    assert {tuple(i.fields["groups"]) for i in state.invites} == {
        ("emea", "enterprise", "priority")
    }


# -- 2: nesting depth is bounded before any recursion ------------------------------------


@pytest.mark.parametrize(
    ("text", "position"),
    [
        pytest.param("invites: " + "[" * 30000 + "\n", (1, 10 + DEPTH_LIMIT - 1), id="brackets"),
        pytest.param("invites:\n" + "- " * 100000 + "x\n", (2, 2 * DEPTH_LIMIT - 1), id="dashes"),
        pytest.param("invites:\n  - id: inv_1\n    name: " + "{a: " * 5000 + "\n", None, id="maps"),
    ],
)
def test_deep_nesting_is_refused_with_its_position(
    write_yaml: WriteYaml, text: str, position: tuple[int, int] | None
) -> None:
    path = write_yaml("deep.yaml", text)

    problem = only(load_file(path)[1])

    assert problem.message == f"nested too deeply (limit {DEPTH_LIMIT})"
    if position is not None:
        assert (problem.line, problem.column) == position


def test_nesting_up_to_the_limit_is_read_and_one_more_level_is_not() -> None:
    # The top mapping is level 1, so 99 lists reach the limit exactly.
    at_limit = "invites: " + "[" * (DEPTH_LIMIT - 1) + "]" * (DEPTH_LIMIT - 1) + "\n"
    beyond = "invites: " + "[" * DEPTH_LIMIT + "]" * DEPTH_LIMIT + "\n"

    assert not any("nested" in p.message for p in load_text(at_limit, "ok.yaml")[1])
    assert only(load_text(beyond, "deep.yaml")[1]).message.startswith("nested too deeply")


def test_an_alias_cannot_carry_nesting_past_the_limit() -> None:
    half = DEPTH_LIMIT // 2 + 5
    text = (
        "a: &deep " + "[" * half + "]" * half + "\nb: " + "[" * half + "*deep" + "]" * half + "\n"
    )

    problem = only(load_text(text, "alias.yaml")[1])

    assert problem.message.startswith("nested too deeply")
    assert (problem.line, problem.column) == (2, 4 + half)


def test_a_deep_config_file_is_refused_too(tmp_path: Path) -> None:
    config = tmp_path / "reconciler.yaml"
    config.write_text("paths: " + "[" * 40000 + "\n", encoding="utf-8")

    with pytest.raises(InputError) as caught:
        load_settings(str(config), env={})

    assert str(caught.value) == f"{config}:1:{8 + DEPTH_LIMIT - 1}: nested too deeply (limit 100)"


def test_deep_files_exit_1_with_a_message_through_the_cli(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "reconciler.yaml").write_text("paths: " + "[" * 40000 + "\n", encoding="utf-8")
    invites = tmp_path / "deep.yaml"
    invites.write_text("invites:\n" + "- " * 100000 + "x\n", encoding="utf-8")

    for args in (["--config", str(tmp_path / "reconciler.yaml"), str(invites)], [str(invites)]):
        code, err = reconcile("validate", *args, capsys=capsys)
        assert code == 1
        assert "nested too deeply (limit 100)" in err[0]
        assert err[-1] == "Found 1 problem; nothing was sent."


# -- 3: ids match as a whole --------------------------------------------------------------


def test_an_id_with_a_trailing_newline_is_refused(
    write_yaml: WriteYaml, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_yaml("ids.yaml", 'invites:\n  - id: "inv_1\\n"\n  - id: "inv_1"\n')

    code, err = reconcile("validate", str(path), capsys=capsys)

    assert code == 1
    assert err[0] == (
        f"{path}:2:9: `id`: 'inv_1\\n' is not a valid inviteId "
        "(1 to 128 letters, digits, `_`, `-`, `.`, and not dots alone)"
    )
    assert len(err) == 2


@pytest.mark.parametrize("value", ["inv_1\n", "..\n", "+442079460000\n"])
def test_the_schema_patterns_refuse_a_final_newline(value: str) -> None:
    # The shipped schema alone (as editors and other tools use it) must refuse it.
    field = "phone" if value.startswith("+") else "id"
    entry = {"id": "inv_1", field: value}

    assert not invite_validators().entry.is_valid(entry)
    assert invite_validators().entry.is_valid({**entry, field: value.rstrip("\n")}) is (
        value != "..\n"
    )


def test_an_email_with_a_trailing_newline_is_refused(write_yaml: WriteYaml) -> None:
    path = write_yaml("email.yaml", 'invites:\n  - id: inv_1\n    email: "a@b.example\\n"\n')

    problem = only(load_file(path)[1])

    assert "'a@b.example\\n' is not a valid email address" in problem.message


# -- 4: duplicate merge keys ----------------------------------------------------------------


def test_two_merge_keys_in_one_mapping_are_a_duplicate_key(write_yaml: WriteYaml) -> None:
    path = write_yaml(
        "merge.yaml",
        """\
invites:
  - &base {id: inv_1, name: Acme, groups: [emea]}
  - <<: *base
    id: inv_2
    <<: {name: Bolt}
""",
    )

    problem = only(load_file(path)[1])

    assert (problem.line, problem.column) == (5, 5)
    assert problem.message == (
        "duplicate key `<<` (first set on line 3); YAML would silently keep only the last one"
    )


def test_merge_key_in_a_sequence_of_mappings_keeps_the_first_mapping_s_value(
    write_yaml: WriteYaml,
) -> None:
    path = write_yaml(
        "merge.yaml",
        "invites:\n"
        "  - &a {id: inv_a, name: First, groups: [emea]}\n"
        "  - &b {id: inv_b, name: Second, addOns: [edd]}\n"
        "  - <<: [*a, *b]\n"
        "    id: inv_c\n",
    )

    invites, problems = load_file(path)

    assert problems == []
    assert invites[2].fields == {"name": "First", "groups": ["emea"], "addOns": ["edd"]}


# -- 5: control characters are never written raw -----------------------------------------------


def test_file_names_with_control_characters_are_shown_escaped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "invites"
    folder.mkdir()
    hostile = folder / "a\x1b]0;PWNED\x07\nb.yaml"
    hostile.write_text("invites:\n  - id: inv_1\n    emial: x@y.example\n", encoding="utf-8")
    (folder / "c.yaml").write_text("invites:\n  - id: inv_1\n", encoding="utf-8")

    code, err = reconcile("validate", str(folder), capsys=capsys)

    assert code == 1
    shown = f"{folder}/a\\x1b]0;PWNED\\x07\\nb.yaml"
    assert err == [
        f"{shown}:3:5: unknown field `emial`; did you mean `email`?",
        f"{folder}/c.yaml:2:5: invite id `inv_1` is already defined at {shown}:2",
        "Found 2 problems; nothing was sent.",
    ]


def test_values_and_keys_with_control_characters_are_shown_escaped(
    write_yaml: WriteYaml,
) -> None:
    path = write_yaml(
        "values.yaml",
        'invites:\n  - id: inv_1\n    email: "x\\e]0;PWNED\\a@y.example"\n    "emial\\r": z\n',
    )

    problems = load_file(path)[1]

    text = "\n".join(str(p) for p in problems)
    assert not any(c in text.replace("\n", "") for c in "\x1b\x07\r")
    assert "'x\\x1b]0;PWNED\\x07@y.example' is not a valid email address" in text
    assert "unknown field `emial\\r`" in text
