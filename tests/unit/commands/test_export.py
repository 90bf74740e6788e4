"""`reconcile export` in-process: what it says of the paths it writes, and `--ids-from`:
the ids read from a file or stdin, one a line, bounded and checked."""

from __future__ import annotations

import io
import os
import sys
from pathlib import Path

import pytest
from support.cli import run_cli
from support.helpers import clean_env

from reconciler.commands import export
from reconciler.commands.export import ids_in, read_ids
from reconciler.errors import ReconcilerError


def test_the_out_path_is_said_with_its_control_characters_escaped(tmp_path: Path) -> None:
    # A file name may come from anywhere (a loop over a repository's files, a branch name):
    # `Exported ... to PATH` printed it raw, its ESC ] 0 ; ... BEL retitling the terminal.
    out = "a\x1b]0;title\x07.yaml"
    result = run_cli("export", "--sandbox", "inv_6p3j9", "--out", out, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "Exported 1 invite to a\\x1b]0;title\\x07.yaml." in result.stderr
    assert "\x1b" not in result.stderr and "\x07" not in result.stderr
    assert (tmp_path / out).exists()
    # And the $schema reference of reconciler.yaml, named in the note that it does not exist.
    (tmp_path / "reconciler.yaml").write_text('schema_ref: "x\\e]0;PWN\\a.json"\n')
    result = run_cli("export", "--sandbox", "inv_6p3j9", "--out", "b.yaml", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "x\\x1b]0;PWN\\x07.json, which does not exist" in result.stderr
    assert "\x1b" not in result.stderr and "\x07" not in result.stderr


def test_blank_lines_and_comments_are_ignored_and_each_id_is_kept_once() -> None:
    text = "# from the console, 2026-11-26\n\ninv_8f2k1\n  inv_3m9q7  # Acme\n\ninv_8f2k1\r\n"
    assert ids_in(text, "ids.txt") == ["inv_8f2k1", "inv_3m9q7"]


def test_bad_ids_are_named_at_their_line_and_nothing_is_read(tmp_path: Path) -> None:
    path = tmp_path / "ids.txt"
    path.write_text("inv_1\ninv 2\n# ok\n..\ninv_\u202e3\n", encoding="utf-8")
    with pytest.raises(ReconcilerError) as caught:
        read_ids(str(path))
    message = str(caught.value)
    assert f"{path}:2: 'inv 2'" in message
    assert f"{path}:4: '..'" in message
    assert f"{path}:5: 'inv_\\u202e3'" in message  # escaped, never the raw bidi mark
    assert "\u202e" not in message
    assert "not a valid invite id" in message and "nothing was read" in message
    assert f"{path}:1" not in message


def test_lines_are_counted_as_editors_count_them_and_a_control_character_splits_no_id() -> None:
    # str.splitlines() also breaks at U+2028, U+0085, \x0b, \x0c and \x1c-\x1e: a line
    # separator in a comment shifted every later line number, and "a\x1cb" became two ids.
    with pytest.raises(ReconcilerError) as caught:
        ids_in("inv_1 # pasted\u2028note\n\nbad!\ninv_2\x1cinv_3\n", "ids.txt")
    message = str(caught.value)
    assert "ids.txt:3: 'bad!'" in message
    assert "ids.txt:4: 'inv_2\\x1cinv_3'" in message


def test_many_bad_ids_name_ten_then_how_many_more() -> None:
    with pytest.raises(ReconcilerError, match="and 5 more"):
        ids_in("".join(f"bad id {n}\n" for n in range(15)), "ids.txt")


def _stdin(monkeypatch: pytest.MonkeyPatch, data: bytes, *, typed: bool = False) -> None:
    class Typed(io.TextIOWrapper):
        def isatty(self) -> bool:
            return typed

    monkeypatch.setattr(sys, "stdin", Typed(io.BytesIO(data), encoding="utf-8"))


def test_a_file_or_stdin_past_the_bound_is_refused_without_reading_it_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(export, "MAX_IDS_BYTES", 64)
    path = tmp_path / "ids.txt"
    path.write_text("inv_1\n" * 11, encoding="utf-8")  # 66 bytes
    with pytest.raises(ReconcilerError, match="too large for a list of invite ids"):
        read_ids(str(path))
    path.write_text("inv_1\n" * 10, encoding="utf-8")
    assert read_ids(str(path)) == ["inv_1"]
    _stdin(monkeypatch, b"inv_1\n" * 11)
    with pytest.raises(ReconcilerError, match="stdin: larger than"):
        read_ids("-")


def test_a_device_or_a_fifo_is_refused_not_read_forever_naming_the_pipe_to_use(tmp_path) -> None:
    with pytest.raises(ReconcilerError, match="not a regular file"):
        read_ids("/dev/zero")
    fifo = tmp_path / "ids"
    os.mkfifo(fifo)
    with pytest.raises(ReconcilerError) as caught:
        read_ids(str(fifo))
    assert "--ids-from -" in str(caught.value)


def test_stdin_is_read_when_the_source_is_a_dash_and_a_terminal_is_told_how_to_end(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _stdin(
        monkeypatch, b"\xef\xbb\xbfinv_1\ninv_2\n"
    )  # a byte-order mark, as some editors save, is no id
    assert read_ids("-") == ["inv_1", "inv_2"]
    assert capsys.readouterr().err == ""
    _stdin(monkeypatch, b"inv_1\n", typed=True)
    assert read_ids("-") == ["inv_1"]
    assert "one a line; Ctrl-D ends" in capsys.readouterr().err


def test_text_that_is_not_utf8_is_refused_at_its_line(tmp_path: Path) -> None:
    # A list saved as Windows-1252 from a spreadsheet: which line, which byte.
    path = tmp_path / "ids.txt"
    path.write_bytes(b"inv_1\ninv_2\n\x93inv_3\x94\n")
    with pytest.raises(ReconcilerError) as refused:
        read_ids(str(path))
    assert str(refused.value) == (
        f"{path}:3: not UTF-8 text (byte 0x93): save the list of invite ids as UTF-8; "
        "nothing was read"
    )


def test_export_with_no_ids_at_all_says_how_to_give_them(tmp_path: Path) -> None:
    (tmp_path / "ids.txt").write_text("# none yet\n\n", encoding="utf-8")
    result = run_cli("export", "--ids-from", "ids.txt", cwd=tmp_path, env=clean_env())
    assert result.returncode == 1
    assert "ids.txt holds none, only blank lines and comments" in result.stderr
    assert "--ids-from FILE" in result.stderr and "Traceback" not in result.stderr
