"""An output folder claimed by one run at a time: a lock file created exclusively, naming its holder.

The lock is a file in the folder, ``LOCK_NAME``, holding the holder's process id and host name. It is
written under a temporary name and linked into place (``os.link`` fails when the name exists, on every
local file system and on NFS), so it exists only whole. A lock whose process is gone (same host, no such
process) is stale: it is taken over, with a warning. A lock held by a live process, or by another host
(whose processes cannot be checked from here), refuses the second run.
"""

from __future__ import annotations

import json
import os
import socket
import uuid
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

LOCK_NAME = ".hf_bpe.lock"
TAKEOVER_ATTEMPTS = 5


class FolderInUseError(OSError):
    """Another run holds the output folder (its lock file names the process and host): an OSError, as a
    busy resource is."""


@contextmanager
def claimed(folder: Path) -> Iterator[None]:
    """Hold ``folder`` (created if missing) for this process while the ``with`` block runs.

    >>> import pathlib, tempfile
    >>> folder = pathlib.Path(tempfile.mkdtemp())
    >>> with claimed(folder):
    ...     (folder / LOCK_NAME).exists()
    True
    >>> (folder / LOCK_NAME).exists()
    False
    """
    folder.mkdir(parents=True, exist_ok=True)
    lock = folder / LOCK_NAME
    mine = _take(lock, folder)
    try:
        yield
    finally:
        if _read(lock) == mine:
            lock.unlink(missing_ok=True)


def _take(lock: Path, folder: Path) -> dict[str, Any]:
    mine = {"pid": os.getpid(), "host": socket.gethostname(), "token": uuid.uuid4().hex}
    for _attempt in range(TAKEOVER_ATTEMPTS):
        if _create(lock, mine):
            return mine
        holder = _read(lock)
        if holder is None:
            continue  # released meanwhile (or unreadable: see _read); try again
        if _alive(holder):
            raise FolderInUseError(
                f"{folder} is in use by another run (process {holder.get('pid')} on {holder.get('host')}, "
                f"its lock file {lock}): wait for it to finish, or give another folder; if that run is gone "
                f"(e.g. its machine stopped), delete {lock}"
            )
        if _remove_stale(lock, holder):
            warnings.warn(f"{folder}: took over the lock of process {holder.get('pid')} on {holder.get('host')}, "
                          "which is no longer running (a run that was stopped); resuming in its folder",
                          stacklevel=4)
    raise FolderInUseError(f"{folder}: could not take its lock file {lock} (other runs keep taking it): run one at "
                           "a time in a folder")


def _create(lock: Path, content: dict[str, Any]) -> bool:
    """Put the lock in place whole, unless one exists."""
    staged = lock.with_name(f"{lock.name}.{content['token']}")
    staged.write_text(json.dumps(content), encoding="utf-8")
    try:
        os.link(staged, lock)
    except FileExistsError:
        return False
    finally:
        staged.unlink()
    return True


def _read(lock: Path) -> dict[str, Any] | None:
    """The holder named in the lock file; None when there is none. A lock that is not ours to read
    (unreadable, not JSON) counts as held by an unknown live process, never as stale."""
    try:
        text = lock.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except OSError:
        return {"pid": "unknown", "host": "unknown (the lock file is unreadable)"}
    try:
        holder = json.loads(text)
    except ValueError:
        holder = None
    if not isinstance(holder, dict):
        return {"pid": "unknown", "host": "unknown (the lock file is not one hf_bpe wrote)"}
    return holder


def _alive(holder: dict[str, Any]) -> bool:
    """Whether the holder may still run: always, unless it is a process of this host that is gone."""
    pid = holder.get("pid")
    if holder.get("host") != socket.gethostname() or isinstance(pid, bool) or not isinstance(pid, int) or pid < 1:
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's live process
    return True


def _remove_stale(lock: Path, holder: dict[str, Any]) -> bool:
    """Remove the stale lock ``holder`` wrote: move it aside, and put it back if another run had
    replaced it meanwhile (so a live run's lock is never removed)."""
    aside = lock.with_name(f"{lock.name}.stale-{uuid.uuid4().hex}")
    try:
        os.rename(lock, aside)
    except FileNotFoundError:
        return False  # another run removed it first
    if _read(aside) != holder:
        try:
            os.link(aside, lock)  # a live lock, taken after we read the stale one: put it back
        except FileExistsError:
            pass
        aside.unlink()
        return False
    aside.unlink()
    return True
