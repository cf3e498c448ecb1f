"""The GGUF container (llama.cpp's model file): a bounded reader of its header and metadata, and a
writer of files that hold metadata only. :mod:`conversion.gguf` gives the tokenizer meaning.

A GGUF file is ``GGUF``, a version (2 or 3), the number of tensors and of metadata entries, the
entries (a key, a type, a value: numbers, booleans, strings, arrays of one of them), the tensor
descriptions, then the tensor data. :func:`read_metadata` reads the entries and stops there: it
never reads tensor descriptions or data, so a model file of many gigabytes costs only its header.
The file is mapped, not read, and every count and length is checked against the bytes left before
it is used, so a truncated or corrupt file (or one whose counts claim more than the file holds)
raises :class:`~hf_bpe.errors.TokenizerFileError` naming the file and the entry, and never
allocates more than the file's size. Little-endian files only, as llama.cpp reads them.

>>> import os, tempfile
>>> path = os.path.join(tempfile.mkdtemp(), "tiny.gguf")
>>> _ = write(path, [("general.architecture", Value(STRING, b"llama")),
...                  ("tokenizer.ggml.scores", Value(ARRAY, [0.0, -1.5], FLOAT32))])
>>> metadata = read_metadata(path)
>>> metadata["general.architecture"].value, metadata["tokenizer.ggml.scores"].value
(b'llama', [0.0, -1.5])
"""

from __future__ import annotations

import mmap
import os
import struct
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hf_bpe._io import MAX_FILE_BYTES, atomic_write, open_file
from hf_bpe.errors import TokenizerFileError

__all__ = [
    "ALIGNMENT", "ARRAY", "BOOL", "FLOAT32", "FLOAT64", "INT8", "INT16", "INT32", "INT64", "MAGIC", "STRING",
    "TYPE_NAMES", "UINT8", "UINT16", "UINT32", "UINT64", "VERSION", "Value", "read_metadata", "write",
]

MAGIC = b"GGUF"
VERSION = 3
"""The version :func:`write` writes; :func:`read_metadata` reads 2 and 3 (llama.cpp refuses 1)."""
ALIGNMENT = 32
"""GGUF's default alignment of the tensor data, which follows the (padded) header."""

UINT8, INT8, UINT16, INT16, UINT32, INT32, FLOAT32, BOOL, STRING, ARRAY, UINT64, INT64, FLOAT64 = range(13)
TYPE_NAMES = dict(enumerate(
    ["UINT8", "INT8", "UINT16", "INT16", "UINT32", "INT32", "FLOAT32", "BOOL", "STRING", "ARRAY", "UINT64", "INT64", "FLOAT64"]))
_FORMATS = {UINT8: "B", INT8: "b", UINT16: "H", INT16: "h", UINT32: "I", INT32: "i", FLOAT32: "f", BOOL: "?",
            UINT64: "Q", INT64: "q", FLOAT64: "d"}
_LENGTH = struct.Struct("<Q")


@dataclass(frozen=True)
class Value:
    """One metadata value: its GGUF ``type``, the ``value`` (``int``, ``float``, ``bool``, ``bytes``
    for a string, a ``list`` of them for an array) and, for an array, the type of its items."""

    type: int
    value: Any
    item_type: int | None = None


class _Reader:
    """Reads little-endian values from a mapped file, checking each length against what is left."""

    def __init__(self, path: str | os.PathLike[str], data: Any, end: int) -> None:
        self.path = path
        self.data = data
        self.end = end
        self.at = 0

    def fail(self, problem: str) -> TokenizerFileError:
        return TokenizerFileError(self.path, f"not a readable GGUF file: {problem}")

    def take(self, size: int, what: str) -> int:
        """The offset of the next ``size`` bytes, which must lie inside the file."""
        if size > self.end - self.at:
            raise self.fail(f"{what} needs {size:,} bytes at offset {self.at:,}, but the file ends at {self.end:,} "
                            "(a truncated or corrupt file)")
        start = self.at
        self.at += size
        if self.at > MAX_FILE_BYTES:
            raise self.fail(f"its metadata is larger than {MAX_FILE_BYTES:,} bytes (set HF_BPE_MAX_FILE_BYTES "
                            "to read it)")
        return start

    def scalar(self, kind: int, what: str) -> Any:
        code = _FORMATS[kind]
        size = struct.calcsize(code)
        return struct.unpack_from("<" + code, self.data, self.take(size, what))[0]

    def string(self, what: str) -> bytes:
        size = self.scalar(UINT64, what)
        start = self.take(size, what)
        return bytes(self.data[start : start + size])

    def strings(self, count: int, what: str) -> list[bytes]:
        """``count`` strings in a row (the loop of :meth:`string`, inlined: a vocabulary holds
        hundreds of thousands)."""
        data, at, end = self.data, self.at, self.end
        if count > (end - at) // 8:  # each string takes at least its 8-byte length
            raise self.fail(f"{what} claims {count:,} strings, more than the {end - at:,} bytes left hold")
        length = _LENGTH.unpack_from
        items = []
        for index in range(count):
            if end - at < 8:
                self.at = at
                self.take(8, f"{what}[{index}]")
            (size,) = length(data, at)
            at += 8
            if size > end - at:
                self.at = at
                self.take(size, f"{what}[{index}]")
            items.append(data[at : at + size])
            at += size
        self.at = at
        self.take(0, what)  # the metadata size limit
        return items

    def value(self, kind: int, what: str) -> Value:
        if kind == STRING:
            return Value(STRING, self.string(what))
        if kind in _FORMATS:
            return Value(kind, self.scalar(kind, what))
        if kind != ARRAY:
            raise self.fail(f"{what} has the unknown type {kind}")
        item_type = self.scalar(UINT32, what)
        count = self.scalar(UINT64, what)
        if item_type == STRING:
            return Value(ARRAY, self.strings(count, what), STRING)
        if item_type not in _FORMATS:
            kind_name = "arrays" if item_type == ARRAY else f"the unknown type {item_type}"
            raise self.fail(f"{what} is an array of {kind_name} (GGUF arrays hold numbers, booleans or strings)")
        code = _FORMATS[item_type]
        size = struct.calcsize(code)
        if count > (self.end - self.at) // size:
            raise self.fail(f"{what} claims {count:,} items of {size} bytes, more than the {self.end - self.at:,} "
                            "bytes left")
        start = self.take(count * size, what)
        return Value(ARRAY, list(struct.unpack_from(f"<{count}{code}", self.data, start)), item_type)


def read_metadata(path: str | os.PathLike[str]) -> dict[str, Value]:
    """The metadata of the GGUF file ``path``, by key, read as llama.cpp's ``gguf_init_from_file``
    reads it (the same checks: the magic, version 2 or 3, no empty or repeated key, no nested
    array); :class:`~hf_bpe.errors.TokenizerFileError` naming the file when it is not such a file."""
    with open_file(path) as file:
        size = os.fstat(file.fileno()).st_size
        if size < 24:
            head = file.read(4)
            if head != MAGIC:
                raise TokenizerFileError(path, f"not a GGUF file: it starts with {head!r}, not {MAGIC!r}")
            raise TokenizerFileError(path, f"not a readable GGUF file: {size} bytes, less than a GGUF header")
        with mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ) as data:
            return _read(path, data, size)


def _read(path: str | os.PathLike[str], data: Any, size: int) -> dict[str, Value]:
    reader = _Reader(path, data, size)
    if data[:4] != MAGIC:
        raise TokenizerFileError(path, f"not a GGUF file: it starts with {bytes(data[:4])!r}, not {MAGIC!r}")
    reader.at = 4
    version = reader.scalar(UINT32, "the version")
    if version & 0xFFFF == 0 and version:
        raise reader.fail(f"the version reads as {version:#x}: a big-endian file, which llama.cpp does not read "
                          "on this machine (convert it with gguf-py's gguf-convert-endian)")
    if version not in (2, 3):
        raise reader.fail(f"GGUF version {version}; hf_bpe reads versions 2 and 3 (as llama.cpp does)")
    reader.scalar(UINT64, "the tensor count")
    entries = reader.scalar(UINT64, "the metadata count")
    if entries > (size - reader.at) // 13:  # each entry takes at least a key length, a type and a byte
        raise reader.fail(f"it claims {entries:,} metadata entries, more than the {size:,}-byte file holds")
    metadata: dict[str, Value] = {}
    for number in range(entries):
        raw = reader.string(f"the key of entry {number}")
        try:
            key = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise reader.fail(f"the key of entry {number} is not UTF-8: {raw[:60]!r}") from None
        if not key:
            raise reader.fail(f"the key of entry {number} is empty")
        if key in metadata:
            raise reader.fail(f"the key {key!r} appears twice")
        kind = reader.scalar(UINT32, f"the type of {key!r}")
        metadata[key] = reader.value(kind, repr(key))
    return metadata


def write(path: str | os.PathLike[str], metadata: Iterable[tuple[str, Value]]) -> Path:
    """Write a GGUF file (version 3, little-endian) holding ``metadata`` and no tensors, atomically,
    laid out as gguf-py's ``GGUFWriter`` lays it out (the header padded to :data:`ALIGNMENT`)."""
    entries = list(metadata)
    out = bytearray(MAGIC)
    out += struct.pack("<IQQ", VERSION, 0, len(entries))
    for key, value in entries:
        out += _pack_string(key.encode("utf-8"))
        out += struct.pack("<I", value.type)
        out += _pack(value)
    out += bytes(-len(out) % ALIGNMENT)
    return atomic_write(path, bytes(out))


def _pack_string(data: bytes) -> bytes:
    return struct.pack("<Q", len(data)) + data


def _pack(value: Value) -> bytes:
    if value.type == STRING:
        return _pack_string(value.value)
    if value.type in _FORMATS:
        return struct.pack("<" + _FORMATS[value.type], value.value)
    if value.type != ARRAY or value.item_type is None or value.item_type == ARRAY:
        raise ValueError(f"cannot write a GGUF value of type {value.type} (items {value.item_type})")
    items = value.value
    head = struct.pack("<IQ", value.item_type, len(items))
    if value.item_type == STRING:
        return head + b"".join(_pack_string(item) for item in items)
    return head + struct.pack(f"<{len(items)}{_FORMATS[value.item_type]}", *items)
