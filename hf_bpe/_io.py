"""File helpers: atomic writes, so a failed save never leaves a half-written file behind; and
bounded reads of tokenizer files, which may come from anywhere.

Every loader opens tokenizer files through :func:`open_file`, which refuses what is not a regular file
(a FIFO, socket, device or folder would block ``open()`` or the read forever, or fail obscurely) and
turns the operating system's errors (missing, a folder, a symlink loop, no permission) into
:class:`~hf_bpe.errors.TokenizerFileError` naming the path; it reads through :func:`read_file`,
:func:`read_text` or :func:`read_json`: files larger
than :data:`MAX_FILE_BYTES` (after gzip decompression, which is streamed, so a small file that
inflates to gigabytes is refused after reading that much), gzip data that does not decompress, text
that is not UTF-8 and JSON that does not parse (including nesting too deep for the parser and
integers with more than 4,300 digits) raise :class:`~hf_bpe.errors.TokenizerFileError` naming the
file. Nothing is unpickled or executed.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import gc
import json
import os
import shutil
import stat
import sys
import tempfile
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO, cast

try:
    import fcntl
except ImportError:  # not POSIX: no locks, so stale temporary files are left for the user
    fcntl = None  # type: ignore[assignment]

from hf_bpe.errors import TokenizerFileError

MAX_FILE_BYTES = int(os.environ.get("HF_BPE_MAX_FILE_BYTES") or 256 * 2**20)
"""The largest tokenizer file hf_bpe reads, in bytes after decompression: 256 MiB (real tokenizer
files are at most tens of MB; a 10-million-token rank file is 170 MB). Set the environment variable
``HF_BPE_MAX_FILE_BYTES`` to change it."""

GZIP_MAGIC = b"\x1f\x8b"


def atomic_write(path: str | os.PathLike[str], data: bytes | str) -> Path:
    """Write ``data`` to ``path`` through a temporary file in the same folder, then rename it into
    place. Either the old file or the complete new one exists at every moment. Missing folders are
    created. A failure raises ``OSError`` naming ``path`` (never the temporary file) and why.

    >>> import os, tempfile
    >>> atomic_write(os.path.join(tempfile.mkdtemp(), "a", "b.txt"), "hi").read_text()
    'hi'
    """
    target = Path(path)
    payload = data.encode("utf-8") if isinstance(data, str) else data
    try:
        _write_atomically(target, payload)
    except OSError as error:
        raise _naming_target(error, target) from error
    return target


def _naming_target(error: OSError, target: Path) -> OSError:
    """``error`` as the same ``OSError`` subclass, naming ``target`` and saying which folder is a file."""
    blocking = next((folder for folder in target.parents if folder.is_file()), None)
    if blocking is not None:
        return NotADirectoryError(
            errno.ENOTDIR, f"cannot write {target}: {blocking} is a file, not a folder; choose another path"
        )
    if target.is_dir():
        return IsADirectoryError(errno.EISDIR, f"cannot write {target}: it is a folder; give a file name inside it")
    return type(error)(error.errno, f"cannot write {target}: {error.strerror or error}")


def _write_atomically(target: Path, payload: bytes) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = _temporary_file(target)
    try:
        # A new temporary file is private (0600); give it the mode a plain open() would.
        os.chmod(temporary, _mode_for(target))
        os.ftruncate(handle, 0)
        with os.fdopen(handle, "wb", closefd=False) as file:
            file.write(payload)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, target)
    except BaseException:
        try:
            os.unlink(temporary)
        except FileNotFoundError:
            pass
        raise
    finally:
        os.close(handle)  # after the rename: until then the lock keeps other writers off the file


def _temporary_file(target: Path) -> tuple[int, str]:
    """``.NAME.tmp`` beside ``target``, open for writing and locked (``flock``). The name is fixed, so
    what a killed write left is taken over, and so removed, by the next write of ``target``;
    concurrent writers of one file take turns. Where there are no locks (or the name is taken by
    something this process cannot open), a new uniquely named ``.NAME.*.tmp``."""
    temporary = os.fspath(target.parent / f".{target.name}.tmp")
    flags = os.O_WRONLY | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    while fcntl is not None:
        try:
            handle = os.open(temporary, flags, 0o600)
        except OSError:  # a symlink, a folder, another user's file
            break
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            current = os.stat(temporary, follow_symlinks=False).st_ino
        except FileNotFoundError:
            current = None
        if current == os.fstat(handle).st_ino:  # not renamed into place by the writer we waited for
            return handle, temporary
        os.close(handle)
    return tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")


def _locked_folder(target: Path) -> tuple[int, str]:
    """A new folder ``.NAME.*.saving`` beside ``target``, open and locked (``flock``) for as long as
    this process holds it: what a killed process leaves is unlocked, and :func:`remove_stale`
    removes it on the next save."""
    while True:
        temporary = tempfile.mkdtemp(dir=target.parent, prefix=f".{target.name}.", suffix=".saving")
        handle = os.open(temporary, os.O_RDONLY)
        if fcntl is None:
            return handle, temporary
        fcntl.flock(handle, fcntl.LOCK_EX)
        if os.fstat(handle).st_nlink > 0:  # not removed as stale before the lock was taken
            return handle, temporary
        os.close(handle)


def remove_stale(folder: Path, prefix: str, suffix: str) -> None:
    """Remove the temporary files and folders named ``PREFIX*SUFFIX`` in ``folder`` that no live
    process holds (see :func:`_locked_folder`): what a save killed midway (``kill -9``, a crash,
    the power) left behind."""
    if fcntl is None:
        return
    try:
        entries = [entry for entry in os.scandir(folder) if entry.name.startswith(prefix) and entry.name.endswith(suffix)]
    except OSError:
        return
    for entry in entries:
        try:
            handle = os.open(entry.path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
        except OSError:
            continue
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            if entry.is_dir(follow_symlinks=False):
                shutil.rmtree(entry.path, ignore_errors=True)
            else:
                os.unlink(entry.path)
        except OSError:  # held by a live save, or already gone
            pass
        finally:
            os.close(handle)


@contextlib.contextmanager
def replacing_folder(folder: str | os.PathLike[str]) -> Iterator[Path]:
    """Write a folder as a whole: yields an empty folder beside ``folder`` (``.NAME.*.saving``) to
    write into; when the block ends, it replaces ``folder`` at once, so that a kill or a full disk
    leaves either the old folder or the new one complete, never a mix. An error in the block leaves
    ``folder`` untouched.

    Entries of the old folder that the block did not write are kept (hard links, or copies where the
    file system has none; sockets and devices are dropped). A symlink in the old folder is never
    written through: a written name replaces it. When ``folder`` is a symlink to a folder, the folder
    it points to is replaced. Linux swaps the two folders in one step (``renameat2`` with
    ``RENAME_EXCHANGE``); elsewhere, and for a mount point or the current folder, the files are moved
    in one at a time (each atomically, ``tokenizer_config.json`` first). What a killed save left
    beside the folder is removed by the next one.

    >>> import os, tempfile
    >>> folder = os.path.join(tempfile.mkdtemp(), "tok")
    >>> with replacing_folder(folder) as staging:
    ...     _ = (staging / "a.txt").write_text("new")
    >>> os.listdir(folder)
    ['a.txt']
    """
    target = Path(os.path.realpath(folder))
    if target.exists() and not target.is_dir():
        raise NotADirectoryError(errno.ENOTDIR, f"cannot write the folder {os.fspath(folder)}: it is a file")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        remove_stale(target.parent, f".{target.name}.", ".saving")
        handle, name = _locked_folder(target)
    except OSError as error:
        raise _naming_target(error, target) from error
    staging = Path(name)
    try:
        try:
            yield staging
            _install(staging, target)
        except OSError as error:  # name the folder being saved, not the temporary one
            message = (error.strerror or str(error)).replace(os.fspath(staging), os.fspath(target))
            raise type(error)(error.errno, f"{message}; the folder {target} is unchanged") from error
    finally:
        shutil.rmtree(staging, ignore_errors=True)
        os.close(handle)


def _install(staging: Path, target: Path) -> None:
    """Put the folder ``staging`` in place of ``target`` (see :func:`replacing_folder`); ``staging``
    then holds the old folder (or nothing)."""
    if not target.exists():
        os.chmod(staging, 0o777 & ~_umask())
        try:
            os.rename(staging, target)
            return
        except OSError:  # created meanwhile: move the files in
            _move_files_in(staging, target)
            return
    os.chmod(staging, stat.S_IMODE(target.stat().st_mode))
    cwd = Path.cwd()
    if os.path.ismount(target) or cwd == target or target in cwd.parents:
        _move_files_in(staging, target)
        return
    written = set(os.listdir(staging))
    carried = [entry.name for entry in os.scandir(target) if entry.name not in written]
    for name in carried:
        _carry(target / name, staging / name)
    if not _exchange(staging, target):
        for name in carried:
            if (staging / name).is_dir() and not (staging / name).is_symlink():
                shutil.rmtree(staging / name)
            elif os.path.lexists(staging / name):
                os.unlink(staging / name)
        _move_files_in(staging, target)


def _carry(source: Path, destination: Path) -> None:
    """Keep the entry ``source`` of the old folder as ``destination`` in the new one, cheaply."""
    mode = source.lstat().st_mode
    if stat.S_ISLNK(mode):
        os.symlink(os.readlink(source), destination)
    elif stat.S_ISDIR(mode):
        shutil.copytree(source, destination, symlinks=True, copy_function=_link_or_copy)
    elif stat.S_ISREG(mode):
        _link_or_copy(source, destination)
    elif stat.S_ISFIFO(mode):
        os.mkfifo(destination, stat.S_IMODE(mode))


def _link_or_copy(source: str | os.PathLike[str], destination: str | os.PathLike[str]) -> None:
    try:
        os.link(source, destination, follow_symlinks=False)
    except OSError:
        shutil.copy2(source, destination, follow_symlinks=False)


def _move_files_in(staging: Path, target: Path) -> None:
    """The fallback of :func:`_install`: each entry of ``staging`` renamed over its name in ``target``
    (atomic per file; a symlink there is replaced, not followed), ``tokenizer_config.json`` first so
    that a folder left half-moved disagrees with the fingerprint it records."""
    target.mkdir(parents=True, exist_ok=True)
    names = sorted(os.listdir(staging), key=lambda name: not name.endswith("tokenizer_config.json"))
    for name in names:
        destination = target / name
        if (staging / name).is_dir() and destination.is_dir() and not destination.is_symlink():
            shutil.rmtree(destination)
        os.replace(staging / name, destination)


_RENAME_EXCHANGE = 2
_AT_FDCWD = -100


def _exchange(first: Path, second: Path) -> bool:
    """Swap the folders ``first`` and ``second`` atomically (Linux ``renameat2(RENAME_EXCHANGE)``);
    false where that is not available."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
    except (AttributeError, OSError):
        return False
    renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    if renameat2(_AT_FDCWD, os.fsencode(first), _AT_FDCWD, os.fsencode(second), _RENAME_EXCHANGE) != 0:
        code = ctypes.get_errno()
        if code in (errno.EINVAL, errno.ENOSYS, errno.EPERM, errno.EXDEV, errno.EBUSY, errno.ENOTSUP):
            return False
        raise OSError(code, f"cannot replace the folder {second}: {os.strerror(code)}")
    return True


def _umask() -> int:
    umask = os.umask(0)
    os.umask(umask)
    return umask


def _mode_for(target: Path) -> int:
    """The existing file's permissions, or those of a new file under the current umask."""
    try:
        return target.stat().st_mode & 0o7777
    except FileNotFoundError:
        return 0o666 & ~_umask()


def open_file(path: str | os.PathLike[str]) -> BinaryIO:
    """``path`` opened for reading in binary, when it is a regular file (or a symlink to one).

    Anything else raises :class:`~hf_bpe.errors.TokenizerFileError` naming ``path`` before it is
    opened: a FIFO, socket or device (opening or reading one blocks until another process writes, maybe
    forever) or a folder. The file is opened without blocking and checked again once open, so it
    cannot be swapped for a FIFO in between. Errors of the operating system (no such file, a symlink
    loop, no permission) raise a :class:`~hf_bpe.errors.TokenizerFileError` that is also the matching
    ``OSError`` (``FileNotFoundError``, ``PermissionError``, ...), for callers that catch those.

    >>> import os, tempfile
    >>> fifo = os.path.join(tempfile.mkdtemp(), "tokenizer.json")
    >>> os.mkfifo(fifo)
    >>> open_file(fifo)
    Traceback (most recent call last):
    ...
    hf_bpe.errors.TokenizerFileError: ...tokenizer.json: a FIFO (named pipe), not a regular file; ...
    """
    check_file(path)
    try:
        descriptor = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError as error:
        raise file_error(path, error) from None
    try:
        _refuse_special(path, os.fstat(descriptor).st_mode)
        if hasattr(os, "set_blocking"):
            os.set_blocking(descriptor, True)
        return os.fdopen(descriptor, "rb")
    except BaseException:
        os.close(descriptor)
        raise


def check_file(path: str | os.PathLike[str]) -> None:
    """Raise the :class:`~hf_bpe.errors.TokenizerFileError` that :func:`open_file` would when
    ``path`` is not a readable regular file, without opening it."""
    try:
        mode = os.stat(path).st_mode
    except OSError as error:
        raise file_error(path, error) from None
    _refuse_special(path, mode)


_KINDS = ((stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISSOCK, "a socket"),
          (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"))


def _refuse_special(path: str | os.PathLike[str], mode: int) -> None:
    if stat.S_ISREG(mode):
        return
    if stat.S_ISDIR(mode):
        raise file_error(path, IsADirectoryError(errno.EISDIR, "a folder"))
    kind = next((name for test, name in _KINDS if test(mode)), "not a file")
    raise TokenizerFileError(
        path, f"{kind}, not a regular file; hf_bpe reads tokenizer files only from regular files "
        "(copy the data into a file and pass that)"
    )


_FIXES = {
    errno.ENOENT: "no such file; check the path",
    errno.EISDIR: "a folder, not a file; give the tokenizer file inside it",
    errno.ELOOP: "a symlink loop (or too many symlinks); point the link at a real file",
    errno.EACCES: "permission denied; make the file readable (chmod +r) or read it as its owner",
    errno.EPERM: "permission denied; make the file readable (chmod +r) or read it as its owner",
    errno.ENOTDIR: "a part of the path is a file, not a folder; check the path",
    errno.ENAMETOOLONG: "the name is too long; check the path",
}


def file_error(path: str | os.PathLike[str], error: OSError) -> TokenizerFileError:
    """A :class:`~hf_bpe.errors.TokenizerFileError` naming ``path`` that says what ``error`` means
    and how to fix it; it is also an instance of ``error``'s ``OSError`` subclass, with its ``errno``."""
    problem = _FIXES.get(error.errno or 0) or f"cannot read it: {error.strerror or error}"
    kind = type(error)
    if kind not in _FILE_ERRORS:
        _FILE_ERRORS[kind] = type("TokenizerFileError", (TokenizerFileError, kind),
                                  {"__module__": __name__, "__str__": TokenizerFileError.__str__})
    wrapped: Any = _FILE_ERRORS[kind](path, problem)
    wrapped.errno, wrapped.strerror, wrapped.filename = error.errno, error.strerror, os.fspath(path)
    return cast(TokenizerFileError, wrapped)


_FILE_ERRORS: dict[type[OSError], type[TokenizerFileError]] = {}
"""``TokenizerFileError`` that is also a ``FileNotFoundError``, ``PermissionError``, ..., by the latter."""


def read_file(path: str | os.PathLike[str], *, limit: int | None = None, decompress: bool = True) -> bytes:
    """The bytes of a tokenizer file, decompressed when it is gzip data (unless ``decompress`` is
    false); a file (or its decompressed data) over ``limit`` bytes (default :data:`MAX_FILE_BYTES`)
    or corrupt gzip data raises :class:`~hf_bpe.errors.TokenizerFileError`."""
    limit = MAX_FILE_BYTES if limit is None else limit
    with open_file(path) as file:
        size = os.fstat(file.fileno()).st_size
        if size > limit:
            raise TokenizerFileError(path, _too_large(f"is {size:,} bytes", limit))
        data = file.read(limit + 1)
    if len(data) > limit:  # it grew while being read
        raise TokenizerFileError(path, _too_large(f"has more than {limit:,} bytes", limit))
    if decompress and data.startswith(GZIP_MAGIC):
        data = _gunzip(path, data, limit)
    return data


def _gunzip(path: str | os.PathLike[str], data: bytes, limit: int) -> bytes:
    """Decompress gzip data (all its members), stopping as soon as it exceeds ``limit`` bytes."""
    parts: list[bytes] = []
    total = 0
    rest = data
    while rest:
        decompressor = zlib.decompressobj(16 + zlib.MAX_WBITS)  # a gzip header and trailer
        try:
            part = decompressor.decompress(rest, limit + 1 - total)
        except zlib.error as error:
            raise TokenizerFileError(path, f"corrupt gzip data: {error}") from None
        total += len(part)
        if total > limit:
            raise TokenizerFileError(path, _too_large(f"decompresses to more than {limit:,} bytes", limit))
        if not decompressor.eof:
            raise TokenizerFileError(path, "corrupt gzip data: it ends before the compressed stream does")
        parts.append(part)
        rest = decompressor.unused_data.lstrip(b"\0")  # the next member; gzip pads with zeros
        if rest and not rest.startswith(GZIP_MAGIC):
            raise TokenizerFileError(path, "corrupt gzip data: trailing bytes after the compressed stream")
    return b"".join(parts)


def _too_large(what: str, limit: int) -> str:
    return (f"{what}, more than hf_bpe reads ({limit:,} bytes; real tokenizer files are at most tens of MB); "
            "set HF_BPE_MAX_FILE_BYTES to read larger files")


def read_text(path: str | os.PathLike[str], *, limit: int | None = None) -> str:
    """A tokenizer file's text (see :func:`read_file`); text that is not UTF-8 raises
    :class:`~hf_bpe.errors.TokenizerFileError` saying where."""
    return text_of(read_file(path, limit=limit), path)


def text_of(data: bytes, path: str | os.PathLike[str]) -> str:
    """The text of a tokenizer file's bytes (see :func:`read_text`); ``path`` names it in the error."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise TokenizerFileError(
            path, f"not UTF-8 text: byte {data[error.start]:#04x} at offset {error.start} ({error.reason})"
        ) from None


def read_json(path: str | os.PathLike[str], *, limit: int | None = None) -> Any:
    """A tokenizer file's JSON (see :func:`read_text`); JSON that does not parse raises
    :class:`~hf_bpe.errors.TokenizerFileError`."""
    return json_of(read_text(path, limit=limit), path)


def json_of(text: str, path: str | os.PathLike[str]) -> Any:
    """The JSON of a tokenizer file's text (see :func:`read_json`); ``path`` names it in the error."""
    # Without the cyclic garbage collector while parsing: the parse makes hundreds of thousands of
    # lists (a tokenizer.json's merges), none of them garbage, over which it would run again and
    # again (about 8% of the parse of a 250,000-token file).
    collecting = gc.isenabled()
    gc.disable()
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise TokenizerFileError(path, f"not valid JSON: {error}") from None
    except RecursionError:
        raise TokenizerFileError(path, "not valid JSON: arrays or objects nested too deeply to parse") from None
    except ValueError as error:  # e.g. an integer with more digits than Python converts
        raise TokenizerFileError(path, f"not valid JSON: {error}") from None
    finally:
        if collecting:
            gc.enable()
