"""tiktoken rank files: load, save, and rejection of malformed files."""

from __future__ import annotations

import base64
import gzip
import os
from pathlib import Path

import pytest

import conversion.tiktoken
import hf_bpe
from hf_bpe import BPE
from hf_bpe.errors import TokenizerFileError

BYTES = {bytes([byte]): byte for byte in range(256)}


def rank_file(tmp_path: Path, lines: list[bytes], name: str = "ranks.tiktoken") -> Path:
    path = tmp_path / name
    path.write_bytes(b"\n".join(lines) + b"\n")
    return path


def byte_lines() -> list[bytes]:
    return [base64.b64encode(token) + b" " + str(rank).encode() for token, rank in BYTES.items()]


def test_save_then_load_round_trips_ranks_with_holes(tmp_path: Path) -> None:
    model = BPE(BYTES | {b"ab": 300, b"abc": 1000}, "cl100k", {"<|endoftext|>": 2000})
    path = conversion.tiktoken.save(model, tmp_path / "model.tiktoken")
    loaded = conversion.tiktoken.load(path, pattern="cl100k", special_tokens={"<|endoftext|>": 2000})
    assert loaded == model
    assert loaded.name == "model"


def test_saved_file_is_read_by_tiktoken_itself(tmp_path: Path) -> None:
    load_tiktoken_bpe = pytest.importorskip("tiktoken.load").load_tiktoken_bpe
    ranks = BYTES | {b" t": 256, b"he": 257, b" the": 258}
    path = conversion.tiktoken.save(BPE(ranks, "gpt2"), tmp_path / "x.tiktoken")
    assert load_tiktoken_bpe(os.fspath(path)) == ranks


def test_official_file_round_trips_byte_for_byte(tmp_path: Path) -> None:
    """Our writer reproduces the official cl100k file exactly (same SHA-256 as tiktoken expects)."""
    model = hf_bpe.get_encoding("cl100k_base")
    from hf_bpe.encodings import CL100K, find_file

    _, original = find_file(CL100K)
    assert conversion.tiktoken.dumps(model) == original


def test_gzipped_files_are_read(tmp_path: Path) -> None:
    path = tmp_path / "ranks.tiktoken.gz"
    path.write_bytes(gzip.compress(b"\n".join(byte_lines()) + b"\n"))
    assert conversion.tiktoken.load(path, pattern="gpt2").mergeable_ranks == BYTES


def test_blank_lines_are_skipped_like_tiktoken(tmp_path: Path) -> None:
    path = rank_file(tmp_path, [b"", *byte_lines()[:128], b"", *byte_lines()[128:], b""])
    assert conversion.tiktoken.read_ranks(path) == BYTES


@pytest.mark.parametrize(
    ("bad_line", "problem"),
    [
        (b"YWI=", "expected '<base64 token> <rank>'"),
        (b"YWI= 300 extra", "expected '<base64 token> <rank>'"),
        (b"!!notbase64 300", "invalid base64"),
        (b"YWI= three", "not an integer"),
        (b"YWI= -1", "out of range"),
        (b"YWI= 99999999999", "out of range"),
        (b"YQ== 300", "appears again"),  # b"a" again
        (b"YWI= 97", "rank 97 appears again"),
        (b" 300", "expected '<base64 token> <rank>'"),
    ],
)
def test_malformed_lines_name_file_and_line(tmp_path: Path, bad_line: bytes, problem: str) -> None:
    lines = byte_lines()
    lines.insert(200, bad_line)
    path = rank_file(tmp_path, lines, "broken.tiktoken")
    with pytest.raises(TokenizerFileError, match=problem) as raised:
        conversion.tiktoken.load(path, pattern="gpt2")
    assert raised.value.line == 201
    assert "broken.tiktoken, line 201" in str(raised.value)
    assert isinstance(raised.value, ValueError)


def test_empty_and_corrupt_gzip_files_are_rejected(tmp_path: Path) -> None:
    empty = tmp_path / "empty.tiktoken"
    empty.write_bytes(b"")
    with pytest.raises(TokenizerFileError, match="no ranks"):
        conversion.tiktoken.load(empty, pattern="gpt2")
    corrupt = tmp_path / "corrupt.tiktoken.gz"
    corrupt.write_bytes(gzip.compress(b"\n".join(byte_lines()))[:200])
    with pytest.raises(TokenizerFileError, match="corrupt.tiktoken.gz"):
        conversion.tiktoken.load(corrupt, pattern="gpt2")


def test_missing_single_bytes_are_rejected_with_the_file_loaded(tmp_path: Path) -> None:
    path = rank_file(tmp_path, byte_lines()[:100])
    with pytest.raises(hf_bpe.InvalidVocabularyError, match="single byte"):
        conversion.tiktoken.load(path, pattern="gpt2")


def test_save_is_atomic_when_writing_fails(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "model.tiktoken"
    target.write_bytes(b"previous contents\n")
    model = BPE(BYTES, "gpt2")

    def fail(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(os, "fsync", fail)
    with pytest.raises(OSError, match="disk full"):
        conversion.tiktoken.save(model, target)
    assert target.read_bytes() == b"previous contents\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.tiktoken"], "temporary file left behind"


def test_save_rejects_non_models(tmp_path: Path) -> None:
    with pytest.raises(TypeError):
        conversion.tiktoken.save({b"a": 0}, tmp_path / "x.tiktoken")  # type: ignore[arg-type]
