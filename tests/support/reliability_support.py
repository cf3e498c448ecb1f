"""What the reliability tests share: every loader of hf_bpe as a :class:`Format` (how to write a valid
file set, how to load it), ways to corrupt files (bytes, lines, JSON trees, protobuf lengths), and the
property a load must satisfy (:func:`check_load`).

Also imported by ``fuzz_targets.py``, which runs without pytest (in an atheris subprocess).

The property: a corrupted file either loads into a model that then encodes and decodes sanely (ids in
range, bytes back exactly when the split pattern is a named one, batch equal to single, offsets in
order), or is refused with one of the documented errors, whose message names the problem:
:class:`hf_bpe.TokenizerFileError` (naming the file) for everything hf_bpe reads (or the
:class:`~hf_bpe.InvalidVocabularyError` / :class:`~hf_bpe.ConversionError` a model refuses), and for the files
transformers itself parses in a tokenizer folder (``tokenizer_config.json``,
``special_tokens_map.json``) the ``ValueError``, ``TypeError`` or ``OSError`` transformers raises. Never
a crash, a ``PanicException`` or ``InternalError``, a ``MemoryError`` or an endless load.
"""

from __future__ import annotations

import copy
import functools
import json
import math
import os
import random
import shutil
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import cost

import conversion.gpt2
import conversion.hf
import conversion.sentencepiece
import conversion.tiktoken
import hf_bpe
from hf_bpe import patterns
from hf_bpe.errors import ConversionError, InternalError, InvalidVocabularyError, TokenizerFileError
from hf_bpe.model import NEVER_IN_UTF8, missing_bytes
from hf_bpe.sentencepiece_bpe import BYTE, CONTROL, NORMAL, UNKNOWN, USER_DEFINED, Piece, SentencePieceSpec

ENDOFTEXT = "<|endoftext|>"

EXERCISE_TEXTS = (
    "", "hello world", "Hello, world! It's 2024: 12345 apples.", "  leading and trailing  \n\n",
    "Ünïcödé 日本語のテキスト 한국어 ελληνικά", "emoji 👩‍👩‍👧 and \u200d joiners", f"a{ENDOFTEXT}b <s> </s> [INST]",
    "tabs\tand\r\nnewlines\n", "x" * 300, "1234567890" * 10, "\u2581spaces\u2581like\u2581sentencepiece",
)
"""Texts every loaded model encodes and decodes."""

SLOW_LOAD_CPU_SECONDS = 30.0
"""A load plus its exercise costing more CPU time than this fails the property (they take milliseconds)."""


# ---------------------------------------------------------------------------------------- models


@functools.cache
def small_model() -> hf_bpe.BPE:
    """A rank model of 300 tokens trained by hf_bpe (cl100k's pattern, ``<|endoftext|>``)."""
    corpus = [" ".join(EXERCISE_TEXTS)] * 20 + ["the cat sat on the mat with the hat"] * 50
    return hf_bpe.train(corpus, 300, pattern="cl100k", special_tokens=[ENDOFTEXT], show_progress=False,
                        name="small")


@functools.cache
def small_merges_model() -> hf_bpe.BPE:
    """A merges-list model (ignore_merges off) over the small model's vocabulary, with a merge the
    rank rule would not make, so it stays a merges list."""
    ranks = small_model().mergeable_ranks
    merges = small_model().merges
    return hf_bpe.BPE.from_merges(ranks, merges[::-1][:40] + merges, "gpt2", {ENDOFTEXT: 300}, name="merges")


def one_rule_charsmap(key: int, replacement: bytes) -> bytes:
    """A SentencePiece precompiled character map (darts-clone double array, then NUL-terminated
    replacements) with one rule: the single byte ``key`` becomes ``replacement``."""
    units = [0] * 258
    units[0] = 1 << 10  # the root; its children sit at offset 1
    child = 1 ^ key  # a child's index is its parent's offset XOR its label
    units[child] = (1 << 10) | (1 << 8) | key  # label `key`, with a leaf at offset 1
    units[child ^ 1] = 1 << 31  # the leaf: value 0, the first replacement
    return (4 * len(units)).to_bytes(4, "little") + b"".join(u.to_bytes(4, "little") for u in units) + \
        replacement + b"\0"


@functools.cache
def small_sentencepiece_spec() -> SentencePieceSpec:
    """A small SentencePiece BPE model: byte fallback, control and user-defined pieces, a one-rule
    character map (``x`` -> ``ks``) and merges over ▁, letters and digits."""
    pieces = [Piece("<unk>", 0.0, UNKNOWN), Piece("<s>", 0.0, CONTROL), Piece("</s>", 0.0, CONTROL),
              Piece("[INST]", 0.0, USER_DEFINED)]
    pieces += [Piece(f"<0x{b:02X}>", 0.0, BYTE) for b in range(256)]
    symbols = ["\u2581", *"etaoinshrdlucmkwygp", *"0123456789"]
    pieces += [Piece(symbol, -float(index), NORMAL) for index, symbol in enumerate(symbols)]
    merged = ["\u2581t", "he", "\u2581the", "in", "er", "\u2581a", "on", "re", "\u2581s", "at", "en", "\u2581c"]
    pieces += [Piece(text, -100.0 - index, NORMAL) for index, text in enumerate(merged)]
    return SentencePieceSpec(tuple(pieces), byte_fallback=True, normalizer_name="custom",
                             charsmap=one_rule_charsmap(ord("x"), b"ks"))


# --------------------------------------------------------------------------------------- formats


@dataclass(frozen=True)
class Format:
    """One way hf_bpe reads tokenizers: ``write(folder)`` writes a valid file set and returns the
    files worth corrupting; ``load(folder)`` reads it back (a model or a transformers tokenizer).
    ``transformers_files`` are parsed by transformers, not by hf_bpe."""

    name: str
    write: Callable[[Path], list[Path]]
    load: Callable[[Path], Any]
    json_files: tuple[str, ...] = ()
    line_files: tuple[str, ...] = ()
    proto_files: tuple[str, ...] = ()
    transformers_files: tuple[str, ...] = ()
    transformers_first: bool = False
    """transformers parses the files before hf_bpe sees them (``AutoTokenizer``): whatever its own
    code raises on them is its behaviour, not hf_bpe's."""


def _write_tiktoken(folder: Path) -> list[Path]:
    return [conversion.tiktoken.save(small_model(), folder / "small.tiktoken")]


def _load_tiktoken(folder: Path) -> hf_bpe.BPE:
    return conversion.tiktoken.load(folder / "small.tiktoken", pattern="cl100k", special_tokens={ENDOFTEXT: 300})


def _write_tekken(folder: Path) -> list[Path]:
    return [conversion.tiktoken.save_tekken(small_model(), folder / "tekken.json", lossy=True)]


def _write_gpt2(folder: Path) -> list[Path]:
    conversion.gpt2.save(small_merges_model(), folder, lossy=True)
    return [folder / "vocab.json", folder / "merges.txt", folder / "tokenizer_config.json"]


def _load_gpt2(folder: Path) -> hf_bpe.BPE:
    return conversion.gpt2.load(folder / "vocab.json", folder / "merges.txt")


def _write_sentencepiece(folder: Path) -> list[Path]:
    model = hf_bpe.BPE.from_sentencepiece(small_sentencepiece_spec())
    return [conversion.sentencepiece.save(model, folder / "small.model")]


def _write_hf(folder: Path) -> list[Path]:
    return [conversion.hf.save(small_model(), folder / "tokenizer.json")]


def _write_hf_bpe(folder: Path) -> list[Path]:
    return [small_model().save(folder / "model.json"), small_merges_model().save(folder / "merges.json"),
            hf_bpe.BPE.from_sentencepiece(small_sentencepiece_spec()).save(folder / "sentencepiece.json")]


def _load_hf_bpe(folder: Path) -> list[hf_bpe.BPE]:
    return [hf_bpe.BPE.load(folder / name) for name in ("model.json", "merges.json", "sentencepiece.json")]


def _write_folder(folder: Path) -> list[Path]:
    tokenizer = hf_bpe.BPETokenizer.from_model(small_model(), eos_token=ENDOFTEXT, add_eos_token=True)
    tokenizer.save_pretrained(folder, model_card=False)
    return [folder / name for name in ("tokenizer_config.json", "hf_bpe.json", "special_tokens_map.json",
                                       "tokenizer.json")]


def _load_folder(folder: Path) -> Any:
    return hf_bpe.BPETokenizer.from_pretrained(str(folder))


FORMATS: dict[str, Format] = {
    "tiktoken": Format("tiktoken", _write_tiktoken, _load_tiktoken, line_files=("small.tiktoken",)),
    "tekken": Format("tekken", _write_tekken, lambda folder: conversion.tiktoken.load_tekken(folder / "tekken.json"),
                     json_files=("tekken.json",)),
    "gpt2": Format("gpt2", _write_gpt2, _load_gpt2, json_files=("vocab.json", "tokenizer_config.json"),
                   line_files=("merges.txt",)),
    "sentencepiece": Format("sentencepiece", _write_sentencepiece,
                            lambda folder: conversion.sentencepiece.load(folder / "small.model"),
                            proto_files=("small.model",)),
    "hf": Format("hf", _write_hf, lambda folder: conversion.hf.load(folder / "tokenizer.json"),
                 json_files=("tokenizer.json",)),
    "hf_bpe": Format("hf_bpe", _write_hf_bpe, _load_hf_bpe,
                     json_files=("model.json", "merges.json", "sentencepiece.json")),
    "folder": Format("folder", _write_folder, _load_folder,
                     json_files=("tokenizer_config.json", "hf_bpe.json", "special_tokens_map.json", "tokenizer.json"),
                     transformers_files=("tokenizer_config.json", "special_tokens_map.json")),
}


@functools.cache
def valid_files(name: str) -> dict[str, bytes]:
    """The valid file set of a format, as ``{file name: bytes}`` (written once)."""
    import tempfile

    with tempfile.TemporaryDirectory() as scratch:
        written = FORMATS[name].write(Path(scratch))
        return {path.name: path.read_bytes() for path in written}


def materialize(files: dict[str, bytes], folder: Path) -> Path:
    """Write ``files`` into an empty ``folder``."""
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    for name, data in files.items():
        (folder / name).write_bytes(data)
    return folder


# ------------------------------------------------------------------------------------- mutations

HOSTILE_JSON_VALUES: tuple[Any, ...] = (
    None, True, False, 0, -1, 255, 256, 2**31 - 1, 2**31, 2**32, -(2**31), 2**63, 2**64 + 1, -(2**63) - 1,
    10**30, 1.5, -0.0, 1e308, math.inf, -math.inf, math.nan, "", "x", "\ud800", "<|endoftext|>", "\u0000",
    "a" * 1000, [], {}, [[[[[[]]]]]], [1, 2], {"a": 1}, ["a", "b"], "(a+)+$", "(?:(?:a?){19}a{19}(?=x)|a)",
    "\\", "[", "(?<=a", "\\p{Zzz}",
)
"""Values a corrupted JSON file may hold where hf_bpe expects something else."""


def json_paths(value: Any, limit: int = 5000) -> list[tuple[Any, ...]]:
    """Paths (key sequences) to the nodes of a JSON document, breadth-first, at most ``limit``."""
    found: list[tuple[Any, ...]] = []
    queue: list[tuple[tuple[Any, ...], Any]] = [((), value)]
    while queue and len(found) < limit:
        path, node = queue.pop(0)
        found.append(path)
        if isinstance(node, dict):
            queue.extend((path + (key,), child) for key, child in node.items())
        elif isinstance(node, list):
            queue.extend((path + (index,), child) for index, child in enumerate(node))
    return found


def _parent(document: Any, path: tuple[Any, ...]) -> Any:
    for key in path[:-1]:
        document = document[key]
    return document


def mutate_json(data: bytes, choices: Sequence[tuple[int, int, int]]) -> bytes:
    """Structured corruption of a JSON document: each ``(operation, node, value)`` choice replaces a
    node with a hostile value, deletes it, duplicates it (lists), or copies another node over it."""
    try:
        document = json.loads(data)
    except ValueError:
        return data
    for operation, node, other in choices:
        paths = json_paths(document)
        path = paths[node % len(paths)]
        if not path:
            if operation % 4 == 0:
                document = copy.deepcopy(HOSTILE_JSON_VALUES[other % len(HOSTILE_JSON_VALUES)])
            continue
        parent, key = _parent(document, path), path[-1]
        kind = operation % 4
        if kind == 0:
            parent[key] = copy.deepcopy(HOSTILE_JSON_VALUES[other % len(HOSTILE_JSON_VALUES)])
        elif kind == 1:
            del parent[key]
        elif kind == 2 and isinstance(parent, list):
            parent.insert(other % (len(parent) + 1), copy.deepcopy(parent[key]))
        else:
            source = paths[other % len(paths)]
            if source and source[: len(path)] != path:
                parent[key] = json.loads(json.dumps(_parent(document, source)[source[-1]]))
    return json.dumps(document, ensure_ascii=True).encode()


def mutate_lines(data: bytes, choices: Sequence[tuple[int, int, int]]) -> bytes:
    """Line-level corruption: delete, duplicate, swap or rewrite the number on a line."""
    lines = data.split(b"\n")
    numbers = [b"-1", b"0", b"255", b"2147483647", b"2147483648", b"18446744073709551617", b"1e5", b"x", b""]
    for operation, line, other in choices:
        if not lines:
            break
        index, target = line % len(lines), other % len(lines)
        kind = operation % 5
        if kind == 0:
            del lines[index]
        elif kind == 1:
            lines.insert(target, lines[index])
        elif kind == 2:
            lines[index], lines[target] = lines[target], lines[index]
        elif kind == 3:
            fields = lines[index].split(b" ")
            fields[-1] = numbers[other % len(numbers)]
            lines[index] = b" ".join(fields)
        else:
            lines.insert(index, bytes(other % 256 for _ in range(operation % 7)))
    return b"\n".join(lines)


def _varint(data: bytes, at: int) -> tuple[int, int]:
    """A protobuf varint at ``at``: (value, end)."""
    value, shift = 0, 0
    while at < len(data) and shift < 70:
        byte = data[at]
        value |= (byte & 0x7F) << shift
        at += 1
        shift += 7
        if not byte & 0x80:
            return value, at
    raise ValueError("truncated varint")


def _encode_varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def length_fields(data: bytes, start: int = 0, end: int | None = None, depth: int = 0) -> list[tuple[int, int]]:
    """``(offset, size)`` of the length varint of every length-delimited protobuf field, descending
    one level into fields that parse as messages (a SentencePiece piece, the specs)."""
    end = len(data) if end is None else end
    found: list[tuple[int, int]] = []
    at = start
    try:
        while at < end:
            key, at = _varint(data, at)
            wire = key & 7
            if wire == 0:
                _, at = _varint(data, at)
            elif wire == 1:
                at += 8
            elif wire == 5:
                at += 4
            elif wire == 2:
                length, body = _varint(data, at)
                found.append((at, body - at))
                if depth == 0:
                    found += length_fields(data, body, min(body + length, end), depth + 1)
                at = body + length
            else:
                break
    except ValueError:
        pass
    return found


HOSTILE_LENGTHS = (0, 1, 2**31 - 1, 2**31, 2**32 - 1, 2**32, 2**63, 2**64 - 1)
"""Declared lengths for protobuf fields: empty, 2 GB and 4 GB (and beyond), the largest varint."""


def mutate_proto(data: bytes, choices: Sequence[tuple[int, int, int]]) -> bytes:
    """Rewrite the declared length of protobuf fields: a hostile value, or off by a little."""
    for _, field, value in choices:
        fields = length_fields(data)
        if not fields:
            break
        offset, size = fields[field % len(fields)]
        declared, _ = _varint(data, offset)
        lengths = HOSTILE_LENGTHS + (declared + 1, max(declared - 1, 0), declared * 2)
        data = data[:offset] + _encode_varint(lengths[value % len(lengths)]) + data[offset + size :]
    return data


HOSTILE_SCORES = (math.nan, math.inf, -math.inf, 3.4e38, -3.4e38, 0.0, -0.0, 1e-45)
HOSTILE_PIECES = ("", "<unk>", "<s>", "\u2581", "\u2581\u2581", "<0x41>", "<0xZZ>", "a", "ab", "x" * 300, "\u0000")


def mutate_model_proto(data: bytes, choices: Sequence[tuple[int, int, int]]) -> bytes:
    """Structured corruption of a SentencePiece ``ModelProto``: piece texts, scores and types, pieces
    deleted or repeated, trainer and normalizer settings, the character map cut or altered."""
    from sentencepiece import sentencepiece_model_pb2

    proto = sentencepiece_model_pb2.ModelProto()
    try:
        proto.ParseFromString(data)
    except Exception:  # noqa: BLE001 - not a ModelProto any more: nothing structured to corrupt
        return data
    for operation, where, value in choices:
        pieces = proto.pieces
        piece = pieces[where % len(pieces)] if len(pieces) else None
        kind = operation % 12
        if kind == 0 and piece is not None:
            piece.type = value % 6 + 1  # a closed enum: protobuf refuses other values
        elif kind == 1 and piece is not None:
            piece.score = HOSTILE_SCORES[value % len(HOSTILE_SCORES)]
        elif kind == 2 and piece is not None:
            piece.piece = HOSTILE_PIECES[value % len(HOSTILE_PIECES)]
        elif kind == 3 and piece is not None:
            piece.piece = pieces[value % len(pieces)].piece  # a duplicate
        elif kind == 4 and len(pieces):
            del pieces[where % len(pieces)]
        elif kind == 5 and piece is not None:
            pieces.add().CopyFrom(piece)
        elif kind == 6:
            proto.trainer_spec.model_type = value % 4 + 1
        elif kind == 7:
            proto.trainer_spec.byte_fallback = not proto.trainer_spec.byte_fallback
        elif kind == 8:
            spec = proto.normalizer_spec
            setting = ("add_dummy_prefix", "remove_extra_whitespaces", "escape_whitespaces")[value % 3]
            setattr(spec, setting, not getattr(spec, setting))
        elif kind == 9:
            charsmap = bytearray(proto.normalizer_spec.precompiled_charsmap)
            if charsmap:
                at = where % len(charsmap)
                if value % 2:
                    del charsmap[at:]
                else:
                    charsmap[at] = value % 256
            proto.normalizer_spec.precompiled_charsmap = bytes(charsmap)
        elif kind == 10:
            proto.trainer_spec.unk_surface = HOSTILE_PIECES[value % len(HOSTILE_PIECES)]
        else:
            proto.trainer_spec.treat_whitespace_as_suffix = bool(value % 2)
    return proto.SerializeToString()


def mutate_bytes(data: bytes, choices: Sequence[tuple[int, int, int]]) -> bytes:
    """Byte-level corruption: truncate, set, flip a bit, insert, delete or repeat a span."""
    buffer = bytearray(data)
    for operation, position, value in choices:
        at = position % (len(buffer) + 1)
        kind = operation % 6
        if kind == 0:
            del buffer[at:]
        elif kind == 1 and at < len(buffer):
            buffer[at] = value % 256
        elif kind == 2 and at < len(buffer):
            buffer[at] ^= 1 << (value % 8)
        elif kind == 3:
            buffer[at:at] = bytes((value + index) % 256 for index in range(1 + operation % 8))
        elif kind == 4:
            del buffer[at : at + 1 + value % 64]
        elif kind == 5:
            buffer[at:at] = buffer[value % (len(buffer) + 1) :][: 1 + operation % 64]
    return bytes(buffer)


MUTATORS: dict[str, Callable[[bytes, Sequence[tuple[int, int, int]]], bytes]] = {
    "bytes": mutate_bytes, "json": mutate_json, "lines": mutate_lines, "proto": mutate_proto,
    "model_proto": mutate_model_proto,
}


def mutators_for(form: Format, file_name: str) -> list[str]:
    kinds = ["bytes"]
    if file_name in form.json_files:
        kinds.append("json")
    if file_name in form.line_files:
        kinds.append("lines")
    if file_name in form.proto_files:
        kinds += ["proto", "model_proto", "model_proto"]
    return kinds


def corrupt(files: dict[str, bytes], form: Format, file_index: int, mutator_index: int,
            choices: Sequence[tuple[int, int, int]]) -> tuple[dict[str, bytes], str, str]:
    """``files`` with one of them corrupted; also returns which file and how."""
    names = sorted(files)
    name = names[file_index % len(names)]
    kinds = mutators_for(form, name)
    kind = kinds[mutator_index % len(kinds)]
    return {**files, name: MUTATORS[kind](files[name], choices)}, name, kind


def random_choices(rng: random.Random, count: int) -> list[tuple[int, int, int]]:
    return [(rng.randrange(1 << 16), rng.randrange(1 << 30), rng.randrange(1 << 30)) for _ in range(count)]


# -------------------------------------------------------------------------------------- property


def is_documented_refusal(error: BaseException, form: Format, corrupted: str) -> bool:
    """Whether ``error`` is how hf_bpe may refuse a corrupted ``corrupted`` file of ``form``."""
    if isinstance(error, InternalError) or not str(error).strip():
        return False
    if isinstance(error, (TokenizerFileError, InvalidVocabularyError, ConversionError)):
        return True
    # transformers parses its own files in a tokenizer folder and raises its own errors.
    if corrupted not in form.transformers_files or isinstance(error, MemoryError):
        return False
    return isinstance(error, (ValueError, TypeError, OSError)) or (form.transformers_first and raised_in_transformers(error))


def raised_in_transformers(error: BaseException) -> bool:
    """Whether the innermost frame of ``error``'s traceback is transformers' code."""
    traceback = error.__traceback__
    while traceback is not None and traceback.tb_next is not None:
        traceback = traceback.tb_next
    return traceback is not None and f"{os.sep}transformers{os.sep}" in traceback.tb_frame.f_code.co_filename


def exercise(loaded: Any) -> None:
    """Use a loaded model (or tokenizer, or list of models) the way a user would, checking sanity."""
    if isinstance(loaded, list):
        for model in loaded:
            exercise(model)
        return
    if isinstance(loaded, hf_bpe.BPE):
        exercise_model(loaded)
        return
    exercise_tokenizer(loaded)


def _split_refusal(error: ValueError) -> bool:
    """A custom split pattern (from a corrupted file) may be too slow for a text, or give up."""
    return str(error).startswith(("the split pattern", "split pattern"))


def exercise_model(model: hf_bpe.BPE) -> None:
    named = model.kind != "sentencepiece" and patterns.name_of(model.pattern) is not None
    # A tokenizer.json lacking byte symbols text uses loads as tokenizers runs it, dropping those bytes
    # (with MissingBytesWarning): its encodings do not decode back to the text.
    round_trips = named and all(byte in NEVER_IN_UTF8 for byte in missing_bytes(model))
    for text in EXERCISE_TEXTS:
        try:
            ordinary = model.encode_ordinary(text)
            ids = model.encode(text, allowed_special="all")
            with_offsets, offsets = model.encode_with_offsets(text, disallowed_special=())
        except ValueError as error:
            if not named and _split_refusal(error):
                continue
            raise
        assert all(0 <= token < model.n_vocab for token in ordinary + ids), (text, ordinary, ids)
        assert with_offsets == model.encode(text, disallowed_special=())
        assert offsets == sorted(offsets) and all(0 <= offset <= len(text) for offset in offsets)
        assert isinstance(model.decode(ids), str) and isinstance(model.decode(ordinary), str)
        if round_trips:
            assert model.decode_bytes(ordinary) == text.encode("utf-8", "surrogatepass"), text
            assert model.decode(ids) == text
    try:
        batch = model.encode_ordinary_batch(list(EXERCISE_TEXTS), num_threads=2)
    except ValueError as error:
        if named or not _split_refusal(error):
            raise
    else:
        assert batch == [model.encode_ordinary(text) for text in EXERCISE_TEXTS]
    for token in range(0, model.n_vocab, max(1, model.n_vocab // 64)):
        try:
            assert isinstance(model.decode_single_token_bytes(token), bytes)
        except KeyError:
            pass  # an id hole
    if model.kind != "sentencepiece":
        assert all(isinstance(left, bytes) and isinstance(right, bytes) for left, right in model.merges)


def exercise_tokenizer(tokenizer: Any) -> None:
    """A transformers tokenizer: ours (``BPETokenizer``) or, for AutoTokenizer on a folder whose
    ``tokenizer_class`` was corrupted, transformers' ``TokenizersBackend``."""
    model = getattr(tokenizer, "model", None)
    named = isinstance(model, hf_bpe.BPE) and patterns.name_of(model.pattern) is not None
    for text in EXERCISE_TEXTS:
        try:
            ids = tokenizer(text, add_special_tokens=False)["input_ids"]
            with_specials = tokenizer(text)["input_ids"]
        except ValueError as error:
            if not named and _split_refusal(error):
                continue
            raise
        assert all(isinstance(token, int) for token in ids + with_specials)
        assert isinstance(tokenizer.decode(with_specials), str)
        if named and not tokenizer.get_added_vocab():
            assert tokenizer.decode(ids) == text
    batch = tokenizer(list(EXERCISE_TEXTS[:4]))
    assert len(batch["input_ids"]) == 4


def check_load(form: Format, folder: Path, corrupted: str) -> str:
    """Load ``folder`` as ``form`` and hold the property; returns ``"loaded"`` or ``"refused"``."""
    started = time.process_time()
    try:
        loaded = form.load(folder)
    except Exception as error:
        if not is_documented_refusal(error, form, corrupted):
            raise AssertionError(
                f"{form.name}: corrupting {corrupted} raised {type(error).__name__}: {error}"
            ) from error
        if isinstance(error, TokenizerFileError) and form.name != "folder":
            assert os.fspath(error.path) in str(error)
        outcome = "refused"
    else:
        exercise(loaded)
        outcome = "loaded"
    took = time.process_time() - started
    assert took < SLOW_LOAD_CPU_SECONDS, f"{form.name}: corrupting {corrupted} made loading take {took:.1f} CPU s"
    return outcome


def iter_formats() -> Iterator[Format]:
    yield from FORMATS.values()


# ------------------------------------------------------------------------------ cost, not clock time

cost_grows_linearly = cost.cost_grows_linearly
median_cost_ratio = cost.median_cost_ratio


def bytes_read_by_this_process() -> int | None:
    """Bytes this process has read so far (``rchar`` of ``/proc/self/io``), or ``None`` where the
    system does not say."""
    try:
        lines = Path("/proc/self/io").read_text().splitlines()
    except OSError:
        return None
    return next((int(line.split()[1]) for line in lines if line.startswith("rchar:")), None)
