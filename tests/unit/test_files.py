"""reconciler.files attacked: FIFOs and devices read, links swapped, read-only directories,
a file turned into a directory, `..` in paths, and a file changed between the check and
the rename."""

from __future__ import annotations

import errno
import os
import stat
import threading
from pathlib import Path
from typing import Any

import pytest

from reconciler import files
from reconciler.errors import ReconcilerError
from reconciler.files import (
    FileChanged,
    NotRegularFile,
    TooLarge,
    read_for_rewrite,
    read_regular,
    refuse_input,
    replace_all,
    replace_read,
    write_output,
)

LIMIT = 1024 * 1024
OLD = "invites:\n  - id: inv_a\n    name: Old\n"
NEW = "invites:\n  - id: inv_a\n    name: New\n"


def mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


def leftovers(directory: Path) -> list[str]:
    return [p.name for p in directory.iterdir() if p.name.startswith(".reconcile-")]


@pytest.fixture
def file(tmp_path: Path) -> Path:
    path = tmp_path / "a.yaml"
    path.write_text(OLD, encoding="utf-8")
    os.chmod(path, 0o640)
    return path


def test_a_file_read_is_replaced_whole_keeping_its_mode(file: Path) -> None:
    read = read_for_rewrite(str(file), LIMIT)
    replace_read(read, NEW, "the invite file")
    assert file.read_text(encoding="utf-8") == NEW
    assert mode(file) == 0o640
    assert leftovers(file.parent) == []


def test_private_outputs_are_0600_whatever_the_umask_and_others_keep_the_mode_they_replace(
    tmp_path: Path,
) -> None:
    previous = os.umask(0o000)
    try:
        write_output(str(tmp_path / "plan.json"), "{}", "plan file", private=True)
        write_output(str(tmp_path / "report.json"), "[]", "the report")
        os.chmod(tmp_path / "report.json", 0o604)
        write_output(str(tmp_path / "report.json"), "[1]", "the report")
    finally:
        os.umask(previous)
    assert mode(tmp_path / "plan.json") == 0o600
    assert (tmp_path / "report.json").read_text(encoding="utf-8") == "[1]"
    assert mode(tmp_path / "report.json") == 0o604


def test_an_edit_after_the_read_is_never_overwritten(file: Path) -> None:
    read = read_for_rewrite(str(file), LIMIT)
    file.write_text(OLD.replace("Old", "Hand"), encoding="utf-8")
    with pytest.raises(FileChanged, match=r"a\.yaml: not written .* changed since it was read"):
        replace_read(read, NEW, "the invite file")
    assert file.read_text(encoding="utf-8") == OLD.replace("Old", "Hand")
    assert leftovers(file.parent) == []


def test_an_edit_between_the_first_check_and_the_rename_is_caught_by_the_second(
    file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The file is compared again after the new text is written and synced, just before
    the rename: an edit made while the temporary file was written is kept."""
    read = read_for_rewrite(str(file), LIMIT)
    real_fsync = os.fsync

    def edit_then_fsync(fd: int) -> None:
        file.write_text("edited meanwhile\n", encoding="utf-8")
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", edit_then_fsync)
    with pytest.raises(FileChanged, match="changed since it was read"):
        replace_read(read, NEW, "the invite file")
    assert file.read_text(encoding="utf-8") == "edited meanwhile\n"
    assert leftovers(file.parent) == []


def test_the_window_left_is_between_the_last_compare_and_the_rename(
    file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """POSIX has no compare-and-swap for a rename: an edit landing after the last compare
    and before rename(2) is replaced. This pins down where that window is (and that it is
    the only one: every earlier edit is refused, above)."""
    read = read_for_rewrite(str(file), LIMIT)
    real_replace = os.replace

    def edit_then_replace(src: str, dst: str, **dir_fds: int) -> None:
        file.write_text("edited in the window\n", encoding="utf-8")
        real_replace(src, dst, **dir_fds)

    monkeypatch.setattr(os, "replace", edit_then_replace)
    replace_read(read, NEW, "the invite file")
    assert file.read_text(encoding="utf-8") == NEW


def test_a_symlink_swapped_between_read_and_write_is_refused(tmp_path: Path) -> None:
    mine, other = tmp_path / "mine.yaml", tmp_path / "other.yaml"
    mine.write_text(OLD, encoding="utf-8")
    other.write_text(OLD, encoding="utf-8")  # the same bytes: only the link tells them apart
    link = tmp_path / "link.yaml"
    link.symlink_to(mine)
    read = read_for_rewrite(str(link), LIMIT)
    link.unlink()
    link.symlink_to(other)
    with pytest.raises(FileChanged, match=r"now leads to .*other\.yaml, not the file read"):
        replace_read(read, NEW, "the invite file")
    assert mine.read_text(encoding="utf-8") == OLD == other.read_text(encoding="utf-8")
    assert link.is_symlink()


def test_a_directory_swapped_for_another_holding_the_same_bytes_is_refused(
    tmp_path: Path,
) -> None:
    """The path, the link targets and the bytes all match: only the directory's identity
    tells them apart, and the new file never goes into the directory put in its place."""
    folder = tmp_path / "invites"
    folder.mkdir()
    (folder / "a.yaml").write_text(OLD, encoding="utf-8")
    read = read_for_rewrite(str(folder / "a.yaml"), LIMIT)
    folder.rename(tmp_path / "moved")
    folder.mkdir()
    (folder / "a.yaml").write_text(OLD, encoding="utf-8")
    with pytest.raises(FileChanged, match="its directory was replaced"):
        replace_read(read, NEW, "the invite file")
    assert (folder / "a.yaml").read_text(encoding="utf-8") == OLD
    assert (tmp_path / "moved" / "a.yaml").read_text(encoding="utf-8") == OLD
    assert leftovers(folder) == leftovers(tmp_path / "moved") == []


def test_a_directory_swapped_while_the_new_text_is_written_never_receives_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "invites"
    folder.mkdir()
    (folder / "a.yaml").write_text(OLD, encoding="utf-8")
    read = read_for_rewrite(str(folder / "a.yaml"), LIMIT)
    outside = tmp_path / "outside"
    outside.mkdir()
    real_fsync = os.fsync
    swapped: list[bool] = []

    def swap_then_fsync(fd: int) -> None:
        if not swapped:  # the first sync: the temporary file's, before the rename
            swapped.append(True)
            folder.rename(tmp_path / "moved")
            folder.symlink_to(outside)
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", swap_then_fsync)
    with pytest.raises(FileChanged):
        replace_read(read, NEW, "the invite file")
    assert list(outside.iterdir()) == []
    assert (tmp_path / "moved" / "a.yaml").read_text(encoding="utf-8") == OLD
    assert leftovers(tmp_path / "moved") == []


def test_a_file_swapped_for_a_symlink_to_the_same_bytes_elsewhere_is_refused(
    file: Path, tmp_path: Path
) -> None:
    read = read_for_rewrite(str(file), LIMIT)
    elsewhere = tmp_path / "outside.yaml"
    elsewhere.write_text(OLD, encoding="utf-8")
    file.unlink()
    file.symlink_to(elsewhere)
    with pytest.raises(FileChanged, match="now leads to"):
        replace_read(read, NEW, "the invite file")
    assert elsewhere.read_text(encoding="utf-8") == OLD and file.is_symlink()


def test_a_link_the_user_keeps_is_written_through_and_stays_a_link(tmp_path: Path) -> None:
    target = tmp_path / "real.yaml"
    target.write_text(OLD, encoding="utf-8")
    os.chmod(target, 0o600)
    link = tmp_path / "link.yaml"
    link.symlink_to(target)
    replace_read(read_for_rewrite(str(link), LIMIT), NEW, "the invite file")
    assert link.is_symlink() and target.read_text(encoding="utf-8") == NEW
    assert mode(target) == 0o600


def test_a_file_replaced_by_a_directory_or_a_fifo_is_refused_without_blocking(
    file: Path,
) -> None:
    read = read_for_rewrite(str(file), LIMIT)
    file.unlink()
    file.mkdir()
    with pytest.raises(FileChanged, match="it is a directory"):
        replace_read(read, NEW, "the invite file")
    assert file.is_dir() and list(file.iterdir()) == []
    file.rmdir()
    os.mkfifo(file)
    # Opening a FIFO without a writer would block: refused at once (O_NONBLOCK).
    done = threading.Event()

    def attempt() -> None:
        with pytest.raises(FileChanged, match="FIFO"):
            replace_read(read, NEW, "the invite file")
        done.set()

    thread = threading.Thread(target=attempt, daemon=True)
    thread.start()
    thread.join(10)
    assert done.is_set() and stat.S_ISFIFO(file.lstat().st_mode)
    assert leftovers(file.parent) == []


@pytest.mark.parametrize("kind", ["fifo", "directory"])
def test_an_output_onto_a_fifo_or_a_directory_is_refused_and_left_as_it_is(
    tmp_path: Path, kind: str
) -> None:
    path = tmp_path / "out.json"
    if kind == "fifo":
        os.mkfifo(path)
    else:
        path.mkdir()
    with pytest.raises(ReconcilerError, match="not a regular file, and is left as it is"):
        write_output(str(path), "{}", "plan file", private=True)
    assert stat.S_ISFIFO(path.lstat().st_mode) if kind == "fifo" else path.is_dir()
    assert leftovers(tmp_path) == []


def test_a_read_only_directory_fails_the_write_and_leaves_the_file(
    file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    read = read_for_rewrite(str(file), LIMIT)
    if os.geteuid() == 0:
        # root writes in a 0555 directory: make creating the temporary file fail as it would.
        real_open = os.open

        def refused(path: Any, flags: int, *args: Any, **kwargs: Any) -> int:
            if flags & os.O_CREAT:
                raise PermissionError(13, "Permission denied")
            return real_open(path, flags, *args, **kwargs)

        monkeypatch.setattr(os, "open", refused)
    else:
        os.chmod(file.parent, 0o555)
    try:
        with pytest.raises(
            ReconcilerError, match=r"a\.yaml: cannot write the invite file: Permission"
        ):
            replace_read(read, NEW, "the invite file")
    finally:
        os.chmod(file.parent, 0o755)
    assert file.read_text(encoding="utf-8") == OLD and mode(file) == 0o640
    assert leftovers(file.parent) == []


def test_dotdot_in_a_path_names_the_same_file(file: Path, tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    dotted = str(tmp_path / "sub" / ".." / "a.yaml")
    with pytest.raises(ReconcilerError, match="is a file this run reads"):
        refuse_input(dotted, [str(file)], "--out", "the plan")
    refuse_input(str(tmp_path / "sub" / ".." / "b.yaml"), [str(file)], "--out", "the plan")
    write_output(str(tmp_path / "sub" / ".." / "b.json"), "{}", "plan file", private=True)
    assert (tmp_path / "b.json").read_text(encoding="utf-8") == "{}"
    assert leftovers(tmp_path) == leftovers(tmp_path / "sub") == []


def test_create_only_never_replaces_a_file_that_appeared(tmp_path: Path) -> None:
    path = tmp_path / "x.yaml"
    path.write_text("someone else's\n", encoding="utf-8")
    with pytest.raises(ReconcilerError, match="a file appeared there meanwhile"):
        write_output(str(path), NEW, "the export", create_only=True)
    assert path.read_text(encoding="utf-8") == "someone else's\n"
    assert leftovers(tmp_path) == []
    write_output(str(tmp_path / "y.yaml"), NEW, "the export", create_only=True)
    assert (tmp_path / "y.yaml").read_text(encoding="utf-8") == NEW


def test_write_all_checks_every_file_first_then_names_those_written_before_a_failure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    paths = [tmp_path / f"{n}.yaml" for n in "abc"]
    for path in paths:
        path.write_text(OLD, encoding="utf-8")
    reads = [read_for_rewrite(str(p), LIMIT) for p in paths]
    paths[2].write_text("edited\n", encoding="utf-8")
    with pytest.raises(FileChanged, match=r"c\.yaml"):
        replace_all([(r, NEW) for r in reads], "the invite file")
    assert [p.read_text(encoding="utf-8") for p in paths] == [OLD, OLD, "edited\n"]

    reads = [read_for_rewrite(str(p), LIMIT) for p in paths]
    real = files.write_atomic

    def fail_on_c(target: str, *args: Any, **kwargs: Any) -> None:
        if target.endswith("c.yaml"):
            raise ReconcilerError(f"{target}: cannot write the invite file: disk full")
        real(target, *args, **kwargs)

    monkeypatch.setattr(files, "write_atomic", fail_on_c)
    with pytest.raises(ReconcilerError) as raised:
        replace_all([(r, NEW) for r in reads], "the invite file")
    message = str(raised.value)
    assert "c.yaml: cannot write the invite file: disk full" in message
    assert f"already written before this failure: {paths[0]}, {paths[1]}" in message
    assert [p.read_text(encoding="utf-8") for p in paths] == [NEW, NEW, "edited\n"]


def test_the_audit_log_is_created_0600_and_never_opened_through_a_link(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    os.close(files.open_append(str(path)))
    assert mode(path) == 0o600
    link = tmp_path / "link.jsonl"
    link.symlink_to(path)
    with pytest.raises(OSError):
        files.open_append(str(link))


def test_a_file_is_read_whole_up_to_its_readers_limit_and_refused_past_it(tmp_path: Path) -> None:
    file = tmp_path / "a.yaml"
    file.write_bytes(b"x" * 11)
    assert read_regular(file, 11) == read_for_rewrite(str(file), 11).data == b"x" * 11
    with pytest.raises(TooLarge) as too_large:
        read_regular(file, 10)
    assert too_large.value.limit == 10
    with pytest.raises(OSError, match="larger than") as refused:
        read_for_rewrite(str(file), 10)
    assert refused.value.errno == errno.EFBIG


@pytest.mark.parametrize(
    ("kind", "said"), [("device", "a device"), ("fifo", r"a FIFO \(named pipe\)")]
)
def test_an_endless_device_or_a_fifo_is_refused_at_once(
    tmp_path: Path, kind: str, said: str
) -> None:
    path = "/dev/zero" if kind == "device" else str(tmp_path / "plan.json")
    if kind == "fifo":
        os.mkfifo(path)  # opened without a writer, it would block: refused without waiting
    with pytest.raises(NotRegularFile, match=f"it is {said}, not a regular file"):
        read_regular(path, 10)
