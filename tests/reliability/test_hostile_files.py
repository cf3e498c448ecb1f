"""Hostile tokenizer files, one case at a time: each is refused with a clear error naming the file
and the problem, or loads and encodes within bounded time and memory."""

from __future__ import annotations

import struct
from pathlib import Path

import conversion.sentencepiece
import hf_bpe
import pytest
from hf_bpe.sentencepiece import BYTE, NORMAL, UNKNOWN, Piece, SentencePieceSpec

# ------------------------------------------------------------------------------------ SentencePiece


def one_rule_charsmap(key: int, replacement: bytes) -> bytes:
    """A SentencePiece precompiled character map (darts-clone double array, then NUL-terminated
    replacements) with one rule: the single byte ``key`` becomes ``replacement``."""
    units = [0] * 258
    units[0] = 1 << 10  # the root; its children sit at offset 1
    child = 1 ^ key  # a child's index is its parent's offset XOR its label
    units[child] = (1 << 10) | (1 << 8) | key  # label `key`, with a leaf at offset 1
    units[child ^ 1] = 1 << 31  # the leaf: value 0, the first replacement
    return struct.pack("<I", 4 * len(units)) + struct.pack(f"<{len(units)}I", *units) + replacement + b"\0"


def small_spec(charsmap: bytes) -> SentencePieceSpec:
    pieces = [Piece("<unk>", 0.0, UNKNOWN), *(Piece(f"<0x{b:02X}>", 0.0, BYTE) for b in range(256)),
              Piece("\u2581", -1.0), Piece("a", -2.0), Piece("b", -3.0), Piece("\u2581a", -4.0), Piece("x", -5.0)]
    return SentencePieceSpec(tuple(pieces), byte_fallback=True, normalizer_name="custom", charsmap=charsmap)


@pytest.mark.parametrize(
    ("key", "replacement", "why"),
    [
        (0xC3, b"x", "a rule that ends inside the character \u00e9 (its first byte)"),
        (ord("a"), b"\xff\xfe", "a rule whose replacement is not UTF-8"),
    ],
)
def test_corrupt_sentencepiece_character_maps_encode_without_crashing(
    tmp_path: Path, key: int, replacement: bytes, why: str
) -> None:
    """Regression: both made the Rust normalizer panic (slicing inside a character; offsets shifted
    against lossy text), found by mutating the character map of a real model."""
    path = conversion.sentencepiece.save(hf_bpe.BPE.from_sentencepiece(small_spec(one_rule_charsmap(key, replacement))),
                                         tmp_path / "corrupt.model")
    model = conversion.sentencepiece.load(path)
    text = "xa \u00e9b a\u00e9"
    ids, offsets = model.encode_with_offsets(text)
    assert ids == model.encode_ordinary(text), why
    assert len(offsets) == len(ids) and offsets == sorted(offsets) and all(0 <= o <= len(text) for o in offsets)
    assert model.decode(ids) == text  # the broken rule is ignored, so the text comes back unchanged


def test_a_sentencepiece_character_map_rule_applies(tmp_path: Path) -> None:
    """The hand-made map is a real one: its rule rewrites text (so the cases above test the rule)."""
    model = hf_bpe.BPE.from_sentencepiece(small_spec(one_rule_charsmap(ord("x"), b"ab")))
    assert model.decode(model.encode_ordinary("x")) == "ab"
