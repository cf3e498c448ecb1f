"""``BPE.from_vocab`` / ``conversion.gpt2.load`` with a list of special tokens (the shapes minbpe and CS336 hold) and ``model.vocab``:
round trips, CS336's reference merges, and clear errors for inconsistent input."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
import textgen
from suite import require_shared, scaled

import conversion.gpt2
import hf_bpe
from hf_bpe._byte_level import token_to_str
from hf_bpe.errors import InvalidVocabularyError, TokenizerFileError

BYTES = {i: bytes([i]) for i in range(256)}


def _texts(specials: list[str]) -> list[str]:
    docs = textgen.documents(random.Random(7), scaled(60_000))
    return docs + ["".join(specials) + " x " + " ".join(specials)]


@pytest.mark.parametrize("encoding", ["gpt2", "cl100k_base"])
def test_vocab_and_merges_round_trip_through_from_vocab(encoding: str) -> None:
    model = hf_bpe.get_encoding(encoding)
    specials = sorted(model.special_tokens)
    again = hf_bpe.BPE.from_vocab(model.vocab, model.merges, specials, model.pattern)
    assert again.vocab == model.vocab
    assert again.merges == model.merges
    assert again.special_tokens == model.special_tokens
    texts = _texts(specials)
    assert again.encode_batch(texts, allowed_special="all") == model.encode_batch(texts, allowed_special="all")


def test_a_trained_model_round_trips_through_gpt2_style_files(tmp_path: Path) -> None:
    docs = textgen.tie_documents(random.Random(3), words=200, special_tokens=["<|endoftext|>"])
    model = hf_bpe.train(docs, 600, special_tokens=["<|endoftext|>"], show_progress=False)
    (tmp_path / "vocab.json").write_text(json.dumps({token_to_str(token): i for i, token in model.vocab.items()}))
    (tmp_path / "merges.txt").write_text("".join(f"{token_to_str(a)} {token_to_str(b)}\n" for a, b in model.merges))
    again = conversion.gpt2.load(tmp_path / "vocab.json", tmp_path / "merges.txt", ["<|endoftext|>"])
    assert again.vocab == model.vocab and again.merges == model.merges
    assert again.encode_batch(docs, allowed_special="all") == model.encode_batch(docs, allowed_special="all")


def test_cs336_reference_files_encode_as_the_model_trained_on_the_same_corpus() -> None:
    folder = require_shared("cs336")
    reference = conversion.gpt2.load(folder / "train-bpe-reference-vocab.json",
                                     folder / "train-bpe-reference-merges.txt", ["<|endoftext|>"])
    assert reference.special_tokens == {"<|endoftext|>": 0}, "CS336's vocab holds the special token at id 0"
    trained = hf_bpe.train(files=[folder / "corpus.en"], vocab_size=500, special_tokens=["<|endoftext|>"],
                           show_progress=False)
    assert [a + b for a, b in reference.merges] == [trained.decode_single_token_bytes(256 + i) for i in range(243)]
    text = (folder / "corpus.en").read_text(encoding="utf-8")[:50_000] + "<|endoftext|>"
    ours = trained.decode_tokens_bytes(trained.encode(text, allowed_special="all"))
    theirs = reference.decode_tokens_bytes(reference.encode(text, allowed_special="all"))
    assert ours == theirs


def test_special_tokens_keep_their_vocab_id_or_come_after_the_largest() -> None:
    model = hf_bpe.BPE.from_vocab(BYTES | {300: b"<|a|>"}, [], ["<|b|>", "<|a|>"])
    assert model.special_tokens == {"<|b|>": 301, "<|a|>": 300}
    assert model.vocab[301] == b"<|b|>"


@pytest.mark.parametrize(
    ("vocab", "merges", "specials", "message"),
    [
        (BYTES | {256: b"ab"}, [(b"a", b"c")], None, r"merge 0 \(b'a', b'c'\): its result b'ac' is not in vocab"),
        (BYTES, [(b"a", b"xy")], None, r"its token b'xy' is not in vocab"),
        (BYTES | {256: b"a"}, [], None, "ids 97 and 256 are both b'a'"),
        (BYTES | {-1: b"ab"}, [], None, "vocab id -1 is not a non-negative int"),
        (BYTES | {256: "ab"}, [], None, r"vocab\[256\] is str, not bytes"),
        (BYTES, [(b"a",)], None, "merge 0 .* is not a pair of bytes"),
        (BYTES, [], ["<|a|>", "<|a|>"], "given twice"),
        (BYTES | {256: b"ab"}, [(b"a", b"b")], ["ab"], r"its result b'ab' is not in vocab \(or is a special token\)"),
        ({i: bytes([i]) for i in range(255)}, [], None, "byte"),
    ],
)
def test_inconsistent_input_is_refused_saying_what(vocab, merges, specials, message) -> None:
    with pytest.raises(InvalidVocabularyError, match=message):
        hf_bpe.BPE.from_vocab(vocab, merges, specials)


def test_unreadable_files_name_the_file_and_line(tmp_path: Path) -> None:
    vocab = tmp_path / "vocab.json"
    vocab.write_text(json.dumps({token_to_str(bytes([b])): b for b in range(256)}))
    merges = tmp_path / "merges.txt"
    merges.write_text("#version: 0.2\nĠ t\na b c\n")
    with pytest.raises(TokenizerFileError, match=r"merges.txt, line 3: expected two tokens"):
        conversion.gpt2.load(vocab, merges)
    vocab.write_text('["not", "an", "object"]')
    with pytest.raises(TokenizerFileError, match="vocab.json: expected a JSON object"):
        conversion.gpt2.load(vocab, merges)
