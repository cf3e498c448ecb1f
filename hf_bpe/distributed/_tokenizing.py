"""Tokenize a corpus into training-ready shards, on Ray or on this machine's cores, resumably.

Inputs are files, read in the order given (glob patterns expand sorted):

- ``.txt``: the whole file is one document (as :func:`hf_bpe.train` reads files);
- ``.jsonl`` / ``.json`` (JSON Lines): one JSON object per line, the text under ``text_column``
  (empty lines are skipped);
- ``.parquet``: the ``text_column`` column, one document per row.

The inputs are cut into shards of about ``shard_size`` bytes of input, in order (JSON Lines files at
line boundaries, Parquet files at row groups, text files whole), so the shards depend on the inputs
and ``shard_size`` only, never on the number of workers. Shard ``k`` is written as:

- ``shard-0000k.bin``: every document's ids one after another (each followed by ``eot`` when
  given), little-endian ``uint16`` when every id of the vocabulary fits (``max_token_value < 65536``),
  else ``uint32``, headerless: ``numpy.memmap(path, dtype="<u2")`` as nanoGPT reads it;
- ``shard-0000k.idx``: the document boundaries, ``num_documents + 1`` little-endian ``uint64``
  offsets into the ``.bin`` (in ids; document ``i`` is ``ids[idx[i]:idx[i + 1]]``);
- ``shard-0000k.parquet``: a column ``input_ids`` (``list<uint16>`` or ``list<uint32>``), one row
  per document (``datasets.load_dataset("parquet", data_files=...)`` reads it);
- ``shard-0000k.json``: the shard's record (counts, inputs and the BLAKE2b-256 digest of the bytes
  read from each, each file's size and sha256), written last.

Documents are encoded with ``encode_ordinary`` (special-token text in the corpus is ordinary text).
``out_dir`` also receives the model (``hf_bpe.json``), ``plan.json`` (the inputs' fingerprints,
options and shard layout, written first) and ``manifest.json`` (written last, also returned). Every
file is written atomically (a temporary file renamed into place), so a name that exists holds a
complete file. A rerun with the same inputs and options redoes only the shards whose record or files
are missing or whose sha256 does not match, or whose inputs no longer hold the bytes they were encoded
from (the digests are read again: an input rewritten with the same size and time is encoded again),
and produces identical files; a rerun with other inputs (another size or time), options or tokenizer
is refused rather than mixed. One run at a time holds ``out_dir`` (a lock file, ``.hf_bpe.lock``, see
:mod:`hf_bpe.distributed._lock`): a second run into it meanwhile is refused, naming the holder.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import os
import tempfile
from collections.abc import Iterator, Sequence
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from hf_bpe._io import atomic_write
from hf_bpe._sources import load
from hf_bpe.distributed import _cluster, _inputs, _lock
from hf_bpe.model import BPE, MODEL_FILE, IdType

SHARD_BYTES = 128 << 20
"""Default shard size: 128 MiB of input text (about 32 million ids of English with a 50k vocabulary)."""

FORMATS = ("bin", "parquet")
MANIFEST = "manifest.json"
PLAN = "plan.json"
MANIFEST_FORMAT = "hf_bpe.tokenized"
FORMAT_VERSION = 1
DIGEST_BYTES = 32
"""Inputs are fingerprinted by content: BLAKE2b-256 of the bytes each shard read."""
ENCODE_CHARS = 1 << 20
"""Documents are encoded this many characters at a time (so the Python lists stay small)."""

TEXT_SUFFIXES = (".txt", ".text")
JSONL_SUFFIXES = (".jsonl", ".json", ".ndjson")
PARQUET_SUFFIXES = (".parquet",)


class ShardError(RuntimeError):
    """A shard could not be written; the message names the shard, its inputs and the fix. The
    shards finished before it are kept: a rerun resumes."""


@dataclass(frozen=True)
class ShardJob:
    """What one task writes: shard ``name`` from ``parts`` (``{"path", "kind", "start", "stop"}``)."""

    name: str
    parts: list[dict[str, Any]]
    out_dir: str
    dtype: IdType
    eot: int | None
    formats: tuple[str, ...]
    text_column: str
    memory_limit: int | None = None


def tokenize_files(
    inputs: Any,
    tokenizer: Any,
    out_dir: str | os.PathLike[str],
    *,
    eot: int | str | None = None,
    shard_size: int = SHARD_BYTES,
    formats: Sequence[str] = FORMATS,
    text_column: str = "text",
    num_workers: int | None = None,
    ray_address: str | None = None,
    max_retries: int = 3,
    task_memory_limit: int | None = None,
) -> dict[str, Any]:
    """Tokenize ``inputs`` into shards under ``out_dir`` (see the module's documentation) and return
    the manifest.

    ``tokenizer``: a :class:`hf_bpe.BPE`, a :class:`hf_bpe.BPETokenizer`, a named encoding
    (``"gpt2"``), a model file (``hf_bpe.json``, ``tokenizer.json``) or a tokenizer folder. ``eot``: an
    id or a special token's text appended after every document. Runs on Ray when this process is
    connected to it or ``ray_address`` is given, else on ``num_workers`` local cores (default: every
    core; with more than one, in spawned worker processes, so a script calls it under ``if __name__ ==
    "__main__":`` as ``multiprocessing`` requires); ``max_retries``: how often Ray reruns a shard whose
    worker died. ``task_memory_limit``: on Ray, the bytes of address space a shard's encoding may take
    beyond what its worker holds when the shard starts (``RLIMIT_AS``, Linux and macOS); a shard that
    needs more fails with :class:`ShardError` naming it and writes nothing, instead of the node running
    out of memory (the limit is lifted before the shard's files are written and when it ends).

    >>> import pathlib, tempfile, numpy, hf_bpe.distributed
    >>> folder = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (folder / "a.txt").write_text("hello world")
    >>> manifest = hf_bpe.distributed.tokenize_files([folder / "a.txt"], "gpt2", folder / "out", eot="<|endoftext|>")
    >>> manifest["num_tokens"], manifest["dtype"], [shard["name"] for shard in manifest["shards"]]
    (3, 'uint16', ['shard-00000'])
    >>> numpy.memmap(folder / "out" / "shard-00000.bin", dtype="<u2").tolist()
    [31373, 995, 50256]
    """
    model = _model_of(tokenizer)
    eot_id = _eot_id(model, eot)
    formats = _formats(formats)
    if isinstance(shard_size, bool) or not isinstance(shard_size, int) or shard_size < 1:
        raise ValueError(f"shard_size must be a positive int (bytes of input per shard), got {shard_size!r}")
    if isinstance(max_retries, bool) or not isinstance(max_retries, int) or max_retries < 0:
        raise ValueError(f"max_retries must be an int >= 0, got {max_retries!r}")
    if task_memory_limit is not None and (isinstance(task_memory_limit, bool) or not isinstance(task_memory_limit, int)
                                          or task_memory_limit < 1):
        raise ValueError(f"task_memory_limit must be a positive int (bytes) or None, got {task_memory_limit!r}")
    out = Path(out_dir)
    paths = _inputs.expand(inputs)
    dtype: IdType = "uint16" if model.max_token_value < 1 << 16 else "uint32"
    model_bytes = _model_bytes(model)
    plan: dict[str, Any] = {
        "format": MANIFEST_FORMAT + ".plan",
        "version": FORMAT_VERSION,
        "tokenizer": {"file": MODEL_FILE, "sha256": hashlib.sha256(model_bytes).hexdigest()},
        "dtype": dtype,
        "eot": eot_id,
        "formats": list(formats),
        "text_column": text_column,
        "shard_size": shard_size,
        "inputs": [_inputs.fingerprint(path) for path in paths],
        "shards": plan_shards(paths, shard_size),
    }
    with _lock.claimed(out):  # one run at a time in a folder
        _claim(out, plan, model_bytes)
        jobs = [ShardJob(_shard_name(index), parts, str(out), dtype, eot_id, formats, text_column, task_memory_limit)
                for index, parts in enumerate(plan["shards"])]
        records: dict[str, dict[str, Any]] = {}
        todo = []
        for job in jobs:
            record = finished_record(job)
            if record is None:
                todo.append(job)
            else:
                records[job.name] = record
        if todo:
            with _cluster.connect(ray_address, num_workers) as cluster:
                if cluster.ray is None:
                    if task_memory_limit is not None:
                        raise ValueError("task_memory_limit caps a Ray task's memory; on local cores the shards run in "
                                         "this process's threads or a pool: pass ray_address, or leave it None")
                    try:
                        _cluster.run_local(partial(write_shard, model), todo, cluster.workers,
                                           lambda index, record: records.__setitem__(todo[index].name, record),
                                           processes=(_write_shard_in_process, _use_model, (model,)))
                    except BrokenProcessPool as error:
                        raise ShardError(f"a worker process died ({error}): killed, or out of memory. The finished "
                                         "shards are kept: run the same command again to write the rest") from None
                else:
                    _run_on_ray(cluster, model, todo, records, max_retries)
        shards = [records[job.name] for job in jobs]
        manifest = {
            "format": MANIFEST_FORMAT,
            "version": FORMAT_VERSION,
            "tokenizer": plan["tokenizer"],
            "dtype": dtype,
            "eot": eot_id,
            "formats": list(formats),
            "num_tokens": sum(shard["num_tokens"] for shard in shards),
            "num_documents": sum(shard["num_documents"] for shard in shards),
            "inputs": plan["inputs"],
            "shards": shards,
        }
        atomic_write(out / MANIFEST, json.dumps(manifest, indent=1, ensure_ascii=False) + "\n")
    return manifest


def plan_shards(paths: list[Path], shard_size: int) -> list[list[dict[str, Any]]]:
    """The inputs cut into shards of about ``shard_size`` bytes, in order; each shard a list of parts.

    >>> plan_shards([], 10)
    []
    """
    shards: list[list[dict[str, Any]]] = []
    current: list[dict[str, Any]] = []
    size = 0
    for path in paths:
        kind = _kind_of(path)
        for start, stop, weight in _units(path, kind, shard_size):
            if current and size + weight > shard_size:
                shards.append(current)
                current, size = [], 0
            last = current[-1] if current else None
            if last is not None and last["path"] == str(path) and last["stop"] == start:
                last["stop"] = stop  # the next row groups of the same Parquet file
            else:
                current.append({"path": str(path), "kind": kind, "start": start, "stop": stop})
            size += weight
    if current:
        shards.append(current)
    return shards


_process_model: BPE | None = None


def _use_model(model: BPE) -> None:
    """Set up a worker process of the local pool: the model its shards are encoded with."""
    global _process_model
    _process_model = model


def _write_shard_in_process(job: ShardJob) -> dict[str, Any]:
    assert _process_model is not None, "the worker process was not set up with a model"
    return write_shard(_process_model, job)


def write_shard(model: BPE, job: ShardJob) -> dict[str, Any]:
    """Encode one shard and write its files, then its record (a task). Every file is written whole
    under a temporary name and renamed; a failure raises :class:`ShardError` naming the shard."""
    if job.memory_limit is not None:  # what every shard pays once (pyarrow's allocator) is paid outside the cap
        import pyarrow as pa  # type: ignore[import-untyped]

        encode_documents(model, pa.array(["warm"], type=pa.large_string()), job.dtype, job.eot)
    digests: list[str] = []
    try:
        with _cluster.memory_capped(job.memory_limit):
            ids, lengths = _encode_shard(model, job, digests)
            if len(lengths) == 0:
                raise ShardError(f"{job.name} ({_describe(job.parts)}): holds no documents (only empty lines or "
                                 "empty row groups); remove those inputs or fill them")
            offsets = np.zeros(len(lengths) + 1, dtype="<u8")
            np.cumsum(lengths, out=offsets[1:])
            payloads = _payloads(job, ids, offsets)
            del ids
    except ShardError:
        raise
    except MemoryError as error:
        limit = "" if job.memory_limit is None else f" under task_memory_limit={job.memory_limit:,} bytes"
        raise ShardError(f"{job.name} ({_describe(job.parts)}): out of memory{limit} ({type(error).__name__}: "
                         f"{error or 'no allocation size given'}); nothing of this shard was written: give the "
                         "task more memory or use a smaller shard_size") from None
    except (OSError, ValueError, TypeError, KeyError) as error:
        raise ShardError(f"{job.name} ({_describe(job.parts)}): {error}") from None
    out = Path(job.out_dir)
    files = {}
    for name, data in payloads.items():
        sha256 = hashlib.sha256(data).hexdigest()
        _write_unless_same(out / name, data, sha256)
        files[name] = {"bytes": len(data), "sha256": sha256}
    record = {
        "name": job.name,
        "num_documents": len(lengths),
        "num_tokens": int(offsets[-1]),
        "inputs": job.parts,
        "input_digests": digests,
        "files": files,
    }
    text = (json.dumps(record, indent=1, ensure_ascii=False) + "\n").encode("utf-8")
    _write_unless_same(out / f"{job.name}.json", text, hashlib.sha256(text).hexdigest())
    return record


def _write_unless_same(path: Path, data: bytes, sha256: str) -> None:
    """Write ``data`` atomically, unless ``path`` already holds exactly it: a shard redone after its
    worker was stopped between two of its files keeps the files it had finished, untouched."""
    try:
        if path.stat().st_size == len(data) and _sha256_of(path) == sha256:
            return
    except OSError:
        pass
    atomic_write(path, data)


def _payloads(job: ShardJob, ids: np.ndarray, offsets: np.ndarray) -> dict[str, bytes]:
    """The bytes of each of the shard's files, every one built before any is written."""
    payloads: dict[str, bytes] = {}
    little = np.dtype(job.dtype).newbyteorder("<")
    if "bin" in job.formats:
        payloads[f"{job.name}.bin"] = ids.astype(little, copy=False).tobytes()
        payloads[f"{job.name}.idx"] = offsets.tobytes()
    if "parquet" in job.formats:
        payloads[f"{job.name}.parquet"] = _parquet(ids, offsets)
    return payloads


def finished_record(job: ShardJob) -> dict[str, Any] | None:
    """The shard's record when the shard is complete: its record names these inputs and every
    expected file exists with the recorded sha256, and every input part still holds the bytes it was
    encoded from (their digests are read again); else None (the shard is to be written)."""
    out = Path(job.out_dir)
    try:
        record = json.loads((out / f"{job.name}.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(record, dict) or record.get("inputs") != job.parts:
        return None
    files = record.get("files")
    if not isinstance(files, dict) or sorted(files) != sorted(_file_names(job)):
        return None
    for name, entry in files.items():
        try:
            if not isinstance(entry, dict) or _sha256_of(out / name) != entry.get("sha256"):
                return None
        except OSError:
            return None
    try:
        if record.get("input_digests") != [_part_digest(part) for part in job.parts]:
            return None  # an input changed since (even with its size and time kept): encode it again
    except (OSError, ValueError):
        return None  # the shard is redone and names what is wrong with the input
    return record


def encode_documents(model: BPE, texts: Any, dtype: IdType, eot: int | None) -> tuple[np.ndarray, np.ndarray]:
    """Every text's ids one after another (``eot`` after each, when given) as ``dtype``, and each
    text's number of ids. The one place that turns texts (a list of str or an Arrow string array)
    into flat ids: :meth:`BPE.encode_ordinary_arrow` builds them in the core as an Arrow list array
    (no Python lists), read here without a copy.

    >>> import hf_bpe
    >>> ids, lengths = encode_documents(hf_bpe.get_encoding("gpt2"), ["hello", "world"], "uint16", 50256)
    >>> ids.tolist(), lengths.tolist()
    ([31373, 50256, 6894, 50256], [2, 2])
    """
    import pyarrow.compute as pc  # type: ignore[import-untyped]

    lists = model.encode_arrow(texts, num_threads=1, dtype=dtype, disallowed_special=())
    lengths = pc.list_value_length(lists).to_numpy().astype(np.int64)
    ids = lists.flatten().to_numpy()
    if eot is not None:
        ids = np.insert(ids, np.cumsum(lengths), np.array(eot, dtype=dtype))
        lengths += 1
    return ids, lengths


def _encode_shard(model: BPE, job: ShardJob, digests: list[str]) -> tuple[np.ndarray, np.ndarray]:
    id_parts: list[np.ndarray] = []
    length_parts: list[np.ndarray] = []
    for batch in _batches(_documents(job, digests)):
        ids, lengths = encode_documents(model, batch, job.dtype, job.eot)
        id_parts.append(ids)
        length_parts.append(lengths)
    if not length_parts:
        return np.zeros(0, dtype=job.dtype), np.zeros(0, dtype=np.int64)
    return np.concatenate(id_parts), np.concatenate(length_parts)


def _batches(documents: Iterator[str]) -> Iterator[list[str]]:
    batch: list[str] = []
    chars = 0
    for document in documents:
        batch.append(document)
        chars += len(document)
        if chars >= ENCODE_CHARS:
            yield batch
            batch, chars = [], 0
    if batch:
        yield batch


def _documents(job: ShardJob, digests: list[str]) -> Iterator[str]:
    """The documents of the shard's parts in order; each part's digest is appended to ``digests`` as it
    is read (the digest of the bytes decoded, so a resumed run can tell that an input changed)."""
    for part in job.parts:
        path, kind, start, stop = part["path"], part["kind"], part["start"], part["stop"]
        if kind == "text":
            data = Path(path).read_bytes()
            digests.append(_digest(data).hexdigest())
            yield _utf8(data, path, 0)
        elif kind == "jsonl":
            yield from _jsonl_documents(path, start, stop, job.text_column, digests)
        else:
            digests.append(_part_digest(part))
            yield from _parquet_documents(path, start, stop, job.text_column)


def _digest(data: bytes = b"") -> Any:
    return hashlib.blake2b(data, digest_size=DIGEST_BYTES)


def _part_digest(part: dict[str, Any]) -> str:
    """The BLAKE2b digest of the bytes of an input part: a text file whole, a JSON Lines file's byte range,
    a Parquet file's row groups (their column chunks, where the text is read from)."""
    path, kind, start, stop = part["path"], part["kind"], part["start"], part["stop"]
    if kind == "parquet":
        start, stop = _row_group_bytes(path, start, stop)
    elif kind == "text":
        start, stop = 0, None
    digest = _digest()
    with open(path, "rb") as file:
        file.seek(start)
        left = math.inf if stop is None else stop - start
        while left > 0 and (chunk := file.read(int(min(left, 1 << 22)))):
            digest.update(chunk)
            left -= len(chunk)
    return digest.hexdigest()  # type: ignore[no-any-return]


def _row_group_bytes(path: str, start: int, stop: int) -> tuple[int, int]:
    """The byte range of a Parquet file's row groups ``start`` to ``stop - 1``, every column's chunk."""
    import pyarrow.parquet as pq  # type: ignore[import-untyped]

    metadata = pq.ParquetFile(path).metadata
    begins, ends = [], []
    for group in range(start, stop):
        row_group = metadata.row_group(group)
        for column in range(row_group.num_columns):
            chunk = row_group.column(column)
            offsets = [chunk.data_page_offset]
            if chunk.has_dictionary_page and chunk.dictionary_page_offset is not None:
                offsets.append(chunk.dictionary_page_offset)
            begins.append(min(offsets))
            ends.append(min(offsets) + chunk.total_compressed_size)
    return (min(begins), max(ends)) if begins else (0, 0)


def _jsonl_documents(path: str, start: int, stop: int, text_column: str, digests: list[str]) -> Iterator[str]:
    with open(path, "rb") as file:
        file.seek(start)
        data = file.read(stop - start)
    digests.append(_digest(data).hexdigest())
    if len(data) != stop - start:
        raise ValueError(f"{path}: shorter than when the shards were planned ({start + len(data)} bytes, expected "
                         f"at least {stop}); the file changed: tokenize into a new folder")
    offset = start
    for line in data.split(b"\n"):
        where = offset
        offset += len(line) + 1
        if not line.strip():
            continue
        try:
            row = json.loads(_utf8(line, path, where))
        except json.JSONDecodeError as error:
            raise ValueError(f"{path}: the line at byte {where} is not JSON ({error.msg}); each line must be one "
                             "JSON object") from None
        if not isinstance(row, dict):
            raise ValueError(  # noqa: TRY004 - bad data in a file, not a bad argument
                f"{path}: the line at byte {where} is a JSON {type(row).__name__}, not an object")
        text = row.get(text_column)
        if not isinstance(text, str):
            what = "has no key" if text_column not in row else f"has a {type(text).__name__} under"
            raise ValueError(  # noqa: TRY004 - bad data in a file, not a bad argument
                f"{path}: the object at byte {where} {what} {text_column!r}; pass text_column=<the key "
                f"that holds the text> (its keys: {sorted(row)[:10]})")
        yield text


def _parquet_documents(path: str, start: int, stop: int, text_column: str) -> Iterator[str]:
    import pyarrow.parquet as pq  # type: ignore[import-untyped]

    parquet = pq.ParquetFile(path)
    names = parquet.schema_arrow.names
    if text_column not in names:
        raise ValueError(f"{path}: no column {text_column!r}; its columns are {names[:20]}: pass "
                         "text_column=<the column that holds the text>")
    for group in range(start, stop):
        column = parquet.read_row_group(group, columns=[text_column]).column(0)
        if column.null_count:
            raise ValueError(f"{path}: row group {group} has {column.null_count} null {text_column!r} values; "
                             "drop or fill them first")
        yield from column.to_pylist()


def _utf8(data: bytes, path: str, offset: int) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise ValueError(
            f"{path}: not UTF-8 at byte {offset + error.start} ({error.reason}: {data[error.start:error.start + 4]!r}); "
            "convert the file to UTF-8 first (e.g. iconv -f latin1 -t utf-8)"
        ) from None


def _parquet(ids: np.ndarray, offsets: np.ndarray) -> bytes:
    import pyarrow as pa  # type: ignore[import-untyped]
    import pyarrow.parquet as pq  # type: ignore[import-untyped]

    values = pa.array(ids)
    if offsets[-1] < 1 << 31:
        column = pa.ListArray.from_arrays(pa.array(offsets.astype(np.int32)), values)
    else:
        column = pa.LargeListArray.from_arrays(pa.array(offsets.astype(np.int64)), values)
    sink = pa.BufferOutputStream()
    pq.write_table(pa.table({"input_ids": column}), sink)
    return sink.getvalue().to_pybytes()  # type: ignore[no-any-return]


def _units(path: Path, kind: str, shard_size: int) -> list[tuple[int, int, int]]:
    """The pieces a file may be cut into: ``(start, stop, bytes)``."""
    size = path.stat().st_size
    if size == 0:
        raise ValueError(f"{path}: empty file (no documents); remove it from the inputs")
    if kind in ("text", "jsonl"):
        _refuse_byte_order_mark(path)
    if kind == "text":
        return [(0, size, size)]
    if kind == "jsonl":
        cuts = [0]
        with open(path, "rb") as file:
            while cuts[-1] + shard_size < size:
                file.seek(cuts[-1] + shard_size - 1)
                while True:
                    chunk = file.read(1 << 16)
                    if not chunk:
                        break
                    newline = chunk.find(b"\n")
                    if newline >= 0:
                        file.seek(newline - len(chunk) + 1, os.SEEK_CUR)
                        break
                if file.tell() >= size:
                    break
                cuts.append(file.tell())
        cuts.append(size)
        return [(start, stop, stop - start) for start, stop in itertools.pairwise(cuts)]
    import pyarrow.parquet as pq  # type: ignore[import-untyped]

    try:
        metadata = pq.ParquetFile(path).metadata
    except Exception as error:  # noqa: BLE001 - pyarrow raises its own ArrowInvalid for files that are not Parquet
        raise ValueError(f"{path}: not a Parquet file ({error})") from None
    return [(group, group + 1, metadata.row_group(group).total_byte_size) for group in range(metadata.num_row_groups)]


BYTE_ORDER_MARKS = (  # longest first: UTF-32's little-endian mark starts with UTF-16's
    (b"\xff\xfe\x00\x00", "UTF-32"), (b"\x00\x00\xfe\xff", "UTF-32"), (b"\xef\xbb\xbf", "UTF-8"),
    (b"\xff\xfe", "UTF-16"), (b"\xfe\xff", "UTF-16"),
)


def _refuse_byte_order_mark(path: Path) -> None:
    """A text or JSON Lines input that starts with a byte order mark is refused before any work: a
    UTF-16 or UTF-32 file is not UTF-8, and a UTF-8 mark would be tokenized as the character U+FEFF
    at the start of its first document.
    """
    with open(path, "rb") as file:
        head = file.read(4)
    for mark, encoding in BYTE_ORDER_MARKS:
        if head.startswith(mark):
            spelled = " ".join(f"{byte:02X}" for byte in mark)
            if encoding == "UTF-8":
                raise ValueError(f"{path}: starts with a UTF-8 byte order mark ({spelled}), which would be tokenized "
                                 "as the character U+FEFF; remove it first (sed -i '1s/^\\xEF\\xBB\\xBF//' FILE)")
            raise ValueError(f"{path}: a {encoding} file (it starts with the byte order mark {spelled}), not UTF-8; "
                             f"convert it first (iconv -f {encoding} -t UTF-8 FILE > FILE.utf8)")


def _kind_of(path: Path) -> str:
    suffix = path.suffix.lower()
    if suffix in TEXT_SUFFIXES:
        return "text"
    if suffix in JSONL_SUFFIXES:
        return "jsonl"
    if suffix in PARQUET_SUFFIXES:
        return "parquet"
    raise ValueError(f"{path}: cannot tell how to read a {suffix or 'extension-less'} file; tokenize reads "
                     f"{', '.join(TEXT_SUFFIXES + JSONL_SUFFIXES + PARQUET_SUFFIXES)} (rename text files to .txt)")


def _claim(out: Path, plan: dict[str, Any], model_bytes: bytes) -> None:
    """Make ``out`` this run's folder: new, or holding this very plan (a rerun resumes); refuse to mix."""
    plan_path = out / PLAN
    if plan_path.exists():
        try:
            previous = json.loads(plan_path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as error:
            raise ValueError(f"{plan_path}: unreadable ({error}); delete {out} to start over") from None
        if previous != plan:
            differences = [key for key in plan if previous.get(key) != plan[key]] or ["format"]
            raise ValueError(
                f"{out} holds shards of another run (its {', '.join(differences)} differ from this run's): "
                f"tokenize into a new folder, or delete {out} to start over"
            )
    elif any(not path.name.startswith(_lock.LOCK_NAME) for path in out.iterdir()):
        raise ValueError(f"{out} is not empty and holds no {PLAN}: give a new or empty folder")
    if not (out / MODEL_FILE).exists() or (out / MODEL_FILE).read_bytes() != model_bytes:
        atomic_write(out / MODEL_FILE, model_bytes)
    if not plan_path.exists():
        atomic_write(plan_path, json.dumps(plan, indent=1, ensure_ascii=False) + "\n")


def _run_on_ray(cluster: _cluster.Cluster, model: BPE, todo: list[ShardJob], records: dict[str, dict[str, Any]],
                max_retries: int) -> None:
    """Keep ``cluster.workers`` shards running; on a failure, let the running ones finish (they are
    kept for the rerun), start no more, and raise naming the shard once every task has ended, so that
    nothing is written after the error. Interrupted here (Ctrl-C, a Ray error in this process), it
    cancels the running tasks and waits for them to end before passing the interruption on."""
    ray = cluster.ray
    write = ray.remote(num_cpus=1, max_retries=max_retries)(write_shard)
    model_ref = ray.put(model)
    waiting = list(todo)
    running: dict[Any, ShardJob] = {}
    failure: ShardError | None = None
    try:
        while running or (waiting and failure is None):
            while waiting and failure is None and len(running) < cluster.workers:
                job = waiting.pop(0)
                running[write.remote(model_ref, job)] = job
            (done,), _ = ray.wait(list(running), num_returns=1)
            job = running.pop(done)
            try:
                records[job.name] = ray.get(done)
            except Exception as error:  # noqa: BLE001 - any Ray error (the task raised, its worker died) names the shard
                failure = failure or _shard_failure(ray, job, error)
    except BaseException:
        _stop(ray, list(running))
        raise
    if failure is not None:
        raise failure


def _stop(ray: Any, tasks: list[Any]) -> None:
    """Cancel ``tasks`` and wait until each has ended (finished, failed or cancelled)."""
    for task in tasks:
        try:
            ray.cancel(task)
        except Exception:  # noqa: BLE001, S110 - a task that ended meanwhile cannot be cancelled; it is waited for below
            pass
    if tasks:
        ray.wait(tasks, num_returns=len(tasks))


def _shard_failure(ray: Any, job: ShardJob, error: Exception) -> ShardError:
    exceptions = ray.exceptions
    cause = getattr(error, "cause", None)
    if isinstance(cause, ShardError):
        return cause
    if isinstance(error, exceptions.OutOfMemoryError):
        problem = ("its worker ran out of memory and Ray stopped it; give the tasks more memory or use a smaller "
                   "shard_size")
    elif isinstance(error, (exceptions.WorkerCrashedError, exceptions.NodeDiedError, exceptions.ActorDiedError,
                            exceptions.LocalRayletDiedError)):
        problem = f"its worker process died ({type(error).__name__}: killed, or out of memory)"
        if job.memory_limit is not None:
            problem += (f"; with task_memory_limit={job.memory_limit:,} bytes, most likely an allocation past it "
                        "(give the task more memory or use a smaller shard_size)")
    else:
        problem = f"{type(cause or error).__name__}: {cause or error}"
    return ShardError(f"{job.name} ({_describe(job.parts)}) failed: {problem}. The finished shards are kept: run "
                      "the same command again to write the rest")


def _model_of(tokenizer: Any) -> BPE:
    if isinstance(tokenizer, BPE):
        return tokenizer
    model = getattr(tokenizer, "model", None)
    if isinstance(model, BPE):  # a BPETokenizer
        return model
    if isinstance(tokenizer, (str, os.PathLike)):  # any source hf_bpe.load reads (SourceError if not)
        return load(tokenizer)
    raise TypeError(f"tokenizer must be a BPE, a BPETokenizer, a named encoding or a path, got "
                    f"{type(tokenizer).__name__}")


def _eot_id(model: BPE, eot: int | str | None) -> int | None:
    if eot is None:
        return None
    if isinstance(eot, str):
        if eot not in model.special_tokens:
            raise ValueError(f"eot {eot!r} is not a special token of the model (it has {sorted(model.special_tokens)}); "
                             "pass one of them or an id")
        return model.special_tokens[eot]
    if isinstance(eot, bool) or not isinstance(eot, int) or not 0 <= eot <= model.max_token_value:
        raise ValueError(f"eot must be a special token's text or an id from 0 to {model.max_token_value}, got {eot!r}")
    return eot


def _formats(formats: Sequence[str]) -> tuple[str, ...]:
    chosen = (formats,) if isinstance(formats, str) else tuple(formats)
    unknown = [name for name in chosen if name not in FORMATS]
    if unknown or not chosen:
        raise ValueError(f"formats must name some of {FORMATS}, got {list(chosen)}")
    return tuple(name for name in FORMATS if name in chosen)


def _model_bytes(model: BPE) -> bytes:
    with tempfile.TemporaryDirectory() as folder:
        return model.save(Path(folder) / MODEL_FILE).read_bytes()


def _file_names(job: ShardJob) -> list[str]:
    names = []
    if "bin" in job.formats:
        names += [f"{job.name}.bin", f"{job.name}.idx"]
    if "parquet" in job.formats:
        names.append(f"{job.name}.parquet")
    return names


def _sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as file:
        while chunk := file.read(1 << 22):
            digest.update(chunk)
    return digest.hexdigest()


def _shard_name(index: int) -> str:
    return f"shard-{index:05d}"


def _describe(parts: list[dict[str, Any]]) -> str:
    first = parts[0]
    where = "" if first["kind"] == "text" else (
        f" bytes {first['start']}-{first['stop']}" if first["kind"] == "jsonl" else
        f" row groups {first['start']}-{first['stop'] - 1}")
    more = f" and {len(parts) - 1} more input{'s' if len(parts) > 2 else ''}" if len(parts) > 1 else ""
    return f"{first['path']}{where}{more}"
