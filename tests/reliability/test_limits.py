"""The limits docs/limits.md states: ids up to 2**31 - 1 (a table below 2**24, a hash map above; what needs
an entry per id refuses larger ones instead of exhausting memory), tokens of any length, and what
is refused beyond them."""

from __future__ import annotations

import pytest

import conversion.hf
import hf_bpe
from hf_bpe import BPE, ConversionError, InvalidVocabularyError
from hf_bpe.model import MAX_DENSE_IDS

BYTES = {bytes([byte]): byte for byte in range(256)}


@pytest.mark.parametrize("top", [MAX_DENSE_IDS - 1, MAX_DENSE_IDS, 2**31 - 1])
def test_ids_up_to_two_to_the_31_encode_and_decode(top: int) -> None:
    model = BPE({**BYTES, b"ab": top - 1}, "gpt2", special_tokens={"<|end|>": top})
    ids = model.encode("ab<|end|>", allowed_special="all")
    assert ids == [top - 1, top] and model.decode(ids) == "ab<|end|>" and model.n_vocab == top + 1


def test_ids_from_two_to_the_31_are_refused() -> None:
    with pytest.raises(InvalidVocabularyError, match="out of range"):
        BPE(BYTES, "gpt2", special_tokens={"<|end|>": 2**31})
    with pytest.raises(InvalidVocabularyError, match="out of range"):
        BPE({**BYTES, b"ab": 2**31}, "gpt2")


def test_what_needs_an_entry_per_id_refuses_sparse_ids_at_once() -> None:
    sparse = BPE(BYTES, "gpt2", special_tokens={"<|end|>": 2**31 - 1})
    with pytest.raises(InvalidVocabularyError, match="below 16,777,216"):
        hf_bpe.BPETokenizer.from_model(sparse)
    with pytest.raises(ConversionError, match="below 16,777,216"):
        conversion.hf.build_tokenizer(sparse)
    roomy = BPE(BYTES, "gpt2", special_tokens={"<|end|>": 1_000_000})
    tokenizer = hf_bpe.BPETokenizer.from_model(roomy, eos_token="<|end|>", add_eos_token=True)
    assert tokenizer("ab")["input_ids"] == [97, 98, 1_000_000] and len(tokenizer) == 1_000_001


def test_a_long_token_is_one_id_whole_and_in_a_stream() -> None:
    long_token = "ab" * 20_000
    model = BPE({**BYTES, long_token.encode(): 256, b"ab": 257}, "gpt2")
    text = f"{long_token} {long_token}b"
    assert model.encode(long_token) == [256]
    assert list(model.encode_iterable([text[:1000], text[1000:]])) == model.encode(text)
    assert model.decode(model.encode(text)) == text
