from __future__ import annotations

import os
from pathlib import Path

import pytest

from reconciler.files import NotRegularFile, TooLarge, read_regular


def test_a_file_is_read_whole_up_to_its_limit(tmp_path: Path) -> None:
    path = tmp_path / "reconciler.yaml"
    path.write_bytes(b"x" * 10)
    assert read_regular(path, 10) == b"x" * 10


def test_a_file_past_its_limit_is_refused_with_the_limit(tmp_path: Path) -> None:
    path = tmp_path / "reconciler.yaml"
    path.write_bytes(b"x" * 11)
    with pytest.raises(TooLarge) as refused:
        read_regular(path, 10)
    assert refused.value.limit == 10


def test_an_endless_device_ends_at_once() -> None:
    with pytest.raises(NotRegularFile, match="not a regular file"):
        read_regular("/dev/zero", 10)


def test_a_fifo_is_refused_without_waiting_for_a_writer(tmp_path: Path) -> None:
    fifo = tmp_path / "plan.json"
    os.mkfifo(fifo)
    with pytest.raises(NotRegularFile, match="FIFO"):
        read_regular(fifo, 10)
