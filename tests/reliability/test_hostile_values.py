"""Hostile values reaching the model through the Python API (what every loader hands over): ids
beyond 2**31, beyond 64 bits and negative, in ranks, special tokens, merges and decode; each
refused with hf_bpe's own error naming the value, never an ``OverflowError`` or a misleading
``TypeError``."""

from __future__ import annotations

import pytest

import hf_bpe
from hf_bpe.errors import InvalidVocabularyError, UnknownTokenError

BYTES = {bytes([b]): b for b in range(256)}
HOSTILE_IDS = [2**31, 2**32 + 5, 2**63, 2**64 + 1, 2**200, -1, -(2**63) - 1]


@pytest.mark.parametrize("rank", HOSTILE_IDS)
def test_ranks_out_of_range_are_invalid_vocabularies(rank: int) -> None:
    with pytest.raises(InvalidVocabularyError, match=rf"rank {rank} of b'ab' is out of range"):
        hf_bpe.BPE(BYTES | {b"ab": rank}, "gpt2")


@pytest.mark.parametrize("token_id", HOSTILE_IDS)
def test_special_token_ids_out_of_range_are_invalid_vocabularies(token_id: int) -> None:
    with pytest.raises(InvalidVocabularyError, match=rf"has id {token_id}, out of range"):
        hf_bpe.BPE(BYTES, "gpt2", {"<|end|>": token_id})


@pytest.mark.parametrize("token_id", HOSTILE_IDS)
def test_merges_naming_ids_out_of_range_are_invalid_vocabularies(token_id: int) -> None:
    with pytest.raises(InvalidVocabularyError, match=rf"(rank|id) {token_id}\b.*out of range"):
        hf_bpe.BPE.from_merges(BYTES | {b"ab": token_id}, [(b"a", b"b")], "gpt2")
    with pytest.raises(InvalidVocabularyError, match=rf"merge 0 names id {token_id}, out of range"):
        hf_bpe._core.CoreBPE.from_merges(BYTES | {b"ab": 256}, [(97, token_id)], "gpt2", {}, False)


def test_non_integer_ids_are_type_errors_naming_them() -> None:
    with pytest.raises(TypeError, match=r"the rank of b'ab' must be an int, got 1\.5"):
        hf_bpe.BPE(BYTES | {b"ab": 1.5}, "gpt2")
    with pytest.raises(TypeError, match=r"must be an int, got '7'"):
        hf_bpe.BPE(BYTES, "gpt2", {"<|end|>": "7"})
    with pytest.raises(TypeError, match=r"merge 0 must be a pair of ids"):
        hf_bpe._core.CoreBPE.from_merges(BYTES | {b"ab": 256}, [(97,)], "gpt2", {}, False)


@pytest.mark.parametrize("token_id", [*HOSTILE_IDS, 300])
def test_decoding_unknown_ids_names_the_id(token_id: int) -> None:
    model = hf_bpe.BPE(BYTES | {b"ab": 256}, "gpt2", {"<|end|>": 257})
    for decode in (model.decode, model.decode_bytes):
        with pytest.raises(UnknownTokenError) as raised:
            decode([97, token_id])
        assert str(raised.value).startswith(f"unknown token {token_id}: it is not in this vocabulary (ids run "
                                            "from 0 to 257")
    with pytest.raises(UnknownTokenError, match=rf"unknown token {token_id}:"):
        model.decode_single_token_bytes(token_id)
