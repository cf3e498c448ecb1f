"""Atomic writes: complete file or the old one, with ordinary permissions."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from hf_bpe._io import atomic_write, replacing_folder


def test_new_files_get_the_umask_mode_and_existing_files_keep_theirs(tmp_path) -> None:
    old_umask = os.umask(0o022)
    try:
        created = atomic_write(tmp_path / "new.txt", "hello")
        assert stat.S_IMODE(created.stat().st_mode) == 0o644
        existing = tmp_path / "kept.txt"
        existing.write_text("old")
        existing.chmod(0o640)
        atomic_write(existing, b"new")
        assert stat.S_IMODE(existing.stat().st_mode) == 0o640
        assert existing.read_bytes() == b"new"
    finally:
        os.umask(old_umask)


def test_a_write_takes_over_what_a_killed_write_left(tmp_path) -> None:
    stale = tmp_path / ".model.json.tmp"  # what a write killed before its rename leaves
    stale.write_text("a longer half-written file")
    atomic_write(tmp_path / "model.json", "new")
    assert sorted(os.listdir(tmp_path)) == ["model.json"]
    assert (tmp_path / "model.json").read_text() == "new"


def test_concurrent_writes_of_one_file_take_turns(tmp_path) -> None:
    import threading

    payloads = [f"writer {writer} " * (writer + 1) for writer in range(4)]

    def write(payload: str) -> None:
        for _ in range(50):
            atomic_write(tmp_path / "model.json", payload)
            assert (tmp_path / "model.json").read_text() in payloads

    threads = [threading.Thread(target=write, args=(payload,)) for payload in payloads]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(os.listdir(tmp_path)) == ["model.json"]


def test_a_write_replaces_a_symlink_instead_of_writing_through_it(tmp_path) -> None:
    outside = tmp_path / "outside.json"
    outside.write_text("keep")
    (tmp_path / "dir").mkdir()
    (tmp_path / "dir" / "config.json").symlink_to(outside)
    atomic_write(tmp_path / "dir" / "config.json", "new")
    assert outside.read_text() == "keep"
    assert not (tmp_path / "dir" / "config.json").is_symlink()


def make_folder(folder):
    folder.mkdir()
    (folder / "ours.json").write_text("old")
    (folder / "theirs.bin").write_text("kept")
    return folder


def test_replacing_folder_swaps_in_the_new_files_and_keeps_the_others(tmp_path) -> None:
    folder = make_folder(tmp_path / "tok")
    with replacing_folder(folder) as staging:
        assert staging.parent == tmp_path and staging.name.startswith(".tok.") and not os.listdir(staging)
        (staging / "ours.json").write_text("new")
        assert (folder / "ours.json").read_text() == "old"  # nothing changes before the block ends
    assert {path.name: path.read_text() for path in folder.iterdir()} == {"ours.json": "new", "theirs.bin": "kept"}
    assert os.listdir(tmp_path) == ["tok"]


def test_replacing_folder_leaves_the_folder_untouched_on_an_error(tmp_path) -> None:
    folder = make_folder(tmp_path / "tok")
    with pytest.raises(NotADirectoryError, match=f"cannot write {folder / 'ours.json' / 'x'}: {folder / 'ours.json'} "
                       f"is a file, not a folder; choose another path; the folder {folder} is unchanged"), \
            replacing_folder(folder) as staging:
        (staging / "ours.json").write_text("half")
        atomic_write(staging / "ours.json" / "x", "fails: ours.json is a file")
    assert {path.name: path.read_text() for path in folder.iterdir()} == {"ours.json": "old", "theirs.bin": "kept"}
    assert os.listdir(tmp_path) == ["tok"]


def test_replacing_folder_removes_what_killed_saves_left(tmp_path) -> None:
    folder = make_folder(tmp_path / "tok")
    (tmp_path / ".tok.abc.saving").mkdir()  # a killed save's staging folder, or the old folder it was removing
    (tmp_path / ".tok.abc.saving" / "ours.json").write_text("half")
    with replacing_folder(folder) as staging:
        (staging / "ours.json").write_text("new")
    assert os.listdir(tmp_path) == ["tok"]


@pytest.mark.parametrize("why", ["no exchange", "current folder"])
def test_without_an_atomic_swap_files_move_in_one_at_a_time(tmp_path, monkeypatch, why: str) -> None:
    """Where the folders cannot be swapped (not Linux, a mount point, the current folder), each file
    is renamed in (atomic per file; a symlink is replaced, not written through), the config first."""
    import hf_bpe._io

    folder = make_folder(tmp_path / "tok")
    outside = tmp_path / "outside.json"
    outside.write_text("keep")
    (folder / "tokenizer_config.json").symlink_to(outside)
    if why == "no exchange":
        monkeypatch.setattr(hf_bpe._io, "_exchange", lambda first, second: False)
    else:
        monkeypatch.chdir(folder)
    moved: list[str] = []
    replace = os.replace
    monkeypatch.setattr(os, "replace", lambda source, target: (moved.append(Path(target).name), replace(source, target)))
    with replacing_folder(folder) as staging:
        (staging / "ours.json").write_text("new")
        (staging / "tokenizer_config.json").write_text("{}")
    assert moved == ["tokenizer_config.json", "ours.json"]
    assert outside.read_text() == "keep"
    assert {path.name: path.read_text() for path in folder.iterdir()} == {
        "ours.json": "new", "theirs.bin": "kept", "tokenizer_config.json": "{}"
    }
    assert sorted(os.listdir(tmp_path)) == ["outside.json", "tok"]
