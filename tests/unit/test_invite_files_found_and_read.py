"""Which files a run reads, and where it says their invites and problems are.

A user fixes a file at the line:column a message names: an invite list that
came in through a YAML merge key must still point at the lines it was written on.
"""

from __future__ import annotations

import gc
from collections.abc import Callable
from pathlib import Path

import pytest

from reconciler.desired import state as desired
from reconciler.desired.state import load_desired_state, load_file, load_text
from reconciler.errors import InputError, SourceError

WriteYaml = Callable[[str, str], Path]


def problems_of(paths: list[str]) -> list[str]:
    with pytest.raises(InputError) as caught:
        load_desired_state(paths)
    return [str(problem) for problem in caught.value.problems]


def placed(text: str) -> tuple[list[tuple[str, int, int]], list[str]]:
    invites, problems = load_text(text, "f.yaml")
    return [(i.id, i.source.line, i.source.column) for i in invites], [str(p) for p in problems]


def test_invites_merged_in_on_one_line_are_placed_where_written():
    text = "<<: {invites: [{id: inv_a, name: Acme}, {id: inv_b, name: 12:30}, 12:30]}\n"

    invites, problems = placed(text)

    assert invites == [("inv_a", 1, 16), ("inv_b", 1, 41)]
    assert problems == [
        "f.yaml:1:59: `name` must be text, but YAML reads 12:30 as a number (750); "
        'put it in quotes: "12:30"',
        "f.yaml:1:67: each invite entry must be a mapping, not a number "
        "(start each entry with `- id: ...`)",
    ]


def test_invites_merged_in_as_a_block_are_placed_where_written():
    text = (
        "<<:\n  invites:\n    - id: inv_a\n      name: Acme\n    - id: inv_b\n      name: 12:30\n"
    )

    invites, problems = placed(text)

    assert invites == [("inv_a", 3, 7), ("inv_b", 5, 7)]
    assert problems == [
        "f.yaml:6:13: `name` must be text, but YAML reads 12:30 as a number (750); "
        'put it in quotes: "12:30"'
    ]


def test_an_invalid_id_in_a_merged_list_is_placed_at_the_id():
    invites, problems = placed("<<: {invites: [{id: 'bad id'}]}\n")

    assert invites == [("bad id", 1, 16)]
    assert problems == [
        "f.yaml:1:21: `id`: 'bad id' is not a valid inviteId "
        "(1 to 128 letters, digits, `_`, `-`, `.`, and not dots alone)"
    ]


def test_a_directory_named_like_a_yaml_file_is_not_read_as_one(
    write_yaml: WriteYaml, tmp_path: Path
) -> None:
    write_yaml("invites/a.yaml", "invites:\n  - id: inv_a\n")
    write_yaml("invites/archive.yaml/b.yaml", "invites:\n  - id: inv_b\n")

    state = load_desired_state([str(tmp_path / "invites")])

    assert state.files == [
        str(tmp_path / "invites" / "a.yaml"),
        str(tmp_path / "invites" / "archive.yaml" / "b.yaml"),
    ]


def test_a_missing_default_directory_says_how_to_name_another(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)

    assert problems_of(["invites"]) == [
        "invites: no such file or directory (read when no PATH is given and reconciler.yaml "
        "sets no `paths`; pass a PATH, or set `paths:` in reconciler.yaml)"
    ]
    assert problems_of(["invitse"]) == ["invitse: no such file or directory"]


def test_a_directory_without_invite_files_is_named_without_a_position(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()

    (problem,) = problems_of([str(tmp_path / "empty")])

    assert problem == f"{tmp_path / 'empty'}: no *.yaml or *.yml files in this directory"


def test_an_empty_file_and_a_list_at_the_top_are_explained(write_yaml: WriteYaml) -> None:
    empty = write_yaml("empty.yaml", "# nothing here yet\n")
    listed = write_yaml("listed.yaml", "# invites\n- id: inv_a\n")

    assert problems_of([str(empty), str(listed)]) == [
        f"{empty}:1:1: file is empty; expected a mapping with an `invites:` list",
        f"{listed}:2:1: top level must be a mapping with an `invites:` list",
    ]


def test_a_file_over_the_size_bound_is_refused_and_one_at_it_is_read(
    write_yaml: WriteYaml, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = "invites:\n  - id: inv_a\n"
    path = write_yaml("sized.yaml", text)

    monkeypatch.setattr(desired, "MAX_FILE_BYTES", len(text))
    invites, problems = load_file(path)
    assert [i.id for i in invites] == ["inv_a"] and problems == []

    monkeypatch.setattr(desired, "MAX_FILE_BYTES", len(text) - 1)
    invites, problems = load_file(path)
    assert invites == []
    assert problems == [
        SourceError(str(path), 1, 1, "larger than 256 MiB; split it into several files")
    ]


def test_a_path_that_cannot_be_read_is_a_problem_at_its_start(tmp_path: Path) -> None:
    invites, problems = load_file(tmp_path)

    assert invites == []
    assert problems == [SourceError(str(tmp_path), 1, 1, "cannot read: Is a directory")]


@pytest.mark.parametrize("enabled", [True, False])
def test_reading_leaves_the_garbage_collector_as_it_was(
    write_yaml: WriteYaml, enabled: bool
) -> None:
    path = write_yaml("gc.yaml", "invites:\n  - id: inv_a\n")
    was = gc.isenabled()
    (gc.enable if enabled else gc.disable)()
    try:
        load_file(path)
        assert gc.isenabled() is enabled
    finally:
        (gc.enable if was else gc.disable)()
