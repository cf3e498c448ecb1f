"""Atomic writes: complete file or the old one, with ordinary permissions."""

from __future__ import annotations

import os
import stat

from hf_bpe._io import atomic_write


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
