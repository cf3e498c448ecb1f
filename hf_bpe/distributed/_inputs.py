"""Input files: paths and glob patterns expanded in a fixed order, checked before any work starts,
and grouped into units of work of about a given size."""

from __future__ import annotations

import glob
import os
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

GLOB_CHARACTERS = frozenset("*?[")


def expand(inputs: Any) -> list[Path]:
    """Files named by ``inputs`` (a path, a glob pattern, or a list of them), in the order given, each
    pattern's matches sorted; a name that is neither a file nor a pattern matching one raises.

    >>> expand(["no/such/*.txt"])
    Traceback (most recent call last):
    ...
    FileNotFoundError: no/such/*.txt: no file matches this pattern
    """
    if isinstance(inputs, (str, os.PathLike)):
        inputs = [inputs]
    if isinstance(inputs, (bytes, bytearray)) or not isinstance(inputs, Iterable):
        raise TypeError(f"inputs must be a path, a glob pattern or a list of them, got {type(inputs).__name__}")
    paths: list[Path] = []
    for item in inputs:
        if not isinstance(item, (str, os.PathLike)):
            raise TypeError(f"inputs must be paths or glob patterns, got {type(item).__name__}: {item!r:.80}")
        name = os.fspath(item)
        if os.path.lexists(name) or not GLOB_CHARACTERS & set(name):
            paths.append(_checked(Path(name)))
            continue
        matches = sorted(glob.glob(name, recursive=True))
        files = [Path(match) for match in matches if os.path.isfile(match)]
        if not files:
            raise FileNotFoundError(f"{name}: no file matches this pattern")
        paths.extend(files)
    if not paths:
        raise ValueError("no inputs given: pass at least one file or glob pattern")
    duplicates = sorted(str(path) for path, times in Counter(paths).items() if times > 1)
    if duplicates:
        raise ValueError(f"inputs name the same file more than once: {duplicates[:3]}; give each file once")
    return paths


def _checked(path: Path) -> Path:
    if path.is_dir():
        raise IsADirectoryError(f"{path}: is a folder; pass the files in it (e.g. '{path}/*.txt')")
    if not path.exists():
        what = "a broken symbolic link" if path.is_symlink() else "no such file"
        raise FileNotFoundError(f"{path}: {what}")
    if not os.access(path, os.R_OK):
        raise PermissionError(f"{path}: not readable (permission denied)")
    return path


def fingerprint(path: Path) -> dict[str, Any]:
    """What identifies an input file's content cheaply: its absolute path, size and modification time."""
    status = path.stat()
    return {"path": str(path.resolve()), "bytes": status.st_size, "mtime_ns": status.st_mtime_ns}


def group_by_size(paths: list[Path], target_bytes: int) -> list[list[Path]]:
    """Consecutive files in groups of about ``target_bytes`` (a larger file is a group of its own).

    >>> group_by_size([], 10)
    []
    """
    groups: list[list[Path]] = []
    current: list[Path] = []
    size = 0
    for path in paths:
        file_size = path.stat().st_size
        if current and size + file_size > target_bytes:
            groups.append(current)
            current, size = [], 0
        current.append(path)
        size += file_size
    if current:
        groups.append(current)
    return groups
