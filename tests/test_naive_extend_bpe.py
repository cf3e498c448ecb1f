"""The extension reference (``tests/support/naive_extend_bpe.py``): its loop from single bytes is the naive trainer;
its two encoders are tiktoken's and ``tokenizers``' BPE; continuing a model on its own training corpus is
training longer (rank models and merges-list models, text full of ties and the shared corpora); old ids,
bytes and merges never change and new ids follow the last one, with the special tokens kept or moved."""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from typing import Any

import pytest
import regex
import textgen
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from naive_bpe import naive_pieces, naive_train, regex_only_code_points
from naive_extend_bpe import (
    continue_merges,
    encode_with_merges,
    encode_with_ranks,
    extend_merges_model,
    extend_rank_model,
)
from naive_parity_bpe import BYTE_LEVEL, GPT2_PATTERN, from_byte_level
from suite import FULL_SIZE, SHARED_DATA, require_shared, scaled

from hf_bpe import patterns

BYTES = {bytes([byte]): byte for byte in range(256)}
PATTERNS = [patterns.GPT2, patterns.CL100K, patterns.O200K]
SPECIAL_TOKENS = [[], ["<|endoftext|>"], ["<|endoftext|>", "<|im_start|>"]]
CORPUS_FILES = ["corpora/wiki_ja.txt", "cs336/corpus.en", "corpora/wiki_el.txt", "corpora/taylorswift.txt"]


def single_bytes(piece: bytes) -> list[bytes]:
    return [bytes([byte]) for byte in piece]


def tie_corpus(seed: int, words: int, special_tokens: list[str]) -> list[str]:
    return textgen.tie_documents(random.Random(seed), words=words, special_tokens=special_tokens,
                                 excluded=regex_only_code_points())


def trained(documents: list[str], pattern: str, special_tokens: list[str], num_tokens: int) -> Any:
    """A model DESIGN.md §3's rule trains from bytes: (ranks, special tokens, merges, learned tokens)."""
    result = continue_merges(naive_pieces(documents, pattern, special_tokens), single_bytes, BYTES, num_tokens)
    ranks = BYTES | {token: 256 + i for i, token in enumerate(result.tokens)}
    specials = {token: len(ranks) + i for i, token in enumerate(special_tokens)}
    return ranks, specials, result.merges, result.tokens


# ------------------------------------------------------------------------------------ the loop


@settings(max_examples=scaled(15), deadline=None)
@given(seed=st.integers(0, 2**32), words=st.integers(1, 40), pattern=st.sampled_from(PATTERNS),
       special_tokens=st.sampled_from(SPECIAL_TOKENS), merges=st.integers(0, 80))
def test_continuing_from_single_bytes_is_the_naive_trainer(
    seed: int, words: int, pattern: str, special_tokens: list[str], merges: int
) -> None:
    documents = tie_corpus(seed, words, special_tokens)
    expected = naive_train(documents, 256 + len(special_tokens) + merges, pattern, special_tokens)
    assert trained(documents, pattern, special_tokens, merges)[3] == expected


# ------------------------------------------------------------------------------ the encoders


@pytest.mark.parametrize("name", ["gpt2", "cl100k_base"])
def test_the_rank_encoder_is_tiktoken(tiktoken_encoding: Callable[[str], Any], name: str) -> None:
    encoding = tiktoken_encoding(name)
    ranks = encoding._mergeable_ranks
    excluded = regex_only_code_points()
    for document in textgen.documents(random.Random(name), 6_000, specials=False):
        text = "".join(char for char in document if ord(char) not in excluded)
        pieces = [match.encode() for match in regex.findall(encoding._pat_str, text)]
        ours = [ranks[token] for piece in pieces for token in encode_with_ranks(piece, ranks)]
        assert ours == encoding.encode_ordinary(text), text


def test_the_merges_encoder_is_tokenizers_bpe() -> None:
    """A ``tokenizers`` BPE trained by its own ``BpeTrainer`` on text full of ties (ByteLevel, GPT-2's regex)
    encodes every piece of other generated text as :func:`encode_with_merges` does with its merges list."""
    tokenizers = pytest.importorskip("tokenizers")
    from tokenizers import models, pre_tokenizers, trainers

    tokenizer = tokenizers.Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    trainer = trainers.BpeTrainer(vocab_size=700, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tokenizer.train_from_iterator(tie_corpus(3, 400, []) + textgen.documents(random.Random(3), 20_000), trainer)
    saved = json.loads(tokenizer.to_str())["model"]
    merges = [(from_byte_level(left), from_byte_level(right)) for left, right in saved["merges"]]
    vocab = {from_byte_level(token): i for token, i in saved["vocab"].items()}
    assert len(merges) > 300
    excluded = regex_only_code_points()
    texts = ["".join(char for char in document if ord(char) not in excluded)
             for document in tie_corpus(4, 200, []) + textgen.documents(random.Random(4), 8_000)]
    for text in texts:
        pieces = [match.encode() for match in regex.findall(GPT2_PATTERN, text)]
        assert [piece for piece, _ in tokenizer.pre_tokenizer.pre_tokenize_str(text)] == [
            "".join(BYTE_LEVEL[byte] for byte in piece) for piece in pieces], "the pre-tokenizers differ"
        ours = [vocab[token] for piece in pieces for token in encode_with_merges(piece, merges, vocab)]
        assert ours == tokenizer.encode(text).ids, text


def test_the_two_rules_differ_on_a_vocabulary_no_training_makes() -> None:
    """``abc`` learned as ``a`` + ``bc`` after ``ab``: the rank rule encodes the piece ``abc`` whole, the merges
    rule leaves ``ab`` + ``c``; each continuation starts from its own model's encoding."""
    ranks = BYTES | {b"ab": 256, b"bc": 257, b"abc": 258}
    merges = [(b"a", b"b"), (b"b", b"c"), (b"a", b"bc")]
    assert encode_with_ranks(b"abc", ranks) == [b"abc"]
    assert encode_with_merges(b"abc", merges) == [b"ab", b"c"]
    as_ranks = extend_rank_model(ranks, {}, r"\w+| ", ["abc abc abd"], 1)
    as_merges = extend_merges_model(ranks, merges, {}, r"\w+| ", ["abc abc abd"], 1)
    assert as_ranks.continuation.merges == [(b"ab", b"d")]
    assert as_merges.continuation.merges == [(b"ab", b"c"), (b"ab", b"d")]  # "abc" exists: no new token
    assert as_merges.merges[3:] == [(b"ab", b"c"), (b"ab", b"d")]
    assert as_ranks.ranks[b"abd"] == as_merges.vocab[b"abd"] == 259


# ------------------------------------------------------------------ continuing is training longer


def assert_continuing_is_training_longer(documents: list[str], pattern: str, special_tokens: list[str],
                                         before: int, more: int) -> None:
    ranks, specials, merges, _ = trained(documents, pattern, special_tokens, before)
    longer_ranks, longer_specials, longer_merges, _ = trained(documents, pattern, special_tokens, before + more)
    by_ranks = extend_rank_model(ranks, specials, pattern, documents, more, move_special_tokens=True)
    assert by_ranks.ranks == longer_ranks and by_ranks.special_tokens == longer_specials
    by_merges = extend_merges_model(ranks, merges, specials, pattern, documents, more, move_special_tokens=True)
    assert by_merges.vocab == longer_ranks and by_merges.special_tokens == longer_specials
    assert by_merges.merges == longer_merges
    kept = extend_rank_model(ranks, specials, pattern, documents, more)
    assert kept.special_tokens == specials
    assert sorted(kept.ranks.values())[len(ranks):] == list(range(len(ranks) + len(specials),
                                                                len(longer_ranks) + len(specials)))


@settings(max_examples=scaled(10), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32), words=st.integers(1, 60), pattern=st.sampled_from(PATTERNS),
       special_tokens=st.sampled_from(SPECIAL_TOKENS), before=st.integers(0, 80), more=st.integers(1, 40))
def test_continuing_on_the_training_corpus_is_training_longer_on_text_full_of_ties(
    seed: int, words: int, pattern: str, special_tokens: list[str], before: int, more: int
) -> None:
    assert_continuing_is_training_longer(tie_corpus(seed, words, special_tokens), pattern, special_tokens,
                                         before, more)


@pytest.mark.parametrize("path", CORPUS_FILES[:2])
def test_continuing_on_the_training_corpus_is_training_longer_on_the_shared_corpora(path: str) -> None:
    file = require_shared(*path.split("/"))
    [(_, documents)] = textgen.corpus_documents([file], random.Random(path), limit_bytes=scaled(3_000))
    assert_continuing_is_training_longer(documents, PATTERNS[CORPUS_FILES.index(path) % 3], ["<|endoftext|>"],
                                         60, 30)


@pytest.mark.slow
@pytest.mark.parametrize(("corpus_bytes", "before", "more"), [
    pytest.param(scaled(5_000), 100, 50, id="ci"),
    pytest.param(scaled(15_000), 200, 100, id="full", marks=FULL_SIZE),
])
def test_continuing_is_training_longer_on_every_shared_corpus(corpus_bytes: int, before: int, more: int) -> None:
    rng = random.Random(2503)
    for path in CORPUS_FILES:
        if (SHARED_DATA / path).exists():
            [(_, documents)] = textgen.corpus_documents([SHARED_DATA / path], rng, limit_bytes=corpus_bytes)
            assert_continuing_is_training_longer(documents, rng.choice(PATTERNS), ["<|endoftext|>"], before, more)


# ------------------------------------------------------------------------------ ids never move


@settings(max_examples=scaled(10), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32), pattern=st.sampled_from(PATTERNS), special_tokens=st.sampled_from(SPECIAL_TOKENS),
       before=st.integers(0, 60), more=st.integers(0, 40), hole=st.booleans())
def test_old_tokens_keep_their_ids_and_new_ones_follow_the_last_id(
    seed: int, pattern: str, special_tokens: list[str], before: int, more: int, hole: bool
) -> None:
    """On another corpus than the training one; special tokens placed after a hole, as cl100k's."""
    ranks, _, merges, _ = trained(tie_corpus(seed, 40, special_tokens), pattern, special_tokens, before)
    specials = {token: len(ranks) + hole + i for i, token in enumerate(special_tokens)}
    other = tie_corpus(seed + 1, 40, special_tokens)
    last = max([*ranks.values(), *specials.values()])
    result = extend_rank_model(ranks, specials, pattern, other, more)
    extra = result.continuation.tokens
    assert {token: result.ranks[token] for token in ranks} == ranks and result.special_tokens == specials
    assert [result.ranks[token] for token in extra] == list(range(last + 1, last + 1 + len(extra)))
    assert set(result.ranks) == set(ranks) | set(extra) and not set(extra) & set(ranks)
    by_merges = extend_merges_model(ranks, merges, specials, pattern, other, more)
    assert by_merges.merges[:len(merges)] == merges and by_merges.special_tokens == specials
    assert {token: by_merges.vocab[token] for token in ranks} == ranks
    moved = extend_rank_model(ranks, specials, pattern, other, more, move_special_tokens=True)
    learned = len(moved.continuation.tokens)
    assert sorted(moved.special_tokens.values()) == list(range(len(ranks) + learned,
                                                               len(ranks) + learned + len(specials)))
    assert moved.special_id_map == {old: moved.special_tokens[token] for token, old in specials.items()}
    assert moved.continuation.tokens == extra


def test_a_byte_the_model_lacks_is_refused_by_name() -> None:
    ranks = {bytes([byte]): byte for byte in range(256) if byte != 0xC3}
    with pytest.raises(ValueError, match=r"b'\\xc3' is not a token"):
        extend_rank_model(ranks, {}, r"\w+", ["café"], 3)


def test_the_reference_s_examples_run() -> None:
    import doctest

    import naive_extend_bpe

    result = doctest.testmod(naive_extend_bpe)
    assert result.failed == 0 and result.attempted > 0
