"""Invite files that are not UTF-8 text, or that grow past the size limit while read."""

from __future__ import annotations

import contextlib
import os
import threading
from pathlib import Path

import pytest

import reconciler.desired.state
from reconciler.desired.state import load_file

ENTRY = "invites:\n  - id: inv_1\n"


def problems(path: Path) -> list[str]:
    return [str(p) for p in load_file(path)[1]]


def test_a_utf16_file_is_refused_at_its_first_byte(tmp_path: Path) -> None:
    path = tmp_path / "team.yaml"
    path.write_text(ENTRY, encoding="utf-16")
    assert problems(path) == [f"{path}:1:1: not valid UTF-8 (byte 0xff); save the file as UTF-8"]


def test_a_latin1_byte_is_shown_at_its_character_column(tmp_path: Path) -> None:
    path = tmp_path / "team.yaml"
    path.write_bytes(ENTRY.encode() + "    name: Müller Caf".encode() + b"\xe9\n")
    # Column 21 counts "ü" as the one character it is, not its two bytes.
    assert problems(path) == [f"{path}:3:21: not valid UTF-8 (byte 0xe9); save the file as UTF-8"]


def test_a_control_character_is_named_where_it_is(tmp_path: Path) -> None:
    path = tmp_path / "team.yaml"
    path.write_bytes(ENTRY.encode() + b"    name: A\x07B\n")
    assert problems(path) == [
        f"{path}:3:12: control character U+0007 is not allowed in YAML; remove it"
    ]


def test_a_file_that_grows_past_the_limit_while_read_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A pipe has no size to check first: the limit holds while reading.
    monkeypatch.setattr(reconciler.desired.state, "MAX_FILE_BYTES", 2 * 1024 * 1024)
    path = tmp_path / "team.yaml"
    os.mkfifo(path)

    def write_3_mib() -> None:
        with contextlib.suppress(BrokenPipeError), path.open("wb") as out:
            out.write(ENTRY.encode() + b"    name: Acme\n" + b"# padding\n" * 314_573)

    writer = threading.Thread(target=write_3_mib)
    writer.start()
    try:
        found = problems(path)
    finally:
        writer.join(10)
    assert found == [f"{path}:1:1: larger than 2 MiB; split it into several files"]
