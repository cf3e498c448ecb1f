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

import errno
import functools
import json
import os
import stat
import tempfile
import zlib
from pathlib import Path
from typing import Any, BinaryIO

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
    handle, temporary = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        # mkstemp creates the file private (0600); give it the mode a plain open() would.
        os.chmod(temporary, _mode_for(target))
        with os.fdopen(handle, "wb") as file:
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


def _mode_for(target: Path) -> int:
    """The existing file's permissions, or those of a new file under the current umask."""
    try:
        return target.stat().st_mode & 0o7777
    except FileNotFoundError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask


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
    hf_bpe._io.TokenizerFileError: ...tokenizer.json: a FIFO (named pipe), not a regular file; ...
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
    wrapped = _os_file_error(type(error))(path, problem)
    wrapped.errno, wrapped.strerror, wrapped.filename = error.errno, error.strerror, os.fspath(path)
    return wrapped


@functools.cache
def _os_file_error(kind: type[OSError]) -> type[TokenizerFileError]:
    """``TokenizerFileError`` that is also a ``kind`` (``FileNotFoundError``, ``PermissionError``, ...)."""
    return type("TokenizerFileError", (TokenizerFileError, kind),
                {"__module__": __name__, "__str__": TokenizerFileError.__str__})


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
    data = read_file(path, limit=limit)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise TokenizerFileError(
            path, f"not UTF-8 text: byte {data[error.start]:#04x} at offset {error.start} ({error.reason})"
        ) from None


def read_json(path: str | os.PathLike[str], *, limit: int | None = None) -> Any:
    """A tokenizer file's JSON (see :func:`read_text`); JSON that does not parse raises
    :class:`~hf_bpe.errors.TokenizerFileError`."""
    text = read_text(path, limit=limit)
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise TokenizerFileError(path, f"not valid JSON: {error}") from None
    except RecursionError:
        raise TokenizerFileError(path, "not valid JSON: arrays or objects nested too deeply to parse") from None
    except ValueError as error:  # e.g. an integer with more digits than Python converts
        raise TokenizerFileError(path, f"not valid JSON: {error}") from None
